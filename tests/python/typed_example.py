"""Every public function and descriptor of dmlops, used with explicit types.

tests/python/test_typing.py type-checks this file with ``mypy --strict`` (so the stubs and
annotations stay complete and accurate) and then runs it (so it stays true).
"""

from __future__ import annotations

import pickle
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

import dmlops
from dmlops import dxdispatch


def padding() -> None:
    x: npt.NDArray[np.float32] = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    y: np.ndarray = dmlops.pad(x, (0, 0, 1, 2), (0, 0, 3, 4), mode="reflection")
    dmlops.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "constant", 2.5, out=np.empty((1, 1, 6, 6), np.float32))
    d1 = dmlops.Padding1Desc(dmlops.TensorDesc("float32", x.shape), padding_mode="symmetric",
                             start_padding=(0, 0, 1, 2), end_padding=(0, 0, 3, 4), padding_value=0)
    d0 = dmlops.PaddingDesc(dmlops.TensorDesc(np.int8, (3,)), start_padding=(1,), end_padding=(1,),
                            padding_value=-1e9)
    mode: str = d1.padding_mode
    start: tuple[int, ...] = d1.start_padding
    value: Any = d0.padding_value
    assert d1(x).shape == y.shape == d1.output_shape and mode == "symmetric" and start[3] == 2 and value == -1e9


def unfold_and_fold() -> None:
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    cols: np.ndarray = dmlops.unfold(x, (3, 3), strides=(1, 1), dilations=(1, 1), start_padding=(1, 0),
                                     end_padding=(1, 0))
    back: np.ndarray = dmlops.fold(cols, (5, 5), (3, 3), start_padding=(1, 0), end_padding=(1, 0))
    u = dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (1, 1, 5, 5)), window_sizes=(3, 3))
    f = dmlops.FoldDesc(u.output, u.input, window_sizes=u.window_sizes, strides=u.strides)
    dilations: tuple[int, ...] = f.dilations
    assert back.shape == f(u(x)).shape == x.shape and dilations == (1, 1)


def resampling() -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    up: np.ndarray = dmlops.upsample_2d(x, (2, 3), "linear")
    dmlops.upsample_2d(x, 2)
    r: np.ndarray = dmlops.resample(x, (1.0, 1.0, 0.5, 1.75), "linear", antialiased=True,
                                    input_pixel_offsets=None, rounding_direction=None, output_sizes=(1, 1, 2, 7))
    t = dmlops.TensorDesc("float32", x.shape)
    u = dmlops.Upsample2DDesc(t, scale_size=2, interpolation_mode="nearest_neighbor")
    scale: tuple[int, int] = u.scale_size
    r1 = dmlops.Resample1Desc(t, scales=(1, 1, 2, 2), input_pixel_offsets=(0, 0, 0, 0), output_pixel_offsets=(0, 0, 0, 0))
    descs: list[dmlops.ResampleDesc | dmlops.Resample1Desc | dmlops.Resample2Desc | dmlops.Resample3Desc] = [
        dmlops.ResampleDesc(t, scales=(1, 1, 2, 2)),
        r1,
        dmlops.Resample2Desc(t, scales=(1, 1, 2, 2), rounding_direction="decreasing"),
        dmlops.Resample3Desc(t, scales=(1, 1, 0.5, 0.5), rounding_direction="increasing", interpolation_mode="linear",
                             antialiased=True),
    ]
    scales: tuple[float, ...] = descs[0].scales
    rounding: str = dmlops.Resample2Desc.from_dict(descs[2].to_dict()).rounding_direction
    antialiased: bool = pickle.loads(pickle.dumps(descs[3])).antialiased
    offsets: tuple[float, ...] = r1.input_pixel_offsets
    assert up.shape == (1, 1, 8, 12) and r.shape == (1, 1, 2, 7) and u(x).shape[2:] == (8, 8) and scale == (2, 2)
    assert all(d(x).shape == d.output_shape for d in descs)
    assert scales == (1, 1, 2, 2) and rounding == "decreasing" and antialiased and offsets == (0, 0, 0, 0)


