"""The rows of the peer benchmark and their markdown table (the style of docs/benchmarks.md)."""

import platform
import statistics
import subprocess
from dataclasses import dataclass
from typing import List, Optional


@dataclass
class Row:
    """One case x threads x peer: per-round medians of mha and of the peer."""
    case: str
    threads: str
    peer: str
    mha_ms: List[float]
    peer_ms: List[float]
    check: str                      # how the outputs compare with Python's
    gflop: Optional[float] = None   # GFLOP of one call (GEMM-bound rows)
    peak: Optional[float] = None    # median measured GEMM peak, GFLOP/s
    note: str = ""                  # why the peer has no times
    load: str = ""                  # 1-minute load average as the rounds started and ended
    target: Optional[float] = None  # the cell's target for mha / peer, before the floor rule
    floor_ms: Optional[float] = None  # the floor that binds; default: GFLOP over the GEMM peak

    def ratio(self):
        """The median of the per-round ratios mha / peer."""
        return statistics.median(m / p for m, p in zip(self.mha_ms, self.peer_ms))

    def share(self, ms):
        """The FLOP rate of a call of `ms` ms as a share of the GEMM peak."""
        return self.gflop / (ms * 1e-3) / self.peak

    def peer_floor_share(self):
        """The peer's median time's share of the floor that binds, or None without one."""
        floor = self.floor_ms
        if floor is None and self.gflop and self.peak:
            floor = self.gflop / self.peak * 1e3
        return floor / statistics.median(self.peer_ms) if floor and self.peer_ms else None

    def cell_target(self):
        """The target, raised to 1.0 where the peer runs at 90% or more of the floor that
        binds (a peer at the floor leaves no room for 0.9 of it); None without a target."""
        if self.target is None:
            return None
        share = self.peer_floor_share()
        return max(self.target, 1.0) if share is not None and share >= 0.9 else self.target


HEADER = ("| case | threads | peer | mha ms | peer ms | mha / peer | max abs diff from Python "
          "(mha; peer) | share of GEMM peak (mha; peer) | target | load |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def _ms(values):
    """The median of `values` in ms: 3 significant digits below 100, whole ms above."""
    if not values:
        return "-"
    ms = statistics.median(values)
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def line(row):
    """The row's markdown line."""
    if not row.peer_ms:
        timed = f"{_ms(row.mha_ms)} | - | {row.note}"
    else:
        timed = f"{_ms(row.mha_ms)} | {_ms(row.peer_ms)} | {row.ratio():.2f}"
    peak = "-"
    if row.peak and row.peer_ms:
        mha, peer = (row.share(statistics.median(v)) for v in (row.mha_ms, row.peer_ms))
        peak = f"{mha:.0%}; {peer:.0%} (peak {row.peak:.0f} GFLOP/s)"
    target = row.cell_target()
    verdict = "-"
    if target is not None and row.peer_ms:
        verdict = f"<= {target:.2g}: {'met' if row.ratio() <= target else 'missed'}"
    return (f"| {row.case} | {row.threads} | {row.peer} | {timed} | {row.check} | {peak} "
            f"| {verdict} | {row.load} |")


def cpu_model():
    """lscpu's model name."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(l.split(":", 1)[1].strip() for l in out.splitlines()
                     if l.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return model


def table(rows, header_line):
    """The header line, a blank line and the table."""
    return "\n".join([header_line, "", HEADER] + [line(r) for r in rows]) + "\n"
