"""Documentation that cannot rot: every docstring example runs as a doctest, every public
function and class documents its parameters, errors and examples (numpy style), and the
descriptor base renders fields for help() and Jupyter."""

import contextlib
import doctest
import html.parser
import importlib
import inspect
import io
import pkgutil
import pydoc
from pathlib import Path

import numpy as np
import pytest

import dmlops
from dmlops._descriptor import Descriptor

MODULES = sorted(f"dmlops.{m.name}" for m in pkgutil.iter_modules(dmlops.__path__) if m.name != "_core")
PUBLIC = [name for name in dmlops.__all__ if name not in ("DTYPES", "dxdispatch")]
OPERATOR_FUNCTIONS = ("pad", "unfold", "fold", "upsample_2d", "resample", "lp_pooling", "convolution")
T = dmlops.TensorDesc

# One descriptor of every class, with optional fields set where the class has them.
DESCRIPTORS = [
    dmlops.PaddingDesc(T("int16", (3, 5)), start_padding=(1, 2), end_padding=(0, 3), padding_value=-2.5),
    dmlops.Padding1Desc(T("float16", (2, 3)), padding_mode="wrap", start_padding=(0, 5), end_padding=(1, 0)),
    dmlops.UnfoldDesc(T("float32", (1, 2, 6, 5)), window_sizes=(2, 3), strides=(2, 1)),
    dmlops.FoldDesc(T("float32", (1, 8, 4)), T("float32", (1, 2, 4, 5)), window_sizes=(2, 2), strides=(1, 2),
                    dilations=(2, 1)),
    dmlops.Upsample2DDesc(T("float32", (1, 2, 3, 4)), scale_size=(2, 3), interpolation_mode="linear"),
    dmlops.ResampleDesc(T("float32", (1, 2, 5, 5)), scales=(1, 1, 1.5, 0.6)),
    dmlops.Resample1Desc(T("float32", (5, 5)), scales=(2, 2), input_pixel_offsets=(0, 0), output_pixel_offsets=(0, 0)),
    dmlops.Resample2Desc(T("float32", (4, 6)), scales=(2.5, 0.5), rounding_direction="decreasing"),
    dmlops.Resample3Desc(T("float32", (9, 9)), scales=(0.5, 0.3), rounding_direction="increasing",
                         interpolation_mode="linear", antialiased=True),
    dmlops.LpPoolingDesc(T("float32", (1, 2, 7, 7)), window_size=(3, 3), strides=(2, 2), p=3),
    dmlops.LpPooling1Desc(T("float64", (1, 2, 7)), window_size=(2,), dilations=(3,), start_padding=(1,), p=1),
    dmlops.ConvolutionDesc(T("float32", (1, 4, 6, 6)), T("float32", (4, 2, 3, 3)), bias=T("float32", (1, 4, 1, 1)),
                           group_count=2, fused_activation=dmlops.Activation("clip", min=-0.5, max=0.5)),
]


