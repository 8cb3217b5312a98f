"""Plain numpy references, written from the spec's formulas and independent of dmlops.

Nothing here calls dmlops; clarity beats speed. Each function names the spec section it
transcribes (shared/spec/operators.md).
"""

from __future__ import annotations

import numpy as np


def pad_source_index(mode: str, o: int, n: int, start: int) -> int:
    """Spec section 1: the input coordinate output coordinate ``o`` reads, or -1 (constant)."""
    i = o - start
    if 0 <= i < n:
        return i
    if mode == "constant":
        return -1
    if mode == "edge":
        return min(max(i, 0), n - 1)
    if mode == "reflection":
        if n == 1:
            return 0
        p = 2 * (n - 1)
        m = i % p  # Python's % is already non-negative for p > 0
        return m if m < n else p - m
    if mode == "symmetric":
        p = 2 * n
        m = i % p
        return m if m < n else p - 1 - m
    if mode == "wrap":
        return i % n
    raise ValueError(mode)


def pad_reference(x: np.ndarray, start, end, mode: str, value=0) -> np.ndarray:
    """Spec section 1, axis by axis: gather with one index list per axis, then overwrite every
    element whose index is -1 on any axis with ``value`` (constant mode)."""
    out_shape = tuple(n + s + e for n, s, e in zip(x.shape, start, end))
    index_lists = []
    for axis, n in enumerate(x.shape):
        index_lists.append([pad_source_index(mode, o, n, start[axis]) for o in range(out_shape[axis])])
    safe = [np.array([max(i, 0) for i in idx], dtype=np.intp) for idx in index_lists]
    y = x[np.ix_(*safe)].copy() if x.ndim else x.copy()
    if mode == "constant":
        fill = np.array(value).astype(x.dtype) if x.dtype != np.bool_ else np.bool_(value)
        for axis, idx in enumerate(index_lists):
            where = [slice(None)] * x.ndim
            where[axis] = np.array([i < 0 for i in idx], dtype=bool)
            y[tuple(where)] = fill
    return y


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of an array, for bit-exact comparison (NaN payloads included)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def window_blocks(spatial, window, strides, dilations, start, end) -> tuple:
    """Spec section 5: Blocks[d] = (S + start + end - dil*(W-1) - 1) // stride + 1."""
    return tuple((s + a + e - d * (w - 1) - 1) // st + 1
                 for s, w, st, d, a, e in zip(spatial, window, strides, dilations, start, end))


def _tap_positions(spatial, blocks, k, strides, dilations, start):
    """For window tap k: per axis, the blocks whose position p = b*stride + k*dil - start is
    inside the input, and those positions."""
    blocks_inside, positions_inside = [], []
    for d, size in enumerate(spatial):
        p = np.arange(blocks[d]) * strides[d] + k[d] * dilations[d] - start[d]
        inside = (p >= 0) & (p < size)
        blocks_inside.append(np.nonzero(inside)[0])
        positions_inside.append(p[inside])
    return blocks_inside, positions_inside


def unfold_reference(x: np.ndarray, window, strides, dilations, start, end) -> np.ndarray:
    """Spec section 5, one window tap k at a time (k row-major over the window): row c*K + k,
    column b (row-major over the blocks) holds x[n, c, p] with p[d] = b[d]*strides[d] +
    k[d]*dilations[d] - start[d], or 0 where some p[d] is outside the input."""
    n, c, *spatial = x.shape
    blocks = window_blocks(spatial, window, strides, dilations, start, end)
    taps = int(np.prod(window))
    out = np.zeros((n, c * taps, int(np.prod(blocks))), dtype=x.dtype)
    for kflat, k in enumerate(np.ndindex(*window)):
        blocks_inside, positions_inside = _tap_positions(spatial, blocks, k, strides, dilations, start)
        tap = np.zeros((n, c) + blocks, dtype=x.dtype)
        tap[(slice(None), slice(None)) + np.ix_(*blocks_inside)] = \
            x[(slice(None), slice(None)) + np.ix_(*positions_inside)]
        out[:, kflat::taps, :] = tap.reshape(n, c, -1)
    return out


def fold_reference(cols: np.ndarray, spatial, window, strides, dilations, start, end) -> np.ndarray:
    """Spec section 5: out = 0, then out[n, c, p] += cols[n, c*K + k, b] for every tap k in
    increasing order and every block b whose position p is inside. float16 sums in float32 and
    is rounded once; other dtypes sum in their own type (integers wrap, as numpy's do)."""
    n, rows, _ = cols.shape
    taps = int(np.prod(window))
    blocks = window_blocks(spatial, window, strides, dilations, start, end)
    sum_dtype = np.float32 if cols.dtype == np.float16 else cols.dtype
    out = np.zeros((n, rows // taps) + tuple(spatial), dtype=sum_dtype)
    for kflat, k in enumerate(np.ndindex(*window)):
        blocks_inside, positions_inside = _tap_positions(spatial, blocks, k, strides, dilations, start)
        tap = cols[:, kflat::taps, :].reshape((n, rows // taps) + blocks).astype(sum_dtype)
        # positions are distinct within one tap, so the fancy-indexed += adds each term once
        out[(slice(None), slice(None)) + np.ix_(*positions_inside)] += \
            tap[(slice(None), slice(None)) + np.ix_(*blocks_inside)]
    return out.astype(cols.dtype)
