"""Padding cases (issue 2): dmlops.pad against np.pad, torch's F.pad and ONNX Runtime's Pad.

Data movement: every peer must give the same bits, and the limit is copy bandwidth over the
input bytes read plus the output bytes written.
"""
from __future__ import annotations

import numpy as np

import dmlops

from ._case import COPY_GOALS, EXACT, Case, Peers, Setup, peer_or_reason, try_call
from ._harness import make_input

NUMPY_MODE: dict = {"constant": "constant", "edge": "edge", "reflection": "reflect", "symmetric": "symmetric",
              "wrap": "wrap"}
# torch and ONNX have no symmetric (half-sample) mode.
TORCH_MODE = {"constant": "constant", "edge": "replicate", "reflection": "reflect", "wrap": "circular"}
ONNX_MODE = {"constant": "constant", "edge": "edge", "reflection": "reflect", "wrap": "wrap"}
MODES = tuple(NUMPY_MODE)


def torch_pad(peers: Peers, x: np.ndarray, start: tuple, end: tuple, mode: str):
    """F.pad computing the same padding, or why it cannot."""
    if peers.torch is None:
        return peers.skipped["torch"]
    if mode not in TORCH_MODE:
        return f"torch has no {mode} mode"
    padded = [d for d in range(x.ndim) if start[d] or end[d]]
    first = padded[0]
    k = x.ndim - first  # torch pads the trailing k dims
    pad: list = []
    for d in reversed(range(first, x.ndim)):
        pad += [start[d], end[d]]
    xt = peers.torch.from_numpy(x)
    out_shape = tuple(n + s + e for n, s, e in zip(x.shape, start, end))
    tmode = TORCH_MODE[mode]
    if tmode == "constant":
        return try_call(lambda: peers.F.pad(xt, pad, mode="constant", value=0), "torch")
    # reflect/replicate/circular pad the last k <= 3 dims of a (k+1)- or (k+2)-D tensor.
    if k > 3:
        return f"torch {tmode} pads at most 3 trailing dims"
    if x.ndim > k + 2 or x.ndim == k:
        xt = xt.reshape((-1,) + x.shape[first:])
    return try_call(lambda: peers.F.pad(xt, pad, mode=tmode).reshape(out_shape), "torch")


def case(name: str, shape: tuple, dtype: str, start: tuple, end: tuple, mode: str, tiers=("full",),
         goals=None, note: str = "") -> Case:
    def setup(peers: Peers, threads: int) -> Setup:
        x = make_input(shape, dtype)
        pads = list(zip(start, end))
        out_bytes = x.itemsize * int(np.prod([n + s + e for n, s, e in zip(shape, start, end)]))
        run = {}
        if peers.numpy:
            run["numpy"] = peer_or_reason(lambda: np.pad(x, pads, mode=NUMPY_MODE[mode]), EXACT)
        run["torch"] = peer_or_reason(torch_pad(peers, x, start, end, mode), EXACT)
        if mode not in ONNX_MODE:
            run["onnxruntime"] = f"ONNX Pad has no {mode} mode"
        else:
            run["onnxruntime"] = peer_or_reason(peers.onnx_call(
                "Pad", x, threads, {"mode": ONNX_MODE[mode]}, (np.array(start + end, dtype=np.int64),)), EXACT)
        return Setup(lambda: dmlops.pad(x, start, end, mode=mode), x.nbytes + out_bytes, run, same_bytes=out_bytes)

    return Case("pad", "padding", f"{name} {mode}", shape, dtype, f"pads {start} {end}", "copy", setup, tiers,
                {**COPY_GOALS, **(goals or {})}, note)


# The padding issue's target: an NCHW activation padded by 2 on H and W (a 5x5 convolution's
# halo) at least 3x np.pad for constant, reflection and edge (its 1.5x-torch goal gave way to
# COPY_GOALS, which every case has).
TARGET_GOALS = {"numpy@max": 3.0}


def cases() -> list:
    nchw = ((1, 64, 256, 256), "float32", (0, 0, 2, 2), (0, 0, 2, 2))
    out = []
    for mode in MODES:
        target = mode in ("constant", "reflection", "edge")
        out.append(case("nchw-pad2", *nchw, mode, ("full", "quick") if mode in ("constant", "reflection") else ("full",),
                        TARGET_GOALS if target else None))
    out += [
        case("image-u8-pad16", (1, 3, 1080, 1920), "uint8", (0, 0, 16, 16), (0, 0, 16, 16), "reflection"),
        case("vector-f64-pad1000", (10_000_000,), "float64", (1000,), (1000,), "constant"),
        case("vector-f64-pad1000", (10_000_000,), "float64", (1000,), (1000,), "reflection"),
        case("ncdhw-pad1", (2, 8, 16, 64, 64), "float32", (0, 0, 1, 1, 1), (0, 0, 1, 1, 1), "constant"),
        case("ncdhw-pad1", (2, 8, 16, 64, 64), "float32", (0, 0, 1, 1, 1), (0, 0, 1, 1, 1), "edge"),
        # Pads several times the input: reflection folds repeatedly (torch requires pad < size).
        case("large-pad", (1, 64, 32, 32), "float32", (0, 0, 70, 45), (0, 0, 45, 70), "reflection"),
        case("smoke", (1, 3, 9, 11), "float32", (0, 0, 2, 3), (0, 0, 3, 2), "reflection", ("smoke",)),
        case("smoke", (2, 3, 5, 7), "uint8", (0, 1, 2, 0), (1, 0, 0, 4), "wrap", ("smoke",)),
    ]
    return out
