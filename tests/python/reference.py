"""Plain numpy references, written from the formulas of docs/semantics/ and independent of dmlops.

Nothing here calls dmlops; clarity beats speed. Each function transcribes a formula of the
operator's semantics page (docs/semantics/).
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def pad_source_index(mode: str, o: int, n: int, start: int) -> int:
    """Padding semantics: the input coordinate output coordinate ``o`` reads, or -1 (constant)."""
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
    """Padding semantics, axis by axis: gather with one index list per axis, then overwrite every
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


def padding_float_value(value: float, dtype) -> object:
    """Padding semantics, PADDING (v1): the FLOAT value (rounded to float32) as the tensor holds it;
    into integer dtypes truncated toward zero and saturated to the range, NaN as 0."""
    v = np.float32(value)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # beyond float16's range: inf, as IEEE rounding gives
            return dtype.type(v)
    if dtype == np.bool_:
        dtype = np.dtype(np.uint8)
    if math.isnan(v):
        return dtype.type(0)
    info = np.iinfo(dtype)
    t = math.trunc(float(v)) if math.isfinite(v) else (info.max if v > 0 else info.min)
    return dtype.type(min(max(t, info.min), info.max))


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of an array, for bit-exact comparison (NaN payloads included)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def window_blocks(spatial, window, strides, dilations, start, end) -> tuple:
    """Unfold/fold semantics: Blocks[d] = (S + start + end - dil*(W-1) - 1) // stride + 1."""
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
    """Unfold/fold semantics, one window tap k at a time (k row-major over the window): row c*K + k,
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
    """Unfold/fold semantics: out = 0, then out[n, c, p] += cols[n, c*K + k, b] for every tap k in
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


# ---------------------------------------------------------------------------------------------
# Resample semantics: Upsample2D and Resample, one index or weight table per axis, in float64.

def as_float32(value: float) -> float:
    """A Python float as DirectML's FLOAT stores it."""
    return float(np.float32(value))


def resample_coordinate(o: int, scale: float, input_offset: float, output_offset: float) -> float:
    """The fractional input coordinate output coordinate ``o`` maps to."""
    return (o - output_offset) / scale - input_offset


def resample_nearest_index(o: int, n: int, scale: float, input_offset: float, output_offset: float,
                           rounding) -> int:
    """RESAMPLE1 (rounding None): floor(x + 0.5); RESAMPLE2 'decreasing': floor(x),
    'increasing': ceil(x); then clamped to the input."""
    x = resample_coordinate(o, scale, input_offset, output_offset)
    if rounding is None:
        i = math.floor(x + 0.5)
    elif rounding == "decreasing":
        i = math.floor(x)
    else:
        i = math.ceil(x)
    return min(max(i, 0), n - 1)


def resample_linear_row(o: int, n: int, scale: float, input_offset: float, output_offset: float) -> np.ndarray:
    """Row ``o`` of the axis's weight matrix: c = clamp(x, 0, n-1), i0 = floor(c),
    i1 = min(i0 + 1, n - 1), w = c - i0, weights 1 - w at i0 and w at i1."""
    x = resample_coordinate(o, scale, input_offset, output_offset)
    c = min(max(x, 0.0), n - 1.0)
    i0 = math.floor(c)
    i1 = min(i0 + 1, n - 1)
    w = c - i0
    row = np.zeros(n)
    row[i0] += 1 - w
    row[i1] += w
    return row


def resample_antialiased_row(o: int, n: int, scale: float, input_offset: float, output_offset: float) -> np.ndarray:
    """ONNX Resize antialias=1 (exclude_outside=0) as its reference implementation phrases it:
    with ratio = x - floor(x) (1 when x is an integer, so the left neighbour is x - 1) the taps
    are floor(x) + j for j = start .. 1 - start, start = floor(-1/scale) + 1, with coefficients
    clip(1 - |j - ratio| * scale, 0, 1) normalised to sum 1; taps beyond the input read the edge
    element. For scale >= 1 this is linear interpolation."""
    x = resample_coordinate(o, scale, input_offset, output_offset)
    s = min(scale, 1.0)
    x_int = math.floor(x)
    ratio = x - x_int
    if ratio == 0:
        x_int, ratio = x_int - 1, 1.0
    start = math.floor(-1 / s) + 1
    offsets = np.arange(start, 2 - start)
    coefficients = np.clip(1 - np.abs(offsets - ratio) * s, 0, 1)
    coefficients /= coefficients.sum()
    row = np.zeros(n)
    for j, c in zip(offsets, coefficients):
        row[min(max(x_int + j, 0), n - 1)] += c
    return row


