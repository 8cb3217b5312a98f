"""Types: the hand-written stub of the extension matches what it exports, the package ships
py.typed, and mypy --strict accepts typed_example.py (every public function and descriptor)
and rejects misuse."""

import ast
import re
import sys
from pathlib import Path

import pytest
from mypy import api

import dmlops
import typed_example
from dmlops import _core

HERE = Path(__file__).resolve().parent
PACKAGE = Path(dmlops.__file__).resolve().parent
STUB = PACKAGE / "_core.pyi"

# Each line must draw an error: a check that could not fail would prove nothing.
MISUSE = '''\
import numpy as np
import dmlops
threads: str = dmlops.get_num_threads()
dmlops.pad(np.zeros(3), (1,), (1,), mode=3)
d = dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (1, 1, 4)), window_sizes=(2,))
strides: str = d.strides
d.no_such_field
dmlops._core.padding("Padding1", np.zeros(3))
dmlops.Activation("relu").to_dict().bad
'''
MISUSE_LINES = {3, 4, 6, 7, 8, 9}


def test_package_ships_py_typed_and_the_stub():
    assert (PACKAGE / "py.typed").is_file() and STUB.is_file()


def stub_functions():
    return {node.name: node for node in ast.parse(STUB.read_text()).body if isinstance(node, ast.FunctionDef)}


def runtime_arity(function):
    """The parameter count of a pybind11 function, from the signature on its docstring's first line."""
    signature = function.__doc__.splitlines()[0]
    inside = signature[signature.index("(") + 1:signature.rindex(") ->")]
    depth, count = 0, 1 if inside.strip() else 0
    for ch in inside:
        depth += ch in "[("
        depth -= ch in "])"
        count += ch == "," and depth == 0
    return count


def test_stub_declares_exactly_what_the_extension_exports():
    exported = {name for name in dir(_core) if not name.startswith("_")}
    assert set(stub_functions()) == exported


@pytest.mark.parametrize("name", sorted(n for n in dir(_core) if not n.startswith("_")))
def test_stub_parameters_match_the_extension(name):
    node = stub_functions()[name]
    assert len(node.args.args) == runtime_arity(getattr(_core, name)), name
    assert node.returns is not None and all(a.annotation is not None for a in node.args.args)


@pytest.fixture
def mypy_run(tmp_path, monkeypatch):
    # An editable install is found through an import hook mypy cannot follow: point it at the
    # package's source directory, unless the package sits in site-packages (mypy finds it there).
    if PACKAGE.parent.name != "site-packages":
        monkeypatch.setenv("MYPYPATH", str(PACKAGE.parent))

    def run(*files):
        return api.run(["--strict", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
                        "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}", *map(str, files)])
    return run


def test_mypy_strict_accepts_the_typed_example_and_rejects_misuse(mypy_run, tmp_path):
    misuse = tmp_path / "misuse.py"
    misuse.write_text(MISUSE)
    stdout, stderr, status = mypy_run(HERE / "typed_example.py", misuse)
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    # from a source tree (editable install) mypy also checks the package's own modules
    assert not [e for e in errors if "misuse.py" not in e], stdout + stderr
    flagged = {int(m.group(1)) for e in errors if (m := re.match(r".*misuse\.py:(\d+):", e))}
    assert flagged == MISUSE_LINES, stdout + stderr
    assert status == 1


def test_typed_example_runs():
    typed_example.main()


def test_typed_example_uses_every_public_name():
    source = (HERE / "typed_example.py").read_text()
    assert [name for name in dmlops.__all__ if f"dmlops.{name}" not in source and f"{name}." not in source] == []
