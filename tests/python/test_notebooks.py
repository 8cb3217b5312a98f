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
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert {"01_tour.ipynb", "02_cross_checking.ipynb"} <= {p.name for p in NOTEBOOKS}


@pytest.fixture
def kernel_of_this_interpreter(tmp_path, monkeypatch):
    """Make the notebooks' kernel "python3" run ipykernel with sys.executable. Left alone, it
    resolves to a kernelspec whose argv is `python` (the first one on PATH, maybe not the
    interpreter under test, or one without dmlops). JUPYTER_PATH directories are searched
    before every other kernelspec location."""
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    # the kernel inherits this environment: draw off screen, and import the package under test
    # exactly as this process does
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, kernel_of_this_interpreter):
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == sys.executable
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, allow_errors=False, resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    assert all(cell.execution_count is not None for cell in nb.cells if cell.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, \
                f"{path.name} cell {i} has outputs: clear them (jupyter nbconvert --clear-output --inplace {path.name})"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
