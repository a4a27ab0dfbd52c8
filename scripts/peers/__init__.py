"""The engines and helpers of scripts/bench_peers.py: one module per job."""
