"""What an operator module declares (Case, Setup, Peer, Tolerance) and the peers it may call.

A Case is one benchmark shape of one operator. Its `setup(peers, threads)` builds the inputs and
returns a Setup: the dmlops call, the work it does (bytes moved, or FLOPs) and, for each peer
library, either a Peer (a call computing the same result, and the tolerance its result must
meet) or a sentence saying why that peer cannot run the case. The report (_report.py) checks
every Peer against dmlops before timing it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import numpy as np

PEERS = ("numpy", "torch", "onnxruntime")
# "quick": the target shapes, the run of --quick. "smoke": tiny shapes for the test suite.
TIERS = ("full", "quick", "smoke")


@dataclass(frozen=True)
class Tolerance:
    """How close a peer's result must be to dmlops'. `exact`: same shape, dtype and bits (data
    movement). Otherwise elementwise |dmlops - peer| <= atol * max(1, max|peer|) + rtol * |peer|
    in float64. `border` leaves out that many elements at each end of the last two axes (where a
    peer documents different edge handling)."""

    exact: bool = False
    rtol: float = 0.0
    atol: float = 0.0
    border: int = 0

    def __str__(self) -> str:
        if self.exact:
            return "bit-exact"
        text = f"|diff| <= {self.atol:.1e}*max(1,max|ref|) + {self.rtol:.1e}*|ref|"
        return text + (f" (borders of {self.border} left out)" if self.border else "")

    def mismatch(self, ours: np.ndarray, theirs: Any) -> Optional[str]:
        """None when `theirs` meets the tolerance against `ours`, else what differs."""
        theirs = np.asarray(theirs.numpy() if hasattr(theirs, "numpy") and not isinstance(theirs, np.ndarray)
                            else theirs)
        if ours.shape != theirs.shape:
            return f"shape {theirs.shape} != dmlops' {ours.shape}"
        if self.exact:
            if ours.dtype != theirs.dtype:
                return f"dtype {theirs.dtype} != dmlops' {ours.dtype}"
            a, b = np.ascontiguousarray(ours).view(np.uint8), np.ascontiguousarray(theirs).view(np.uint8)
            differing = int(np.count_nonzero(np.ascontiguousarray(ours) != np.ascontiguousarray(theirs)))
            return None if np.array_equal(a, b) else f"{differing} elements differ (bit-exact required)"
        if self.border:
            inner = (Ellipsis, slice(self.border, -self.border), slice(self.border, -self.border))
            ours, theirs = ours[inner], theirs[inner]
        a, b = ours.astype(np.float64), theirs.astype(np.float64)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            return "non-finite values"
        scale = max(1.0, float(np.abs(b).max(initial=0.0)))
        bound = self.atol * scale + self.rtol * np.abs(b)
        excess = np.abs(a - b) - bound
        if (excess <= 0).all():
            return None
        worst = int(np.argmax(excess))
        return (f"max |diff| {float(np.abs(a - b).flat[worst]):.3g} at flat index {worst} exceeds "
                f"{float(np.broadcast_to(bound, a.shape).flat[worst]):.3g} ({self})")


EXACT = Tolerance(exact=True)

# The parallel-runtime issue's goal for data movement (padding in every mode, unfold, nearest
# upsampling), on every CPU and thread count: at least 80% of the speed of a plain copy of the
# same bytes. A call that allocates its output also pays for the OS zeroing the fresh pages
# (outputs above the malloc cache, 32 MB with glibc), so it is judged against both copies: into
# an existing buffer, and into a new array; each is the faster of the same two methods at the
# case's thread count (Copier in _harness.py).
COPY_GOALS = {"copy": 0.80, "fresh copy": 0.80}

# The parallel-runtime issue's goal for every case of the report: on the 16-core Xeon, at 16
# threads, at least the speed of the faster of torch and ONNX Runtime.
EVERY_CASE_GOALS = {"faster peer@16": 1.0}


@dataclass
class Peer:
    call: Callable[[], Any]
    tolerance: Tolerance


@dataclass
class Setup:
    dmlops: Callable[[], np.ndarray]
    # Bytes read + written by the operator (limit "copy"), or FLOPs (limit "fma").
    work: float
    # Peer name -> Peer, or the reason it cannot run this case. A peer left out is "no formulation".
    peers: dict = field(default_factory=dict)
    # For data movement: the size in bytes of a plain copy doing the same work (the output's
    # size), timed beside dmlops in the same run as the yardstick of the "copy" and
    # "fresh copy" goals.
    same_bytes: Optional[int] = None
    # For convolution: the same call with its filter prepared once (ConvolutionDesc.prepare), as
    # ONNX Runtime's session holds its constant weights prepacked; timed beside the others and
    # compared with ONNX Runtime (torch packs on every call, as dmlops' plain call does).
    prepared: Optional[Callable[[], np.ndarray]] = None


@dataclass
class Case:
    op: str                  # the dmlops function: pad, convolution, lp_pooling, unfold, ...
    family: str              # the module it is declared in: padding, convolution, lp_pooling, ...
    name: str
    shape: tuple
    dtype: str
    detail: str              # mode, window, scale: what the name does not say
    limit: str               # "copy" (data movement) or "fma" (arithmetic)
    setup: Callable[["Peers", int], Setup]
    tiers: tuple = ("full",)
    # The operator issues' goals: {"torch": 1.5} = at least 1.5x faster than torch, {"faster
    # peer": 1.0} = at least as fast as the faster of torch and ONNX Runtime (like for like: ONNX
    # Runtime against dmlops' prepared call where there is one; _report.faster_peer), {"limit": 0.7} = at
    # least 70% of the limit, {"copy": 0.7} = at least 70% of the speed of a plain copy of the
    # same bytes into an existing buffer (Setup.same_bytes), {"fresh copy": 0.7} = of such a copy
    # into a newly allocated array, as dmlops' call allocates its output. A bare metric is judged
    # at every thread count of the run; "metric@N" only at N threads, "metric@max" only at the
    # run's largest count (the earlier issues' goals, stated for the 2-core machine's 2 threads).
    # Every case also has EVERY_CASE_GOALS.
    goals: dict = field(default_factory=dict)
    note: str = ""


class Peers:
    """The peer libraries importable here; each missing one is named once, with why.

    `exclude` leaves installed ones out (the report's --peers option, and the tests)."""

    def __init__(self, exclude: tuple = ()):
        self.skipped: dict = {}
        # Modules, or None when not loaded.
        self.torch: Any = None
        self.F: Any = None
        self.ort: Any = None
        self.onnx: Any = None
        self.versions: dict = {"numpy": np.__version__}
        if "torch" in exclude:
            self.skipped["torch"] = "excluded by --peers"
        else:
            self.torch = self._load("torch", "torch")
            if self.torch is not None:
                self.F = importlib.import_module("torch.nn.functional")
        if "onnxruntime" in exclude:
            self.skipped["onnxruntime"] = "excluded by --peers"
        else:
            self.ort = self._load("onnxruntime", "onnxruntime")
            self.onnx = self._load("onnxruntime", "onnx") if self.ort is not None else None
            if self.ort is not None and self.onnx is None:
                self.ort = None
        self.numpy = "numpy" not in exclude
        if not self.numpy:
            self.skipped["numpy"] = "excluded by --peers"

    def _load(self, peer: str, module: str):
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            self.skipped[peer] = f"{module} is not installed ({e.__class__.__name__}); pip install {module}"
            return None
        self.versions[module] = getattr(mod, "__version__", "unknown")
        return mod

    def set_threads(self, threads: int) -> None:
        if self.torch is not None:
            self.torch.set_num_threads(threads)

    def onnx_call(self, op_type: str, x: np.ndarray, threads: int, attrs: Optional[dict] = None,
                  constants: tuple = (), opset: int = 19) -> Union[str, Callable[[], np.ndarray]]:
        """An ONNX Runtime session running one node `op_type` on x, built in memory with the onnx
        helper API, on `threads` intra-op threads: a call, or the reason it cannot run.

        `constants` are the node's further inputs after X, in order: an array becomes an
        initializer, None an omitted optional input."""
        if self.ort is None:
            return self.skipped.get("onnxruntime", "onnxruntime is not installed")
        helper = self.onnx.helper
        elem = helper.np_dtype_to_tensor_dtype(x.dtype)
        names, inits = ["X"], []
        for i, c in enumerate(constants):
            if c is None:
                names.append("")
                continue
            names.append(f"C{i}")
            inits.append(self.onnx.numpy_helper.from_array(np.asarray(c), f"C{i}"))
        node = helper.make_node(op_type, names, ["Y"], **(attrs or {}))
        graph = helper.make_graph([node], f"dmlops_bench_{op_type}", [helper.make_tensor_value_info("X", elem, x.shape)],
                                  [helper.make_tensor_value_info("Y", elem, None)], initializer=inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 9  # what opset 19 needs; newer onnx writes versions older runtimes refuse
        options = self.ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 4  # a refusal is reported as a reason below, not logged
        # Its idle intra-op threads would otherwise spin after every run and take a core from
        # whatever is timed next (dmlops at 2 threads ran no faster than at 1 on 2 cores).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        xc = np.ascontiguousarray(x)  # ORT takes dense arrays only
        try:
            session = self.ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            session.run(None, {"X": xc})
        except Exception as e:  # ORT raises its own classes (Fail, InvalidGraph, NotImplemented, ...)
            message = str(e).split("Status Message:")[-1].strip()
            return f"onnxruntime {op_type}: {message.splitlines()[0][:100]}"
        return lambda: session.run(None, {"X": xc})[0]


def peer_or_reason(call: Union[Callable, str], tolerance: Tolerance) -> Union[Peer, str]:
    """Peer(call, tolerance), or the reason string when `call` is one."""
    if isinstance(call, str):
        return call
    return Peer(call, tolerance)


def try_call(fn: Callable[[], Any], who: str) -> Union[Callable[[], Any], str]:
    """fn if one call succeeds, else why not (a dtype or mode the library's CPU kernels lack).
    torch reports missing kernels as RuntimeError subclasses or by message."""
    try:
        fn()
    except (RuntimeError, TypeError, ValueError) as e:
        return f"{who}: {str(e).splitlines()[0][:90]}"
    return fn
