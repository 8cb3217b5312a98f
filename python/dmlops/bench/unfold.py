"""Unfold / Fold cases (issue 7): dmlops.unfold and dmlops.fold against numpy formulations and
torch's F.unfold / F.fold (2-D) or Tensor.unfold chains (3-D). ONNX has no unfold; ONNX Runtime's
Col2Im is fold's peer where it runs.

Both are data movement (fold sums K overlapping taps per output element, in tap order in numpy,
so the float32 sums give the same bits): bit-exact checks; limit copy bandwidth over the bytes
read plus written.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import dmlops

from ._case import COPY_GOALS, EXACT, Case, Peers, Setup, Tolerance, peer_or_reason, try_call
from ._harness import make_input


@dataclass(frozen=True)
class Geometry:
    shape: tuple
    window: tuple
    strides: tuple
    dilations: tuple
    start: tuple
    end: tuple

    @property
    def kwargs(self) -> dict:
        return dict(strides=self.strides, dilations=self.dilations, start_padding=self.start, end_padding=self.end)

    @property
    def spatial(self) -> tuple:
        return self.shape[2:]

    @property
    def blocks(self) -> tuple:
        return tuple((s + a + e - d * (w - 1) - 1) // st + 1 for s, w, st, d, a, e in
                     zip(self.spatial, self.window, self.strides, self.dilations, self.start, self.end))

    def detail(self) -> str:
        return f"window {self.window} stride {self.strides} dilation {self.dilations} pads {self.start} {self.end}"


def numpy_unfold(x: np.ndarray, g: Geometry) -> np.ndarray:
    """np.pad + sliding_window_view + transpose, then the copy into the (N, C*K, L) layout."""
    n, c = x.shape[:2]
    rank = len(g.window)
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(g.start, g.end)))
    extent = tuple(d * (w - 1) + 1 for w, d in zip(g.window, g.dilations))
    view = sliding_window_view(padded, extent, axis=tuple(range(2, 2 + rank)))  # (N, C, *positions, *extent)
    view = view[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in g.strides)
                + tuple(slice(None, None, d) for d in g.dilations)]
    order = (0, 1) + tuple(range(2 + rank, 2 + 2 * rank)) + tuple(range(2, 2 + rank))
    return view.transpose(order).reshape(n, c * math.prod(g.window), -1)


def numpy_fold(cols: np.ndarray, g: Geometry) -> np.ndarray:
    """One strided slice-add per window tap, in tap order (float16 accumulates in float32)."""
    n, rows, _ = cols.shape
    taps = math.prod(g.window)
    padded_sizes = tuple(s + a + e for s, a, e in zip(g.spatial, g.start, g.end))
    out = np.zeros((n, rows // taps) + padded_sizes, dtype=np.float32 if cols.dtype == np.float16 else cols.dtype)
    for kflat, k in enumerate(np.ndindex(*g.window)):
        where = tuple(slice(kd * d, kd * d + (b - 1) * s + 1, s)
                      for kd, d, b, s in zip(k, g.dilations, g.blocks, g.strides))
        out[(slice(None), slice(None)) + where] += cols[:, kflat::taps].reshape((n, rows // taps) + g.blocks)
    crop = tuple(slice(a, a + s) for a, s in zip(g.start, g.spatial))
    return out[(slice(None), slice(None)) + crop].astype(cols.dtype)


def torch_unfold(peers: Peers, x: np.ndarray, g: Geometry):
    if peers.torch is None:
        return peers.skipped["torch"]
    xt, F = peers.torch.from_numpy(x), peers.F
    rank = len(g.window)
    if rank == 2:
        if g.start != g.end:
            return "F.unfold pads symmetrically only"
        return try_call(lambda: F.unfold(xt, g.window, dilation=g.dilations, padding=g.start, stride=g.strides),
                        "torch")
    pad = [p for a, e in zip(reversed(g.start), reversed(g.end)) for p in (a, e)]
    extent = tuple(d * (w - 1) + 1 for w, d in zip(g.window, g.dilations))

    def chain():  # F.pad + Tensor.unfold per axis + permute + the contiguous copy
        v = F.pad(xt, pad) if any(pad) else xt
        for d in range(rank):
            v = v.unfold(2 + d, extent[d], g.strides[d])
        v = v[(slice(None),) * (2 + rank) + tuple(slice(None, None, d) for d in g.dilations)]
        order = (0, 1) + tuple(range(2 + rank, 2 + 2 * rank)) + tuple(range(2, 2 + rank))
        return v.permute(order).reshape(x.shape[0], -1, math.prod(g.blocks))

    return try_call(chain, "torch")


def torch_fold(peers: Peers, cols: np.ndarray, g: Geometry):
    if peers.torch is None:
        return peers.skipped["torch"]
    if len(g.window) != 2:
        return "F.fold is 2-D only"
    if g.start != g.end:
        return "F.fold pads symmetrically only"
    ct = peers.torch.from_numpy(cols)
    return try_call(lambda: peers.F.fold(ct, g.spatial, g.window, dilation=g.dilations, padding=g.start,
                                         stride=g.strides), "torch")


def onnx_fold(peers: Peers, cols: np.ndarray, g: Geometry, threads: int):
    if len(g.window) != 2:
        # ORT's Col2Im takes any rank in principle; keep to the documented 2-D use.
        return "ONNX Runtime's Col2Im is checked for 2-D folds only here"
    attrs = dict(dilations=list(g.dilations), pads=list(g.start + g.end), strides=list(g.strides))
    return peers.onnx_call("Col2Im", cols, threads, attrs,
                           (np.array(g.spatial, dtype=np.int64), np.array(g.window, dtype=np.int64)), opset=18)


def unfold_case(name: str, dtype: str, g: Geometry, tiers=("full",), goals=None, note: str = "") -> Case:
    def setup(peers: Peers, threads: int) -> Setup:
        x = make_input(g.shape, dtype)
        out_bytes = x.itemsize * x.shape[0] * x.shape[1] * math.prod(g.window) * math.prod(g.blocks)
        run = {}
        if peers.numpy:
            run["numpy"] = peer_or_reason(lambda: numpy_unfold(x, g), EXACT)
        run["torch"] = peer_or_reason(torch_unfold(peers, x, g), EXACT)
        run["onnxruntime"] = "ONNX has no unfold (im2col) operator"
        return Setup(lambda: dmlops.unfold(x, g.window, **g.kwargs), x.nbytes + out_bytes, run, same_bytes=out_bytes)

    return Case("unfold", "unfold", name, g.shape, dtype, g.detail(), "copy", setup, tiers,
                {**COPY_GOALS, **(goals or {})}, note)


def fold_case(name: str, dtype: str, g: Geometry, tiers=("full",), goals=None, note: str = "") -> Case:
    def setup(peers: Peers, threads: int) -> Setup:
        cols = np.ascontiguousarray(numpy_unfold(make_input(g.shape, dtype), g))
        out_bytes = cols.itemsize * math.prod(g.shape)
        run = {}
        if peers.numpy:
            run["numpy"] = peer_or_reason(lambda: numpy_fold(cols, g), EXACT)
        run["torch"] = peer_or_reason(torch_fold(peers, cols, g), EXACT)
        # ORT may sum the taps in another order: float32 rounding of K-term sums.
        taps = math.prod(g.window)
        run["onnxruntime"] = peer_or_reason(onnx_fold(peers, cols, g, threads),
                                            Tolerance(atol=2 * taps * float(np.finfo(cols.dtype).eps)))
        return Setup(lambda: dmlops.fold(cols, g.spatial, g.window, **g.kwargs), cols.nbytes + out_bytes, run)

    return Case("fold", "unfold", name, g.shape, dtype, g.detail(), "copy", setup, tiers, goals or {}, note)


def cases() -> list:
    # The target: a ResNet-style activation's 3x3 im2col with padding 1: unfold at least
    # 1.5x torch and 60% of copy bandwidth, fold at least 1.5x torch.
    target = Geometry((1, 64, 56, 56), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    volume = Geometry((1, 16, 32, 32, 32), (3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0))
    strided = Geometry((1, 64, 112, 112), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1))
    strided_volume = Geometry((1, 16, 32, 64, 64), (3, 3, 3), (1, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1))
    smoke = Geometry((1, 3, 7, 6), (3, 2), (2, 1), (1, 2), (1, 0), (0, 1))
    chain = "torch: Tensor.unfold chain + copy"
    return [
        unfold_case("nchw 3x3 pad1", "float32", target, ("full", "quick"), {"torch": 1.5, "limit": 0.60}),
        fold_case("nchw 3x3 pad1", "float32", target, ("full", "quick"), {"torch": 1.5}),
        unfold_case("ncdhw 3x3x3", "float32", volume, note=chain),
        fold_case("ncdhw 3x3x3", "float32", volume),
        unfold_case("nchw 3x3 s2 f16", "float16", strided),
        unfold_case("ncdhw 3x3x3 s2 pad1 f16", "float16", strided_volume, note=chain),
        fold_case("nchw 3x3 s2 f16", "float16", strided),
        unfold_case("smoke", "float32", smoke, ("smoke",)),
        fold_case("smoke", "float32", smoke, ("smoke",)),
    ]
