"""Upsample2D / Resample cases (issue 5): dmlops.upsample_2d and dmlops.resample against a numpy
formulation, torch's F.interpolate and ONNX Runtime's Resize.

Nearest neighbour is data movement (bit-exact checks). Linear blends 2 or 4 inputs per output:
still bound by memory, not arithmetic, so its limit is copy bandwidth too (bytes read plus
written). A 5-D NCDHW input never mixes depth slices, so torch and ONNX Runtime run their 4-D
kernels on the (N, C*D, H, W) view (a free reshape).
"""
from __future__ import annotations

import numpy as np

import dmlops

from ._case import COPY_GOALS, EXACT, Case, Peers, Setup, Tolerance, peer_or_reason, try_call
from ._harness import make_input


def is_upsample(scale: float, antialiased: bool) -> bool:
    return float(scale).is_integer() and scale >= 1 and not antialiased


def axis_table(n: int, m: int, scale: float):
    """Half-pixel linear indices and weights of one axis (docs/semantics/resample.md), float64."""
    c = np.clip((np.arange(m) + 0.5) / scale - 0.5, 0, n - 1)
    i0 = np.floor(c).astype(np.intp)
    return i0, np.minimum(i0 + 1, n - 1), c - i0


def antialias_matrix(n: int, m: int, scale: float) -> np.ndarray:
    """The (m, n) weights of one axis downscaled with ONNX Resize's antialias rule (half-pixel
    source x; taps floor(x) + j, j in [floor(-1/scale) + 1, 1 - that], the left tap x - 1 when x
    is whole; weights max(0, 1 - |j - frac| * scale) normalised; taps past the ends read the edge
    element), float64."""
    x = (np.arange(m) + 0.5) / scale - 0.5
    base = np.floor(x)
    frac = x - base
    whole = frac == 0
    base, frac = np.where(whole, base - 1, base), np.where(whole, 1.0, frac)
    start = int(np.floor(-1 / scale)) + 1
    taps = np.arange(start, 2 - start)
    w = np.clip(1 - np.abs(taps[None, :] - frac[:, None]) * scale, 0, 1)
    w /= w.sum(axis=1, keepdims=True)
    matrix = np.zeros((m, n))
    cols = np.clip(base[:, None].astype(np.intp) + taps[None, :], 0, n - 1)
    np.add.at(matrix, (np.repeat(np.arange(m), len(taps)), cols.ravel()), w.ravel())
    return matrix


def numpy_resample(x: np.ndarray, scale: float, mode: str, antialiased: bool):
    """The formulation a user would write: a broadcast copy for integer nearest, fancy indexing for
    fractional nearest, two separable blends (float32 weights) for linear, and for antialiased
    downscaling a dense float32 weight matrix per axis applied with two matmuls."""
    n_h, n_w = x.shape[-2:]
    if antialiased:
        m_h, m_w = int(np.floor(n_h * scale)), int(np.floor(n_w * scale))
        rows_h = antialias_matrix(n_h, m_h, scale).astype(np.float32)
        rows_w_t = antialias_matrix(n_w, m_w, scale).T.astype(np.float32).copy()
        return lambda: np.matmul(rows_h, np.matmul(x.astype(np.float32, copy=False), rows_w_t)).astype(x.dtype, copy=False)
    m_h, m_w = int(np.floor(n_h * scale)), int(np.floor(n_w * scale))
    lead = x.shape[:-2]
    if mode == "nearest_neighbor":
        if is_upsample(scale, antialiased):
            s = int(scale)
            return lambda: np.broadcast_to(x[..., :, None, :, None], lead + (n_h, s, n_w, s)).reshape(lead + (m_h, m_w))
        rows = np.minimum(np.floor((np.arange(m_h) + 0.5) / scale), n_h - 1).astype(np.intp)
        cols = np.minimum(np.floor((np.arange(m_w) + 0.5) / scale), n_w - 1).astype(np.intp)
        return lambda: x[..., rows[:, None], cols]
    h0, h1, wh = axis_table(n_h, m_h, scale)
    w0, w1, ww = axis_table(n_w, m_w, scale)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    wh, ww = wh.astype(acc)[:, None], ww.astype(acc)

    def run():
        xa = x.astype(acc, copy=False)
        t = xa[..., w0] * (1 - ww) + xa[..., w1] * ww
        return (t[..., h0, :] * (1 - wh) + t[..., h1, :] * wh).astype(x.dtype, copy=False)
    return run


def as_4d(x: np.ndarray) -> np.ndarray:
    return x.reshape((x.shape[0], -1) + x.shape[-2:]) if x.ndim > 4 else x


def torch_resample(peers: Peers, x: np.ndarray, scale: float, mode: str, antialiased: bool):
    if peers.torch is None:
        return peers.skipped["torch"]
    x4 = peers.torch.from_numpy(as_4d(x))
    out_shape = x.shape[:-2] + tuple(int(np.floor(n * scale)) for n in x.shape[-2:])
    if mode == "nearest_neighbor":
        # Integer scales: "nearest" repeats pixels; fractional: "nearest-exact" is RESAMPLE1's
        # half-pixel, round-half-up rule.
        tmode = "nearest" if is_upsample(scale, antialiased) else "nearest-exact"
        return try_call(lambda: peers.F.interpolate(x4, scale_factor=scale, mode=tmode).reshape(out_shape), "torch")
    return try_call(lambda: peers.F.interpolate(x4, scale_factor=scale, mode="bilinear", align_corners=False,
                                                antialias=antialiased).reshape(out_shape), "torch")


