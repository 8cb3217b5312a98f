"""The notebooks in notebooks/ run top to bottom in a fresh kernel of this interpreter (so a
notebook that stops working fails the suite), and are committed without outputs (so their
diffs show only what a person wrote)."""

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
KERNEL = "dmlops-test-python"


def test_there_are_notebooks():
    assert {"01_tour.ipynb", "02_cross_checking.ipynb"} <= {p.name for p in NOTEBOOKS}


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory):
    """A kernelspec that runs ipykernel with sys.executable: the notebooks' "python3" could
    otherwise resolve to whatever `python` is first on PATH, not the interpreter under test."""
    spec_dir = tmp_path_factory.mktemp("kernels") / KERNEL
    spec_dir.mkdir()
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})", "language": "python"}))
    return KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, kernel_specs, monkeypatch):
    # the kernel inherits this environment: draw off screen, and make the package under test
    # importable exactly as it is here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_specs)
    client = NotebookClient(nb, km=km, timeout=120, allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    assert all(cell.outputs is not None for cell in nb.cells if cell.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, \
                f"{path.name} cell {i} has outputs: clear them (jupyter nbconvert --clear-output --inplace {path.name})"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
