"""Runs the coverage-guided fuzz targets of tests/fuzz/targets.py with atheris (libFuzzer).

    python tests/fuzz/run.py                      # every target, 30 s each (scripts/test's stage)
    python tests/fuzz/run.py --seconds 3600 geometry -- build/fuzz/corpus-geometry
    python tests/fuzz/run.py descriptors -- -runs=100000

Each target runs in its own process, under an address-space limit (RLIMIT_AS, tests/fuzz/
isolated.py) and libFuzzer's own limits (-rss_limit_mb, -timeout per input), so a crash, a hang or
a runaway allocation is reported as that target's failure and the others still run. Arguments
after ``--`` go to libFuzzer (a corpus directory to keep and grow, -runs, -jobs, ...); crash
inputs are written to build/fuzz/ (replay one with ``run.py TARGET -- build/fuzz/crash-...``).
Exit status 0 when every target ran its time without a finding.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE.parents[1] / "build" / "fuzz"
LIMIT_MB = 4096


def dmlops_functions() -> list[types.FunctionType]:
    """Every Python function of the loaded dmlops modules, methods and properties included."""
    found: dict[int, types.FunctionType] = {}

    def visit(value: object, module: str) -> None:
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            for accessor in (value.fget, value.fset):
                visit(accessor, module)
        elif isinstance(value, types.FunctionType) and value.__module__ == module:
            found[id(value)] = value
        elif isinstance(value, type) and value.__module__ == module:
            for member in vars(value).values():
                visit(member, module)

    for name, module in list(sys.modules.items()):
        if name == "dmlops" or name.startswith("dmlops."):
            for value in vars(module).values():
                visit(value, name)
    return list(found.values())


def child(name: str, libfuzzer_args: list[str]) -> None:
    sys.path.insert(0, str(HERE))
    from isolated import limit_address_space
    limit_address_space(2 * LIMIT_MB << 20)  # libFuzzer's RSS check (LIMIT_MB) comes first when it can

    import atheris
    import targets

    # Coverage of dmlops' Python code (the C++ extension is not instrumented: its branches are
    # reached through the Python that calls it). After the imports: the editable install's import
    # hook is a custom loader, which atheris.instrument_imports does not see through.
    for function in dmlops_functions():
        atheris.instrument_func(function)
    fn = targets.TARGETS[name]
    atheris.Setup([sys.argv[0], *libfuzzer_args], lambda data: fn(atheris.FuzzedDataProvider(data)))
    atheris.Fuzz()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help="targets to run (default: all)")
    parser.add_argument("--seconds", type=int, default=30, help="time per target (default 30)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, rest = parser.parse_known_args(argv[:split])
    rest += argv[split + 1:]  # libFuzzer's own arguments
    if args.child:
        child(args.targets[0], rest)
        return 0
    sys.path.insert(0, str(HERE))
    import targets

    names = args.targets or sorted(targets.TARGETS)
    unknown = set(names) - set(targets.TARGETS)
    if unknown:
        parser.error(f"unknown target(s) {sorted(unknown)}; the targets are {sorted(targets.TARGETS)}")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for path in (Path(a) for a in rest if not a.startswith("-")):
        if not path.exists():  # a corpus directory to start
            path.mkdir(parents=True)
    failed = []
    for name in names:
        started = time.monotonic()
        command = [sys.executable, __file__, "--child", name, f"-max_total_time={args.seconds}", "-timeout=20",
                   f"-rss_limit_mb={LIMIT_MB}", f"-artifact_prefix={ARTIFACTS}/{name}-", "-print_final_stats=1", *rest]
        result = subprocess.run(command, env=dict(os.environ, PYTHONHASHSEED="0"), capture_output=True, text=True)
        log = result.stdout + result.stderr
        status = "ok" if result.returncode == 0 else f"FAILED (exit status {result.returncode})"
        runs = next((line.split(":")[-1].strip() for line in log.splitlines() if "stat::number_of_executed_units" in line),
                    "?")
        print(f"fuzz {name}: {status}, {runs} inputs in {time.monotonic() - started:.0f} s", flush=True)
        if result.returncode != 0:
            print(log[-8000:], flush=True)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