def resample_reference(x: np.ndarray, out_shape, scales, mode: str, input_offsets=None, output_offsets=None,
                       rounding=None, antialiased: bool = False) -> np.ndarray:
    """Resample semantics, axis by axis. Scales and offsets are rounded to FLOAT first, as
    DirectML stores them. nearest_neighbor: one gather with an index list per axis (bit-exact);
    linear: the dense per-axis weight matrices applied one axis at a time in float64 (returned
    as float64)."""
    rank = x.ndim
    scales = [as_float32(s) for s in scales]
    input_offsets = [as_float32(v) for v in (input_offsets if input_offsets is not None else [0.5] * rank)]
    output_offsets = [as_float32(v) for v in (output_offsets if output_offsets is not None else [-0.5] * rank)]
    params = list(zip(x.shape, out_shape, scales, input_offsets, output_offsets))
    if mode == "nearest_neighbor":
        index = [[resample_nearest_index(o, n, s, i, p, rounding) for o in range(m)] for n, m, s, i, p in params]
        return x[np.ix_(*[np.array(ix, dtype=np.intp) for ix in index])].copy()
    y = x.astype(np.float64)
    for axis, (n, m, s, i, p) in enumerate(params):
        row = resample_antialiased_row if antialiased and s < 1 else resample_linear_row
        weights = np.array([row(o, n, s, i, p) for o in range(m)])
        y = np.moveaxis(np.tensordot(weights, y, axes=([1], [axis])), 0, axis)
    return y


def resample_magnitude(x: np.ndarray, out_shape, scales, input_offsets=None, output_offsets=None,
                       antialiased: bool = False) -> np.ndarray:
    """sum |w| |x| over the taps of each output element: the scale of its rounding error."""
    return resample_reference(np.abs(x.astype(np.float64)), out_shape, scales, "linear", input_offsets,
                              output_offsets, None, antialiased)


# ---------------------------------------------------------------------------------------------
# Convolution semantics: convolution and its fused activations


def activation_reference(name: str, params: dict, y: np.ndarray) -> np.ndarray:
    """The spec's activation formulas in float64; parameters are DirectML FLOATs, so they are
    rounded to float32 first, as the operator receives them."""
    p = {k: float(np.float32(v)) for k, v in params.items()}
    if name == "elu":
        return np.where(y >= 0, y, p["alpha"] * np.expm1(np.minimum(y, 0)))
    if name == "hard_sigmoid":
        return np.maximum(0, np.minimum(1, p["alpha"] * y + p["beta"]))
    if name == "identity":
        return y
    if name == "leaky_relu":
        return np.where(y >= 0, y, p["alpha"] * y)
    if name == "linear":
        return p["alpha"] * y + p["beta"]
    if name == "parametric_softplus":
        return p["alpha"] * np.logaddexp(0, p["beta"] * y)  # ln(1 + e^z) without overflow
    if name == "relu":
        return np.maximum(y, 0)
    if name == "scaled_elu":
        return np.where(y > 0, p["gamma"] * y, p["gamma"] * p["alpha"] * np.expm1(np.minimum(y, 0)))
    if name == "scaled_tanh":
        return p["alpha"] * np.tanh(p["beta"] * y)
    if name == "sigmoid":
        return np.exp(-np.logaddexp(0, -y))  # 1 / (1 + e^-y) without overflow (e^-y is inf below y = -709)
    if name == "softplus":
        return np.logaddexp(0, p["steepness"] * y) / p["steepness"]
    if name == "softsign":
        return y / (1 + np.abs(y))
    if name == "tanh":
        return np.tanh(y)
    if name == "thresholded_relu":
        return np.where(y > p["alpha"], y, 0)
    if name == "shrink":
        t, b = p["threshold"], p["bias"]
        return np.where(y < -t, y + b, np.where(y > t, y - b, 0))
    if name == "celu":
        a = p["alpha"]
        return np.maximum(0, y) + np.minimum(0, a * np.expm1(y / a))
    if name == "gelu":
        return 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))
    if name == "clip":
        return np.minimum(np.maximum(y, p["min"]), p["max"])
    raise ValueError(name)