def test_descriptor_list_covers_every_class():
    classes = {getattr(dmlops, name) for name in PUBLIC}
    assert {type(d) for d in DESCRIPTORS} == {c for c in classes if isinstance(c, type) and issubclass(c, Descriptor)}


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module):
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    mod = importlib.import_module(module)
    for test in finder.find(mod, module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {module} failed (output above)"


def test_every_public_object_has_examples_that_run():
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in PUBLIC:
        obj = getattr(dmlops, name)
        examples = sum(len(t.examples) for t in finder.find(obj, name) if t.name in (name, f"{name}.__init__"))
        assert examples > 0, f"dmlops.{name} has no Examples"


def sections(doc):
    """The numpy-style section headers of a docstring (a title underlined by dashes)."""
    lines = inspect.cleandoc(doc).splitlines()
    return {lines[i].strip() for i in range(len(lines) - 1)
            if lines[i].strip() and set(lines[i + 1].strip()) == {"-"} and len(lines[i + 1].strip()) == len(lines[i].strip())}


@pytest.mark.parametrize("name", PUBLIC)
def test_numpy_style_sections(name):
    obj = getattr(dmlops, name)
    found = sections(obj.__doc__ or "")
    if inspect.isclass(obj):
        required = {"Parameters", "Raises", "Examples"}
    else:
        signature = inspect.signature(obj)
        required = {"Examples"}
        if signature.parameters:
            required |= {"Parameters", "Raises"}
        if signature.return_annotation not in ("None", None):
            required.add("Returns")
        if name in OPERATOR_FUNCTIONS:
            required |= {"Notes", "See Also"}
    assert required <= found, f"dmlops.{name} lacks {sorted(required - found)}"


@pytest.mark.parametrize("name", [n for n in PUBLIC if inspect.isclass(getattr(dmlops, n))])
def test_public_methods_and_properties_have_docstrings(name):
    cls = getattr(dmlops, name)
    for attr, value in inspect.getmembers(cls):
        if attr.startswith("_") and attr != "__call__":
            continue
        if callable(value) or isinstance(value, property):
            assert inspect.getdoc(value), f"dmlops.{name}.{attr} has no docstring"


@pytest.mark.parametrize("name", ["dxdispatch.load", "dxdispatch.run", "dxdispatch.Model.run"])
def test_dxdispatch_entry_points_are_documented(name):
    obj = dmlops
    for part in name.split("."):
        obj = getattr(obj, part)
    assert {"Parameters", "Returns", "Raises"} <= sections(obj.__doc__)


def test_help_pad_tells_everything():
    text = pydoc.render_doc(dmlops.pad, renderer=pydoc.plaintext)
    for needed in ("constant", "edge", "reflection", "symmetric", "wrap",   # the modes
                   "replicate", "circular", "np.pad", "ONNX",                # the naming trap
                   "larger than the input", "bool", "float16", "strides",    # what it accepts
                   "out :", "Returns", "Raises", "ValueError", "TypeError", "Examples"):
        assert needed in text, needed


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: type(d).__name__)
def test_field_properties_document_the_struct_member(desc):
    for field in desc.FIELDS:
        doc = getattr(type(desc), field.name).__doc__
        assert doc.startswith(f"``{field.dml}``: "), (field.name, doc)
        if field.kind == "enum":
            assert all(repr(name) in doc for name in field.enum.names)
        if field.optional:
            assert "None" in doc


def test_field_docs_read_well_in_help():
    text = pydoc.render_doc(dmlops.Padding1Desc, renderer=pydoc.plaintext)
    assert "``PaddingMode``: DML_PADDING_MODE, one of 'constant', 'edge', 'reflection', 'symmetric', 'wrap'" in text
    assert "``StartPadding``: UINT per dimension, a tuple of int (DimensionCount entries in the struct)" in text
    conv = pydoc.render_doc(dmlops.ConvolutionDesc, renderer=pydoc.plaintext)
    assert "``BiasTensor``: DML_TENSOR_DESC, a dmlops.TensorDesc (dtype, sizes, strides); None when" in conv


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: type(d).__name__)
def test_repr_is_one_field_per_line_and_evaluates_back(desc):
    lines = repr(desc).splitlines()
    assert lines[0] == f"{type(desc).__name__}(" and lines[-1] == ")"
    assert [line.split("=")[0].strip() for line in lines[1:-1]] == [f.name for f in desc.FIELDS]
    names = {"TensorDesc": dmlops.TensorDesc, "Activation": dmlops.Activation, type(desc).__name__: type(desc)}
    assert eval(repr(desc), names) == desc


