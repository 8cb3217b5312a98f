"""Coverage-guided fuzzing of DxDispatch model files: ``dmlops.dxdispatch.load`` and
``Model.run`` on mutated bytes, with atheris (libFuzzer for Python).

The one rule checked: whatever the bytes, loading and running a model raises nothing but
``ModelError`` (no other exception, no crash, no hang past libFuzzer's ``-timeout``), and a
``writeFile`` never creates anything outside its output directory.

    python tests/fuzz/fuzz_dxdispatch.py -max_total_time=3600          # an hour's hunt
    python tests/fuzz/fuzz_dxdispatch.py CORPUS_DIR -runs=100000       # libFuzzer's own options

Without a corpus directory the model files of ``tests/data/dxdispatch`` seed a fresh one in a
temporary directory (libFuzzer adds what it finds to the first directory it is given). A
failure prints the input and leaves it as ``crash-*`` in the current directory; rerun the
script with that file as its only argument to reproduce it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import atheris

from dmlops import dxdispatch

# After the imports, every Python function loaded (dmlops' and what it calls) is instrumented:
# instrument_imports() misses modules that an editable install's import hook loads.
atheris.instrument_all()

SEEDS = Path(__file__).resolve().parents[1] / "data" / "dxdispatch"
WORK = Path(tempfile.mkdtemp(prefix="dmlops-fuzz-"))
MODEL, OUT = WORK / "model.json", WORK / "out" / "inside"


def test_one_input(data: bytes) -> None:
    MODEL.write_bytes(data)
    if OUT.parent.exists():
        shutil.rmtree(OUT.parent)
    try:
        dxdispatch.load(MODEL, base_dir=SEEDS).run(OUT)
    except dxdispatch.ModelError:
        pass
    escaped = sorted(set(os.listdir(WORK)) - {"model.json", "out"})
    if OUT.parent.exists():
        escaped += sorted(set(os.listdir(OUT.parent)) - {"inside"})
    if escaped:
        raise AssertionError(f"writeFile wrote outside its output directory: {escaped}")


def main() -> None:
    warnings.simplefilter("ignore", dxdispatch.ModelWarning)  # unknown fields are expected here
    args = sys.argv[1:]
    if not any(not a.startswith("-") for a in args):  # no corpus given: seed one
        corpus = Path(tempfile.mkdtemp(prefix="dmlops-fuzz-corpus-")) / "corpus"
        shutil.copytree(SEEDS, corpus)
        args.append(str(corpus))
    atheris.Setup([sys.argv[0], *args], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