def pooling_and_convolution() -> None:
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    pooled: np.ndarray = dmlops.lp_pooling(x, (3, 3), strides=(2, 2), dilations=(1, 1), p=3)
    l1 = dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", x.shape), window_size=(2, 2), dilations=(2, 2), p=1)
    l0 = dmlops.LpPoolingDesc(dmlops.TensorDesc("float32", x.shape), window_size=(2, 2))
    p: int = l0.p
    dil: tuple[int, ...] = l1.dilations
    w = np.ones((4, 1, 3, 3), np.float32)
    b = np.zeros((1, 4, 1, 1), np.float32)
    relu6 = dmlops.Activation("clip", min=0, max=6)
    y: np.ndarray = dmlops.convolution(x, w, b, group_count=2, start_padding=(1, 1), end_padding=(1, 1),
                                       fused_activation=relu6)
    yt: np.ndarray = dmlops.convolution(y, w, direction="backward", group_count=2, fused_activation="relu")
    c = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", x.shape), dmlops.TensorDesc("float32", w.shape),
                               group_count=2, fused_activation=relu6)
    activation: Optional[dmlops.Activation] = c.fused_activation
    bias: Optional[dmlops.TensorDesc] = c.bias
    parameters: dict[str, float] = relu6.parameters
    assert pooled.shape == (1, 2, 2, 2) and l1(x).shape == (1, 2, 4, 4) and l0(x).shape == (1, 2, 5, 5) and p == 2
    assert y.shape == (1, 4, 6, 6) and yt.shape == (1, 2, 8, 8) and c(x, w).shape == (1, 4, 4, 4)
    assert dil == (2, 2) and activation == relu6 and bias is None and parameters == {"min": 0.0, "max": 6.0}
    plan: dmlops.Plan = c.plan(algorithm="gemm")
    tiles: dict[str, int] = plan.tiles
    prepared: dmlops.PreparedConvolution = c.prepare(w)
    same: np.ndarray = prepared(x, out=np.empty((1, 4, 4, 4), np.float32))
    names: list[str] = dmlops.convolution_algorithms()
    assert plan.algorithm == "gemm" and tiles["MR"] == 6 and not prepared.packed and "direct" in names
    assert np.array_equal(same, c(x, w, algorithm=prepared.plan().algorithm))
    padded: dmlops.Plan = dmlops.Padding1Desc(dmlops.TensorDesc("float32", x.shape), start_padding=(0, 0, 1, 1),
                                              end_padding=(0, 0, 1, 1)).plan()
    rows: int = padded.tiles["rows"]  # one per (n, c, padded row)
    assert padded.algorithm == "gather" and rows == x.shape[0] * x.shape[1] * (x.shape[2] + 2)


def tensors_threads_and_models() -> None:
    t = dmlops.TensorDesc("FLOAT16", (2, 3), strides=(1, 2))
    size: int = dmlops.calc_buffer_tensor_size("float16", (2, 3), (1, 2))
    dtypes: tuple[str, ...] = dmlops.DTYPES
    dmlops.set_num_threads(2)
    threads: int = dmlops.get_num_threads()
    with dmlops.threads(1) as context:
        assert dmlops.get_num_threads() == 1 and context.n == 1
    released: int = dmlops.release_memory()
    model = {
        "resources": {"x": {"initialValuesDataType": "INT32", "initialValues": [1, 2, 3]},
                      "y": {"initialValuesDataType": "INT32", "initialValues": {"valueCount": 5, "value": 0}}},
        "dispatchables": {"pad": {"type": "PADDING1", "desc": dmlops.Padding1Desc(
            dmlops.TensorDesc("int32", (3,)), padding_mode="edge", start_padding=(1,), end_padding=(1,)).to_dict()}},
        "commands": [{"type": "dispatch", "dispatchable": "pad", "bindings": {"InputTensor": "x", "OutputTensor": "y"}}],
    }
    results: dict[str, np.ndarray] = dxdispatch.run(model)
    loaded: dxdispatch.Model = dxdispatch.load(model)
    try:
        dxdispatch.load({"resources": {}})
    except dxdispatch.ModelError as e:
        where: str = e.path
    assert size == t.buffer_size == 12 and t.dtype in dtypes and threads == 2 and where == "model.dispatchables"
    assert results["y"].tolist() == [1, 1, 2, 3, 3] and len(loaded.commands) == 1


def numpy_conventions() -> None:
    x = np.ones((1, 2, 6, 6), np.float32)
    listed: np.ndarray = dmlops.pad([[1, 2], [3, 4]], 1, (0, 2), "edge")
    conv: np.ndarray = dmlops.convolution(x, np.ones((3, 2, 3, 3), np.float32), np.zeros(3, np.float32), strides=2,
                                          start_padding=1, end_padding=1)
    pooled: np.ndarray = dmlops.lp_pooling(x, 2, strides=2)
    cols: np.ndarray = dmlops.unfold(x, 3, dilations=2)
    back: np.ndarray = dmlops.fold(cols, 6, (3, 3), dilations=2)
    scaled: np.ndarray = dmlops.resample(x, (2, 0.5), "linear")
    sized: np.ndarray = dmlops.resample(x, output_sizes=9)
    out = bytearray(4)
    written: np.ndarray = dmlops.pad(np.array([7, 8], np.uint8), 1, 1, value=9, out=out)
    assert listed.shape == (3, 5) and conv.shape == (1, 3, 3, 3) and pooled.shape == (1, 2, 3, 3)
    assert back.shape == x.shape and scaled.shape == (1, 2, 12, 3) and sized.shape == (1, 2, 9, 9)
    assert out == bytearray([9, 7, 8, 9]) and written.tolist() == [9, 7, 8, 9]


def main() -> None:
    numpy_conventions()
    padding()
    unfold_and_fold()
    resampling()
    pooling_and_convolution()
    tensors_threads_and_models()


if __name__ == "__main__":
    main()