def onnx_resample(peers: Peers, x: np.ndarray, scale: float, mode: str, antialiased: bool, threads: int):
    x4 = as_4d(x)
    out_shape = x.shape[:-2] + tuple(int(np.floor(n * scale)) for n in x.shape[-2:])
    attrs: dict = dict(coordinate_transformation_mode="half_pixel")
    if mode == "nearest_neighbor":
        attrs.update(mode="nearest", nearest_mode="round_prefer_ceil")  # floor((o + 0.5) / scale)
    else:
        attrs.update(mode="linear", antialias=int(antialiased))
    scales = np.array([1, 1, scale, scale], dtype=np.float32)
    call = peers.onnx_call("Resize", x4, threads, attrs, (None, scales))
    return call if isinstance(call, str) else (lambda: call().reshape(out_shape))


def case(name: str, shape: tuple, dtype: str, scale: float, mode: str, antialiased: bool = False, tiers=("full",),
         goals=None, note: str = "") -> Case:
    def setup(peers: Peers, threads: int) -> Setup:
        x = make_input(shape, dtype)
        if mode == "nearest_neighbor":
            tol = tol_peer = EXACT
        else:
            # numpy blends with float32 weights like dmlops; torch and ONNX Runtime compute their
            # source coordinates in float32 (dmlops in float64); antialiased borders differ (torch
            # leaves out taps outside the input, DirectML repeats the edge pixel).
            small = 1e-3 if dtype == "float16" else 1e-5
            tol = Tolerance(atol=small)
            tol_peer = Tolerance(atol=max(small, 1e-4), border=8 if antialiased else 0)
        run = {}
        if peers.numpy:
            run["numpy"] = peer_or_reason(numpy_resample(x, scale, mode, antialiased), tol)
        run["torch"] = peer_or_reason(torch_resample(peers, x, scale, mode, antialiased), tol_peer)
        run["onnxruntime"] = peer_or_reason(onnx_resample(peers, x, scale, mode, antialiased, threads), tol_peer)
        out_bytes = x.itemsize * int(np.prod(shape[:-2])) * int(np.prod([int(np.floor(n * scale)) for n in shape[-2:]]))
        if is_upsample(scale, antialiased):
            s = int(scale)
            fn = lambda: dmlops.upsample_2d(x, (s, s), mode)  # noqa: E731
        else:
            scales = (1.0,) * (x.ndim - 2) + (scale, scale)
            fn = lambda: dmlops.resample(x, scales, mode, antialiased=antialiased)  # noqa: E731
        # Nearest neighbour moves data: timed beside a copy of its output's bytes.
        return Setup(fn, x.nbytes + out_bytes, run, same_bytes=out_bytes if mode == "nearest_neighbor" else None)

    op = "upsample_2d" if is_upsample(scale, antialiased) else "resample"
    short = {"nearest_neighbor": "nearest", "linear": "linear"}[mode] + (" antialiased" if antialiased else "")
    return Case(op, "resample", f"{name} {short}", shape, dtype, f"x{scale:g} on H, W", "copy", setup, tiers,
                {**(COPY_GOALS if mode == "nearest_neighbor" else {}), **(goals or {})}, note)


def cases() -> list:
    # The targets (float32 x2, 4-D and 5-D), at 2 threads: nearest at least 70% of copy
    # bandwidth and 1.5x torch's "nearest"; bilinear at least 1.5x torch's "bilinear".
    nearest_goals, linear_goals = {"limit@max": 0.70, "torch@max": 1.5}, {"torch@max": 1.5}
    out = []
    for name, shape in (("nchw x2", (1, 64, 128, 128)), ("ncdhw x2", (1, 16, 8, 64, 64))):
        quick = ("full", "quick") if name == "nchw x2" else ("full",)
        out.append(case(name, shape, "float32", 2, "nearest_neighbor", tiers=quick, goals=nearest_goals))
        out.append(case(name, shape, "float32", 2, "linear", tiers=quick, goals=linear_goals))
    out += [
        case("nchw f16 x2", (1, 64, 128, 128), "float16", 2, "nearest_neighbor"),
        case("nchw f16 x2", (1, 64, 128, 128), "float16", 2, "linear"),
        case("image u8 x3", (1, 3, 360, 640), "uint8", 3, "nearest_neighbor"),
        case("nchw x1.75", (1, 64, 128, 128), "float32", 1.75, "nearest_neighbor"),
        case("nchw x1.75", (1, 64, 128, 128), "float32", 1.75, "linear"),
        case("quarter", (1, 16, 512, 512), "float32", 0.25, "linear", antialiased=True),
        case("smoke x2", (1, 3, 5, 7), "float32", 2, "nearest_neighbor", tiers=("smoke",)),
        case("smoke x1.5", (1, 2, 6, 10), "float32", 1.5, "linear", tiers=("smoke",)),
        case("smoke x0.3", (1, 2, 23, 17), "float32", 0.3, "linear", antialiased=True, tiers=("smoke",)),
    ]
    return out