class _Table(html.parser.HTMLParser):
    """Collects the cells of each row, the caption text, and checks that tags nest."""

    def __init__(self):
        super().__init__()
        self.rows, self.caption, self.open = [], "", []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        assert self.open.pop() == tag

    def handle_data(self, data):
        if "caption" in self.open:
            self.caption += data
        elif self.open and self.open[-1] in ("td", "th", "code"):
            self.rows[-1][-1] += data


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: type(d).__name__)
def test_repr_html_is_a_table_of_the_fields(desc):
    table = _Table()
    table.feed(desc._repr_html_())
    table.close()
    assert table.open == []
    assert table.rows[0] == ["field", "DirectML", "value"]
    assert [row[:2] for row in table.rows[1:]] == [[f.name, f.dml] for f in desc.FIELDS]
    assert type(desc).__name__ in table.caption and f"DML_{desc.OPERATOR}_OPERATOR_DESC" in table.caption
    out = desc.output
    assert table.caption.endswith(f"→ {out.dtype} {out.sizes}")
    values = dict((row[0], row[2]) for row in table.rows[1:])
    assert values["input"] == f"{desc.input.dtype} {desc.input.sizes}"


def test_repr_html_shows_values_escaped():
    desc = DESCRIPTORS[-1]
    text = desc._repr_html_()
    assert "Activation(&#x27;clip&#x27;, min=-0.5, max=0.5)" in text
    assert "<td style='text-align:left'>cross_correlation</td>" in text
    strided = dmlops.UnfoldDesc(T("float32", (1, 1, 4, 4), (16, 16, 1, 4)), window_sizes=(2, 2))
    assert "float32 (1, 1, 4, 4) strides (16, 16, 1, 4)" in strided._repr_html_()
    table = _Table()
    table.feed(dmlops.Resample1Desc(T("uint8", (3,)), scales=(2,))._repr_html_())
    assert dict((r[0], r[2]) for r in table.rows[1:])["input_pixel_offsets"] == "(0.5,)"


def test_descriptor_pictures_in_the_tour_run_on_arrays():
    # the descriptors above are valid and runnable, so the tables show real operators
    rng = np.random.default_rng(5)
    for desc in DESCRIPTORS:
        names = [n for n in ("input", "filter", "bias") if getattr(desc, n, None) is not None]
        arrays = [rng.standard_normal(getattr(desc, n).sizes).astype(getattr(desc, n).dtype) for n in names]
        assert desc(*arrays).shape == desc.output.sizes


def test_readme_quick_start_runs():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        # help() comes from the site module, which the sanitizer stage turns off (python -S).
        exec(compile(code, "README.md quick start", "exec"), {"help": pydoc.help})
    assert "Pad an array with DirectML PADDING1 semantics" in printed.getvalue()  # help(dmlops.pad)


ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "notebooks" not in p.relative_to(ROOT / "docs").parts)


def doctest_text(page):
    """The page with every line outside its ```python fences blanked: doctest reads the examples
    and reports them at their own line numbers."""
    kept, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        fence = line.strip()
        if not inside and fence == "```python":
            inside = True
            kept.append("")
        elif inside and fence == "```":
            inside = False
            kept.append("")
        else:
            kept.append(line if inside else "")
    assert not inside, f"{page}: a ```python block is not closed"
    return "\n".join(kept)


def test_there_are_documentation_pages():
    assert {"index.md", "api.md", "mapping.md", "architecture.md", "padding.md"} <= {p.name for p in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_documentation_examples_run(page):
    test = doctest.DocTestParser().get_doctest(doctest_text(page), {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {page} failed (output above)"


def test_api_reference_documents_every_public_name():
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [name for name in dmlops.__all__ if f"dmlops.{name}" not in api]
    assert not missing, f"docs/api.md does not document {missing}"


def test_the_repository_stands_on_its_own():
    # The documentation is in the repository: nothing may send a reader to files that are not.
    offenders = []
    for top in ("README.md", "python", "notebooks", "cpp", "docs", "tests", "bench", "scripts"):
        for path in [ROOT / top] if (ROOT / top).is_file() else sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in {".md", ".py", ".pyi", ".ipynb", ".cpp", ".hpp", ".txt", ""} \
                    and "notebooks" not in path.relative_to(ROOT).parts[1:]:
                text = path.read_text(encoding="utf-8", errors="replace")
                if "shared" + "/" in text:
                    offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"these files send readers to a folder outside the repository: {offenders}"
