"""Sphinx configuration of the dmlops documentation.

Build it with ``sphinx-build -W --keep-going -b html docs build/docs`` (scripts/test does, with
warnings as errors). Markdown pages go through myst-parser; the notebooks in ../notebooks are
rendered by myst-nb without being executed (the test suite executes them); the API reference is
autodoc over the installed package's numpy-style docstrings.
"""

import shutil
from pathlib import Path

import dmlops

HERE = Path(__file__).resolve().parent

project = "dmlops"
author = "the dmlops authors"
copyright = "the dmlops authors"
release = version = dmlops.__version__

extensions = [
    "myst_nb",                 # Markdown pages (myst-parser) and notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "numpydoc",
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# The notebooks live in ../notebooks (where the tests run them); Sphinx reads sources only under
# this folder, so the build copies them into notebooks/ (ignored by git) before reading.
_notebooks = HERE / "notebooks"
shutil.rmtree(_notebooks, ignore_errors=True)
_notebooks.mkdir()
for _nb in sorted((HERE.parent / "notebooks").glob("*.ipynb")):
    shutil.copy2(_nb, _notebooks / _nb.name)
nb_execution_mode = "off"      # committed without outputs; the test suite executes them

autodoc_member_order = "bysource"
autodoc_typehints = "none"     # the signatures and the Parameters sections say it
numpydoc_show_class_members = False
numpydoc_xref_param_type = False

# No network in the build: references to numpy are written out, not resolved through intersphinx.
intersphinx_mapping = {}

html_theme = "alabaster"
html_title = f"dmlops {release}"
html_theme_options = {"description": "DirectML operator semantics on the CPU", "page_width": "1100px"}
