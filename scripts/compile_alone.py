#!/usr/bin/env python3
"""Compiles each of the library's sources and headers alone, syntax only.

The builds compile src/ in unity batches (cmake/MhaPrecompiledHeaders.cmake),
where a file that lacks an include still compiles when an earlier file of its
batch has it; a consumer's add_subdirectory build compiles each file alone and
would fail. This check compiles every src/**/*.cpp, src/**/*.h and
include/mha/*.h on its own (a header that a source includes first is checked
by that source), -fsyntax-only, with the library's include paths
and definitions (from the build tree's compile_commands.json) and
<torch/torch.h> precompiled, as the library's builds have it: every file
parsed and its templates instantiated once, without compiling the library a
second time.

With clang (clang++-19, which scripts/setup.sh installs) the check builds its
own precompiled header of the LibTorch headers the library includes most
(LIBTORCH_COMMON, not all of <torch/torch.h>, whose torch::nn templates every
file would instantiate again: 3 s each), templates instantiated in it
(-fpch-instantiate-templates); a file then takes about a second (the whole
check: 124 s on 2 cores, 252 s with <torch/torch.h>). Without clang, the
library's own g++ command and precompiled header.

Usage: compile_alone.py --build BUILD_DIR [--jobs N] [--root ROOT] [--compiler CXX]
"""

import argparse
import concurrent.futures
import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys


def library_command(build: pathlib.Path):
    """The compile command of one of the library's own (unity) sources, and its folder."""
    commands = json.loads((build / "compile_commands.json").read_text(encoding="utf-8"))
    for entry in commands:
        if "/CMakeFiles/mha.dir/Unity/" in entry["file"]:
            return shlex.split(entry["command"]), entry["directory"]
    sys.exit("compile_alone: no compile command of the mha library in compile_commands.json")


def gcc_alone(command: list) -> list:
    """The library's command (its precompiled header included) without its output and input."""
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
    return args


def preprocessor_flags(command: list) -> list:
    """The command's definitions, include paths and language standard."""
    flags, take_next = [], False
    for arg in command:
        if take_next:
            flags.append(arg)
            take_next = False
        elif arg in ("-isystem", "-I", "-D"):
            flags.append(arg)
            take_next = True
        elif arg.startswith(("-D", "-I", "-std=")):
            flags.append(arg)
    if not any(f.startswith("-std=") for f in flags):
        flags.append("-std=c++17")
    return flags


# The LibTorch headers the library's files include most (not all of
# <torch/torch.h>: every file would then instantiate the templates of all of
# torch::nn's modules, three seconds each).
LIBTORCH_COMMON = ["c10/util/Exception.h", "torch/types.h", "ATen/ATen.h", "torch/arg.h",
                   "torch/nn/module.h", "torch/nn/pimpl.h", "torch/nn/modules/linear.h"]


def clang_alone(clang: str, command: list, build: pathlib.Path) -> list:
    """clang's command over its own precompiled LIBTORCH_COMMON (built once, in BUILD/compile_alone)."""
    folder = build / "compile_alone"
    folder.mkdir(exist_ok=True)
    header, pch = folder / "libtorch_common.hxx", folder / "libtorch_common.hxx.pch"
    header.write_text("".join(f"#include <{h}>\n" for h in LIBTORCH_COMMON), encoding="utf-8")
    flags = preprocessor_flags(command) + ["-fpch-instantiate-templates"]
    subprocess.run([clang, *flags, "-x", "c++-header", str(header), "-o", str(pch)], check=True)
    return [clang, *flags, "-include-pch", str(pch), "-Wno-pragma-once-outside-header"]


def first_include(source: pathlib.Path):
    """The header a source file includes first, as written ("attention/plan.h", "mha/mha.h")."""
    for line in source.read_text(encoding="utf-8").splitlines():
        match = re.match(r'#include [<"](.+)[>"]', line)
        if match:
            return match.group(1)
    return None


def files_to_check(root: pathlib.Path) -> list:
    """Every source, and every header that no source includes first: a source that
    includes its header first already compiles that header alone."""
    sources = sorted(root.glob("src/**/*.cpp"))
    checked_first = {first_include(source) for source in sources}
    headers = [h for h in sorted(root.glob("src/**/*.h"))
               if str(h.relative_to(root / "src")) not in checked_first]
    headers += [h for h in sorted(root.glob("include/mha/*.h"))
                if f"mha/{h.name}" not in checked_first]
    return sources + headers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, type=pathlib.Path)
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--compiler", default=shutil.which("clang++-19"),
                        help="a clang++ (default: clang++-19 when installed, else the library's g++)")
    args = parser.parse_args()
    command, directory = library_command(args.build)
    base = clang_alone(args.compiler, command, args.build.resolve()) if args.compiler \
        else gcc_alone(command)
    files = files_to_check(args.root)

    def compile_one(path):
        language = ["-x", "c++"] if path.suffix == ".h" else []
        result = subprocess.run(base + ["-fsyntax-only", *language, str(path)], cwd=directory,
                                capture_output=True, text=True)
        return path, result.returncode, result.stderr

    failures = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for path, code, stderr in pool.map(compile_one, files):
            if code != 0:
                failures += 1
                print(f"{path.relative_to(args.root)} does not compile alone:\n{stderr}")
    print(f"compile_alone: {len(files) - failures} of {len(files)} files compile alone "
          f"({pathlib.Path(base[0]).name})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
