#!/usr/bin/env python3
"""Compiles each of the library's sources and headers alone, syntax only.

The builds compile src/ in unity batches (cmake/MhaPrecompiledHeaders.cmake),
where a file that lacks an include still compiles when an earlier file of its
batch has it; a consumer's add_subdirectory build compiles each file alone and
would fail. This check compiles every src/**/*.cpp, src/**/*.h and
include/mha/*.h on its own with the library's exact compile command (from the
build tree's compile_commands.json, precompiled <torch/torch.h> included) and
-fsyntax-only: every file parsed and its templates instantiated once, without
compiling the library a second time.

Usage: compile_alone.py --build BUILD_DIR [--jobs N] [--root ROOT]
"""

import argparse
import concurrent.futures
import json
import pathlib
import shlex
import subprocess
import sys


def library_command(build: pathlib.Path):
    """The compile command of one of the library's own (unity) sources, and its folder."""
    commands = json.loads((build / "compile_commands.json").read_text(encoding="utf-8"))
    for entry in commands:
        if "/CMakeFiles/mha.dir/Unity/" in entry["file"]:
            return shlex.split(entry["command"]), entry["directory"]
    sys.exit("compile_alone: no compile command of the mha library in compile_commands.json")


def alone(command: list, path: pathlib.Path) -> list:
    """`command` turned into a syntax-only compile of `path` alone."""
    args, skip = [], False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg in ("-o", "-MT", "-MF", "-c"):
            skip = arg != "-c"
            continue
        if arg in ("-MD", "-MMD") or arg.endswith((".cxx", ".cpp")):
            continue
        args.append(arg)
    language = ["-x", "c++"] if path.suffix == ".h" else []
    return args + ["-fsyntax-only"] + language + [str(path)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, type=pathlib.Path)
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    command, directory = library_command(args.build)
    files = sorted(args.root.glob("src/**/*.cpp")) + sorted(args.root.glob("src/**/*.h")) + \
        sorted(args.root.glob("include/mha/*.h"))

    def compile_one(path):
        result = subprocess.run(alone(command, path), cwd=directory, capture_output=True,
                                text=True)
        return path, result.returncode, result.stderr

    failures = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for path, code, stderr in pool.map(compile_one, files):
            if code != 0:
                failures += 1
                print(f"{path.relative_to(args.root)} does not compile alone:\n{stderr}")
    print(f"compile_alone: {len(files) - failures} of {len(files)} files compile alone")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