def convolution_reference(x, w, b=None, *, strides=None, dilations=None, start_padding=None, end_padding=None,
                          output_padding=None, group_count=1, mode="cross_correlation", direction="forward",
                          activation=None, output_spatial=None) -> np.ndarray:
    """Convolution semantics in float64, tap by tap: forward slices an explicitly zero-padded input,
    backward scatters into an explicitly padded canvas and crops it; each tap is one einsum over
    the group's channels. ``activation`` is None or (name, params dict)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    D = x.ndim - 2
    s = strides or (1,) * D
    d = dilations or (1,) * D
    start = start_padding or (0,) * D
    end = end_padding or (0,) * D
    opad = output_padding or (0,) * D
    G = group_count
    K = w.shape[2:]
    if mode == "convolution":
        w = np.flip(w, axis=tuple(range(2, 2 + D)))
    taps = list(itertools.product(*(range(k) for k in K)))
    N = x.shape[0]
    if direction == "forward":
        xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(start, end)))
        OC, Cg = w.shape[0], x.shape[1] // G
        OCg = OC // G
        out = [(xp.shape[2 + a] - ((K[a] - 1) * d[a] + 1)) // s[a] + 1 for a in range(D)]
        y = np.zeros((N, OC, *out))
        for t in taps:
            window = tuple(slice(t[a] * d[a], t[a] * d[a] + (out[a] - 1) * s[a] + 1, s[a]) for a in range(D))
            patch = xp[(slice(None), slice(None)) + window]
            for g in range(G):
                y[:, g * OCg:(g + 1) * OCg] += np.einsum(
                    "nc...,oc->no...", patch[:, g * Cg:(g + 1) * Cg], w[(slice(g * OCg, (g + 1) * OCg), slice(None)) + t])
    else:
        IC, OCg = x.shape[1], w.shape[1]
        OC, ICg = OCg * G, IC // G
        In = x.shape[2:]
        nominal = [(In[a] - 1) * s[a] + (K[a] - 1) * d[a] + 1 - start[a] - end[a] + opad[a] for a in range(D)]
        out = list(output_spatial) if output_spatial is not None else nominal
        # canvas index = output index + start; big enough for every write and every output
        canvas = [max((In[a] - 1) * s[a] + (K[a] - 1) * d[a] + 1, start[a] + out[a]) for a in range(D)]
        yc = np.zeros((N, OC, *canvas))
        for t in taps:
            window = tuple(slice(t[a] * d[a], t[a] * d[a] + (In[a] - 1) * s[a] + 1, s[a]) for a in range(D))
            for g in range(G):
                target = yc[(slice(None), slice(g * OCg, (g + 1) * OCg)) + window]
                target += np.einsum("nc...,co->no...", x[:, g * ICg:(g + 1) * ICg],
                                    w[(slice(g * ICg, (g + 1) * ICg), slice(None)) + t])
        y = yc[(slice(None), slice(None)) + tuple(slice(start[a], start[a] + out[a]) for a in range(D))]
    if b is not None:
        y = y + np.asarray(b, dtype=np.float64).reshape((1, -1) + (1,) * D)
    if activation is not None:
        y = activation_reference(activation[0], activation[1], y)
    return y


def lp_pooling_reference(x: np.ndarray, window, strides, start, end, dilations, p: int) -> np.ndarray:
    """Lp pooling semantics in float64: pad |x| explicitly with zeros, then for every output position
    take its (dilated) window and compute (sum |x|^p)^(1/p).

    Written as m * (sum (|x|/m)^p)^(1/p) with m = the window's largest |x| -- the same number,
    but float64 cannot hold |x|^p for large p (1e20**30). NaN anywhere in a window gives NaN;
    otherwise inf gives inf; an all-zero window gives 0.
    """
    spatial = x.ndim - 2
    with np.errstate(invalid="ignore"):  # signalling NaNs become quiet ones
        magnitude = np.abs(x.astype(np.float64))
    padded = np.pad(magnitude, [(0, 0), (0, 0)] + [(s, e) for s, e in zip(start, end)])
    extent = [(window[d] - 1) * dilations[d] + 1 for d in range(spatial)]
    out_shape = [(padded.shape[2 + d] - extent[d]) // strides[d] + 1 for d in range(spatial)]
    y = np.empty(x.shape[:2] + tuple(out_shape), dtype=np.float64)
    for o in np.ndindex(*out_shape):
        taps = tuple(slice(o[d] * strides[d], o[d] * strides[d] + extent[d], dilations[d]) for d in range(spatial))
        w = padded[(slice(None), slice(None)) + taps].reshape(x.shape[0], x.shape[1], -1)
        m = w.max(axis=-1)  # NaN if any tap is NaN
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            scaled = m * np.sum((w / m[..., None]) ** p, axis=-1) ** (1.0 / p)
        finite_nonzero = np.isfinite(m) & (m > 0)
        y[(slice(None), slice(None)) + o] = np.where(finite_nonzero, scaled, m)  # m: 0, inf or NaN
    return y
