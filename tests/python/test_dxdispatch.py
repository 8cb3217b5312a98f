"""dmlops.dxdispatch: DirectML DxDispatch model files (tests/data/dxdispatch/*.json) run on the
CPU, checked against the plain references in reference.py; every malformed-file error names
its JSON path."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlops
from dmlops import dxdispatch
from dmlops.dxdispatch import ModelError
from reference import (activation_reference, convolution_reference, fold_reference, lp_pooling_reference,
                       pad_reference, resample_reference, unfold_reference)

MODELS = Path(__file__).resolve().parents[1] / "data" / "dxdispatch"


def model_json(name: str) -> dict:
    """A model file's JSON (through the loader's comment stripping), for tests to modify."""
    return json.loads(dxdispatch._strip_json_extensions((MODELS / name).read_text()))


def run_logged(model, out_dir=None):
    lines: list[str] = []
    return dxdispatch.run(model, out_dir, log=lines.append), lines


# ---------------------------------------------------------------------------------------------
# The model files, one per operator family


def test_upsample_sample_prints_directml_table(tmp_path):
    results, lines = run_logged(MODELS / "dml_upsample_2d.json", tmp_path)
    assert lines[0] == ("Resource 'output': 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, "
                        "3, 3.25, 3.75, 4")
    expected = resample_reference(np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2), (1, 1, 4, 4),
                                  (1, 1, 2, 2), "linear")
    np.testing.assert_array_equal(results["output"], expected.ravel().astype(np.float32))
    np.testing.assert_array_equal(results["input"], [1, 2, 3, 4])
    written = np.load(tmp_path / "upsampled.npy")
    assert written.shape == (1, 1, 4, 4) and written.dtype == np.float32
    np.testing.assert_array_equal(written.ravel(), results["output"])


def test_padding_model(tmp_path):
    results, lines = run_logged(MODELS / "dml_padding.json", tmp_path)
    x = np.array([1, 2, 3, 4, 5, 6, 7, 8] * 2, np.float32).reshape(1, 1, 4, 4)
    symmetric = pad_reference(x, (0, 0, 1, 2), (0, 0, 3, 4), "symmetric")
    constant = pad_reference(x, (0, 0, 1, 2), (0, 0, 3, 4), "constant", 9)
    np.testing.assert_array_equal(results["symmetric"], symmetric.ravel())
    np.testing.assert_array_equal(results["constant"], constant.ravel())
    assert lines[0].startswith("Resource 'symmetric': 2, 1, 1, 2, 3, 4, 4, 3, 2, 1, 2, 1,")
    np.testing.assert_array_equal(np.load(tmp_path / "padded" / "symmetric.npy"), symmetric[0, 0])
    raw = (tmp_path / "padded" / "constant.dat").read_bytes()
    np.testing.assert_array_equal(np.frombuffer(raw, "<f4"), constant.ravel())


def test_convolution_model():
    results, _ = run_logged(MODELS / "dml_convolution.json")
    x = (-3 + 0.125 * np.arange(50)).reshape(1, 2, 5, 5)
    w = (1 - 0.0625 * np.arange(36)).reshape(4, 1, 3, 3)
    b = np.array([6, -1, 2, 9], np.float64).reshape(1, 4, 1, 1)
    y = convolution_reference(x, w, b, strides=(2, 1), dilations=(1, 2), start_padding=(1, 0),
                              end_padding=(1, 2), group_count=2, activation=("leaky_relu", {"alpha": 0.1}))
    assert (y > 0).any() and (y < 0).any()  # both sides of the activation are exercised
    taps = 9  # reduction length per output: InC/G * 3 * 3
    np.testing.assert_allclose(results["output"], y.ravel(), rtol=0, atol=taps * 4e-7 * np.abs(y).max())


def test_resample_models():
    results, lines = run_logged(MODELS / "dml_resample.json")
    small = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 2, 3)
    large = np.array([3, -1, 4, 1, -5, 9, 2, 6, 5, 3, -5, 8, 9, 7, -9, 3], np.float32).reshape(1, 1, 4, 4)
    zeros = (0, 0, 0, 0)
    expected = {
        "nearest": resample_reference(small, (1, 1, 4, 4), (1, 1, 2, 1.5), "nearest_neighbor"),
        "corners": resample_reference(small, (1, 1, 4, 6), (1, 1, 2, 2), "linear", zeros, zeros),
        "floor": resample_reference(small, (1, 1, 3, 6), (1, 1, 1.5, 2), "nearest_neighbor", zeros, zeros,
                                    rounding="decreasing"),
        "antialiased": resample_reference(large, (1, 1, 2, 2), (1, 1, 0.5, 0.5), "linear", antialiased=True),
    }
    for name, y in expected.items():
        np.testing.assert_allclose(results[name], y.ravel(), rtol=2e-7, atol=1e-6, err_msg=name)
    assert lines[1] == "Resource 'corners': " + ", ".join(f"{v:g}" for v in results["corners"])


def test_unfold_fold_chain():
    results, lines = run_logged(MODELS / "dml_unfold_fold.json")
    image = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    args = ((3, 3), (1, 1), (1, 1), (1, 0), (1, 0))
    columns = unfold_reference(image, *args)
    assert columns[0, 0].tolist() == [0, 0, 0, 0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17]  # the spec's row
    np.testing.assert_array_equal(results["columns"], columns.ravel())
    np.testing.assert_array_equal(results["folded"], fold_reference(columns, (5, 5), *args).ravel())
    assert lines == ["Resource 'folded': " + ", ".join(f"{v:g}" for v in results["folded"])]


def test_lp_pooling_model():
    results, lines = run_logged(MODELS / "dml_lp_pooling.json")
    x = (np.arange(16, dtype=np.float32) - 7.5).reshape(1, 1, 4, 4)
    p3 = lp_pooling_reference(x, (2, 2), (2, 2), (1, 0), (1, 0), (1, 1), 3)
    p2 = lp_pooling_reference(x, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 2)
    assert (p3 > 0).all()  # |x|: the negative half of the input gives positive norms too
    np.testing.assert_allclose(results["p3"], p3.ravel(), rtol=(4 + 4) * 2.0**-24)
    np.testing.assert_allclose(results["p2"], p2.ravel(), rtol=(9 + 4) * 2.0**-24)
    assert lines == ["Resource 'p3': " + ", ".join(f"{v:g}" for v in results["p3"])]


def test_bindings_offsets_strides_and_typed_views():
    results, lines = run_logged(MODELS / "dml_bindings.json")
    storage = np.arange(12, dtype=np.float32)
    # pad_edge reads a transposed 3x2 view at element offset 2: x[i, j] = storage[2 + i + 3 j]
    x = np.array([[storage[2 + i + 3 * j] for j in range(2)] for i in range(3)])
    np.testing.assert_array_equal(results["padded"], pad_reference(x, (0, 1), (0, 1), "edge").ravel())
    # pad_bits binds FLOAT16 buffers as UINT16 and pads with the bits of 1.0
    halves = np.array([0.5, -2, np.inf], np.float16)
    expected_bits = pad_reference(halves.view(np.uint16), (1,), (1,), "constant", 0x3C00)
    np.testing.assert_array_equal(results["halves_padded"].view(np.uint16), expected_bits)
    assert lines[1] == "Resource 'halves_padded': 1, 0.5, -2, inf, 1"  # 5 values, not the padded 6
    # pad_wrap reads storage[9:12] (its dispatchable's own binding) into every other element
    interleaved = np.full(10, -1, np.float32)
    interleaved[0:10:2] = pad_reference(storage[9:], (1,), (1,), "wrap")
    np.testing.assert_array_equal(results["interleaved"], interleaved)
    # 10 elements: DxDispatch pads the index to floor(log10(10)) + 1 = 2 digits
    assert lines[2].splitlines()[:3] == ["Resource 'interleaved':", "[ 0] 11 (0x41300000)", "[ 1] -1 (0xBF800000)"]


def test_every_supported_operator_has_a_model_file():
    used = set()
    for path in MODELS.glob("*.json"):
        for spec in model_json(path.name)["dispatchables"].values():
            used.add(spec["type"].upper().removeprefix("DML_OPERATOR_"))
    assert used == set(dxdispatch.OPERATORS)


def test_runs_start_from_the_initial_values_each_time():
    model = dxdispatch.load(MODELS / "dml_unfold_fold.json")
    first, second = model.run(), model.run()
    np.testing.assert_array_equal(first["folded"], second["folded"])
    first["folded"][:] = 0  # the returned arrays are copies
    np.testing.assert_array_equal(model.run()["folded"], second["folded"])


def test_descriptors_round_trip_through_models():
    """A descriptor's to_dict() is a DxDispatch desc as it stands."""
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 1, 3, 3)), dmlops.TensorDesc("float32", (1, 1, 2, 2)),
                                  fused_activation="relu")
    model = {
        "resources": {
            "x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 9, "valueStart": -4, "valueDelta": 1}},
            "w": {"initialValuesDataType": "FLOAT32", "initialValues": [0.5, 0.5, 0.5, 0.5]},
            "y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}},
        },
        "dispatchables": {"conv": {"type": "CONVOLUTION", "desc": desc.to_dict()}},
        "commands": [{"type": "dispatch", "dispatchable": "conv",
                      "bindings": {"InputTensor": "x", "FilterTensor": "w", "OutputTensor": "y"}}],
    }
    assert dxdispatch.load(model).dispatchables["conv"].desc == desc
    np.testing.assert_array_equal(dxdispatch.run(model)["y"], [0, 0, 2, 4])


# ---------------------------------------------------------------------------------------------
# initialValues forms and buffer typing


def running_sum(start, delta, count) -> np.ndarray:
    values = [start]
    for _ in range(count - 1):
        values.append(values[-1] + delta)
    return np.array(values, dtype=type(start))


def single_buffer(spec: dict) -> np.ndarray:
    return dxdispatch.run({"resources": {"b": spec}, "dispatchables": {}, "commands": []})["b"]


@pytest.mark.parametrize("spec,expected", [
    ({"initialValuesDataType": "FLOAT32", "initialValues": [1, "nan", "INF", "-inf", 2.5]},
     np.array([1, np.nan, np.inf, -np.inf, 2.5], np.float32)),
    ({"initialValuesDataType": "DML_TENSOR_DATA_TYPE_INT8", "initialValues": {"valueCount": 3, "value": -128}},
     np.array([-128] * 3, np.int8)),
    ({"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 4, "valueStart": 254, "valueDelta": 1}},
     np.array([254, 255, 0, 1], np.uint8)),  # wraps, as the running sum in uint8 does
    ({"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 3, "valueStart": 2048, "valueDelta": 1}},
     np.array([2048, 2048, 2048], np.float16)),  # 2048 + 1 rounds back to 2048 in FLOAT16, every step
    ({"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 11, "valueStart": 0, "valueDelta": 0.1}},
     running_sum(np.float32(0), np.float32(0.1), 11)),  # 0.1 added in FLOAT32, not i * 0.1
    ({"initialValuesDataType": "UINT64", "initialValues": [18446744073709551615]}, np.array([2**64 - 1], np.uint64)),
    ({"initialValuesDataType": "INT16", "initialValues": [7], "sizeInBytes": 8, "initialValuesOffsetInBytes": 2},
     np.array([0, 7, 0, 0], np.int16)),
])
def test_initial_values(spec, expected):
    values = single_buffer(spec)
    assert values.dtype == expected.dtype
    np.testing.assert_array_equal(values, expected)


def test_initial_values_from_files(tmp_path):
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.save(tmp_path / "a.npy", array)
    (tmp_path / "b.dat").write_bytes(np.array([1.5, -2], "<f8").tobytes())
    model = {"resources": {"a": {"initialValues": {"sourcePath": "a.npy"}},
                           "b": {"initialValuesDataType": "FLOAT64", "initialValues": {"sourcePath": "b.dat"}}},
             "dispatchables": {}, "commands": []}
    (tmp_path / "m.json").write_text(json.dumps(model))
    results = dxdispatch.run(tmp_path / "m.json")  # files resolve next to the model
    np.testing.assert_array_equal(results["a"], array.ravel())
    np.testing.assert_array_equal(results["b"], [1.5, -2])
    np.testing.assert_array_equal(dxdispatch.load(model, base_dir=tmp_path).run()["a"], array.ravel())


def test_comments_and_trailing_commas(tmp_path):
    text = '{ // a "model"\n "resources": { "b": { "initialValuesDataType": "UINT16", /* 3 */ ' \
           '"initialValues": [1, 2, 3,], }, }, "dispatchables": {}, "commands": [ { "type": "print", ' \
           '"resource": "b" }, ], }'
    (tmp_path / "m.json").write_text(text)
    _, lines = run_logged(tmp_path / "m.json")
    assert lines == ["Resource 'b': 1, 2, 3"]


# ---------------------------------------------------------------------------------------------
# The command line


def test_cli_runs_a_model_and_writes_its_files(tmp_path):
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", str(MODELS / "dml_padding.json"), "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("Resource 'constant': 9, 9, 9,")
    assert (tmp_path / "padded" / "symmetric.npy").exists() and (tmp_path / "padded" / "constant.dat").exists()


def test_cli_without_out_skips_write_file(tmp_path):
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", str(MODELS / "dml_upsample_2d.json")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "writeFile 'upsampled.npy': skipped (no output directory)" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_cli_reports_errors_with_file_and_json_path(tmp_path):
    model = model_json("dml_convolution.json")
    model["dispatchables"]["conv"]["desc"]["Strides"] = [1, 1, 1]
    (tmp_path / "bad.json").write_text(json.dumps(model))
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", str(tmp_path / "bad.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == (f"error: {tmp_path / 'bad.json'}: dispatchables.conv.desc.Strides: "
                                     "expected 2 entries (DimensionCount is 2), got 3")


# ---------------------------------------------------------------------------------------------
# Malformed files: each error names the JSON path of the problem


def mutated(name: str, edit) -> dict:
    model = copy.deepcopy(model_json(name))
    edit(model)
    return model


def conv_desc(m):
    return m["dispatchables"]["conv"]["desc"]


def conv_command(m):
    return m["commands"][0]


def bindings_desc(m, name="pad_edge"):
    return m["dispatchables"][name]["desc"]


def put(get, key, value):
    def edit(m):
        get(m)[key] = value
    return edit


def drop(get, key):
    def edit(m):
        del get(m)[key]
    return edit


def resource(name):
    return lambda m: m["resources"][name]


CONV_ERRORS = [
    (put(conv_desc, "Strides", [1, 1, 1]), "dispatchables.conv.desc.Strides", "expected 2 entries (DimensionCount is 2), got 3"),
    (put(conv_desc, "DimensionCount", 3), "dispatchables.conv.desc.Strides", "expected 3 entries (DimensionCount is 3), got 2"),
    (put(conv_desc, "Strides", [1, "2"]), "dispatchables.conv.desc.Strides[1]", 'expected an integer, got "2"'),
    (put(conv_desc, "Strides", [0, 1]), "dispatchables.conv.desc.Strides", "strides"),
    (put(conv_desc, "GroupCount", 3), "dispatchables.conv.desc", "group_count 3 does not divide"),  # with InputTensor
    (put(conv_desc, "GroupCount", -1), "dispatchables.conv.desc.GroupCount", "expected a non-negative integer, got -1"),
    (put(conv_desc, "Mode", "DML_CONVOLUTION_MODE_SIDEWAYS"), "dispatchables.conv.desc.Mode", "unknown"),
    (put(conv_desc, "Mode", 1), "dispatchables.conv.desc.Mode", "expected a DML_CONVOLUTION_MODE_* name, got 1"),
    (drop(conv_desc, "FilterTensor"), "dispatchables.conv.desc.FilterTensor", "missing (DML_OPERATOR_CONVOLUTION requires it)"),
    (put(conv_desc, "InputTensor", [1, 2, 5, 5]), "dispatchables.conv.desc.InputTensor", "expected a tensor desc object"),
    (put(conv_desc, "InputTensor", {"DataType": "FLOAT33", "Sizes": [1, 2, 5, 5]}),
     "dispatchables.conv.desc.InputTensor.DataType", "'FLOAT33' is not a DML_TENSOR_DATA_TYPE"),
    (put(conv_desc, "InputTensor", {"DataType": "FLOAT32", "Sizes": [1, 2, 5, 5], "Strides": [50, 25, 5]}),
     "dispatchables.conv.desc.InputTensor.Strides", "expected 4 entries (one per size), got 3"),
    (put(conv_desc, "InputTensor", {"DataType": "FLOAT32"}), "dispatchables.conv.desc.InputTensor.Sizes", "missing"),
    (put(conv_desc, "InputTensor", {"DataType": "FLOAT32", "Sizes": [1, 2, 0, 5]}),
     "dispatchables.conv.desc.InputTensor", "TensorDesc"),
    (put(conv_desc, "OutputTensor", {"DataType": "FLOAT32", "Sizes": [1, 4, 3, 4]}),
     "dispatchables.conv.desc.OutputTensor", "output"),
    (put(conv_desc, "FusedActivation", {"Type": "DML_OPERATOR_ACTIVATION_SPARKLE"}),
     "dispatchables.conv.desc.FusedActivation", "SPARKLE"),
    (put(conv_desc, "FusedActivation", {"Desc": {}}), "dispatchables.conv.desc.FusedActivation.Type", "missing"),
    (put(lambda m: m["dispatchables"]["conv"], "type", "DML_OPERATOR_ELEMENT_WISE_ADD"), "dispatchables.conv.type",
     "DML_OPERATOR_ELEMENT_WISE_ADD is not supported by dmlops; supported: DML_OPERATOR_PADDING,"),
    (put(lambda m: m["dispatchables"]["conv"], "type", "hlsl"), "dispatchables.conv.type",
     "HLSL compute shaders ('hlsl' dispatchables) are not supported by dmlops"),
    (put(lambda m: m["dispatchables"]["conv"], "type", "ONNX"), "dispatchables.conv.type",
     "ONNX models ('ONNX' dispatchables) are not supported by dmlops"),
    (put(lambda m: m["dispatchables"]["conv"], "type", "dmlSerializedGraph"), "dispatchables.conv.type",
     "serialized DirectML graphs"),
    (drop(lambda m: m["dispatchables"]["conv"], "desc"), "dispatchables.conv.InputTensor",
     "missing (DML_OPERATOR_CONVOLUTION requires it)"),  # no desc: its fields would stand beside "type"
    (put(conv_command, "dispatchable", "convolution"), "commands[0].dispatchable", "no dispatchable named 'convolution'"),
    (drop(lambda m: conv_command(m)["bindings"], "BiasTensor"), "commands[0].bindings.BiasTensor",
     "missing (conv binds InputTensor, FilterTensor, BiasTensor, OutputTensor)"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", "inputs"), "commands[0].bindings.InputTensor",
     "no resource named 'inputs'"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", {"name": "input", "elementOffset": 1}),
     "commands[0].bindings.InputTensor", "InputTensor (FLOAT32 [1, 2, 5, 5]) needs 200 bytes from byte 4, but "
                                         "resource 'input' has 200 bytes"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", {"name": "input", "elementCount": 51}),
     "commands[0].bindings.InputTensor", "elements [0, 51) of 4 bytes run past the 200 bytes"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", {"resource": "input"}),
     "commands[0].bindings.InputTensor.name", "missing"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", ["input", "input"]),
     "commands[0].bindings.InputTensor", "InputTensor binds one resource, not 2"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", []),
     "commands[0].bindings.InputTensor", "InputTensor binds one resource, not 0"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", ["inputs"]),
     "commands[0].bindings.InputTensor[0]", "no resource named 'inputs'"),
    (put(lambda m: conv_command(m)["bindings"], "FilterTensor", "bias"), "commands[0].bindings.FilterTensor",
     "needs 144 bytes from byte 0, but resource 'bias' has 16 bytes"),
    (put(conv_command, "type", "execute"), "commands[0].type",
     'expected "dispatch", "print" or "writeFile" (any case), got "execute"'),
    (put(conv_command, "type", 7), "commands[0].type", "expected a command type"),
    (drop(conv_command, "type"), "commands[0].type", "missing"),
    (drop(conv_command, "bindings"), "commands[0].bindings", "missing"),
    (put(lambda m: m["commands"][1], "resource", "outptu"), "commands[1].resource", "no resource named 'outptu'"),
    (put(lambda m: m["commands"][1], "verbose", 1), "commands[1].verbose", "expected true or false, got 1"),
    (lambda m: m["commands"].append({"type": "writeFile", "resource": "output", "targetPath": "y.npy",
                                     "dimensions": [6, 7]}),
     "commands[2].dimensions", "[6, 7] holds 42 elements but resource 'output' has 36"),
    (lambda m: m["commands"].append({"type": "writeFile", "resource": "output", "targetPath": "y.png"}),
     "commands[2].targetPath", "image files are not supported"),
    (put(resource("bias"), "initialValues", [1, 2, "x"]), "resources.bias.initialValues[2]",
     'expected a FLOAT32 number or "nan", "inf", "-inf", got "x"'),
    (put(resource("bias"), "initialValues", [1, 2, 1e39]), "resources.bias.initialValues[2]",
     "1e+39 is out of range for FLOAT32"),
    (put(resource("bias"), "initialValuesDataType", "INT4"), "resources.bias.initialValuesDataType",
     "'INT4' is not a DML_TENSOR_DATA_TYPE"),
    (put(resource("bias"), "initialValuesDataType", "f4"), "resources.bias.initialValuesDataType",
     "'f4' is not a DML_TENSOR_DATA_TYPE"),  # DirectML names only, not numpy's
    (put(resource("bias"), "initialValues", [10**400]), "resources.bias.initialValues[0]", "is out of range for FLOAT32"),
    (put(resource("filter"), "initialValuesDataType", "INT8"), "resources.filter.initialValues.valueDelta",
     "expected an integer of type INT8, got -0.0625"),
    (lambda m: m["resources"]["output"].update(initialValuesDataType="UINT8", initialValues=[256]),
     "resources.output.initialValues[0]", "256 is out of range for UINT8 [0, 255]"),
    (drop(resource("bias"), "initialValuesDataType"), "resources.bias.initialValues",
     "an array of values needs an initialValuesDataType"),
    (lambda m: m["resources"]["bias"].update(initialValuesDataType="UNKNOWN",
                                             initialValues=[{"type": "UINT32", "value": 42}]),
     "resources.bias.initialValuesDataType", "mixed-type initial values"),
    (lambda m: m["resources"]["bias"].update(initialValues=[{"type": "FLOAT32", "value": 1.5}, 2]),
     "resources.bias.initialValues", "are not supported by dmlops"),
    (put(resource("bias"), "initialValues", {"valueCount": 4, "value": 0, "valueStart": 1}),
     "resources.bias.initialValues", 'expected exactly one of {"value"}'),
    (put(resource("bias"), "initialValues", {"valueCount": 4, "valueStart": 1}),
     "resources.bias.initialValues.valueDelta", "missing"),
    (put(resource("bias"), "initialValues", {"value": 1}), "resources.bias.initialValues.valueCount", "missing"),
    (put(resource("bias"), "initialValues", {"valueCount": 0, "value": 1}), "resources.bias.initialValues", "no values"),
    (put(resource("bias"), "initialValues", {"sourcePath": "missing.npy"}), "resources.bias.initialValues.sourcePath",
     "cannot read"),
    (put(resource("bias"), "initialValues", {"sourcePath": "dog.jpg"}), "resources.bias.initialValues.sourcePath",
     "image files are not supported"),
    (put(resource("bias"), "initialValues", "deferred"), "resources.bias.initialValues", "not supported"),
    (put(resource("bias"), "sizeInBytes", 12), "resources.bias.sizeInBytes",
     "16 bytes of initial values do not fit in sizeInBytes 12 from offset 0"),
    (lambda m: m["resources"]["bias"].update(sizeInBytes=16, initialValuesOffsetInBytes=20),
     "resources.bias.initialValuesOffsetInBytes", "20 is past the buffer's end"),
    (put(resource("bias"), "initialValues", {"valueCount": 2**62, "value": 0}), "resources.bias.initialValues",
     "bytes of initial values do not fit in the"),  # refused before numpy allocates
    (put(resource("bias"), "sizeInBytes", 2**62), "resources.bias.sizeInBytes", "bytes of memory left"),
    (put(resource("bias"), "type", "texture"), "resources.bias.type", 'only "buffer" resources exist'),
    (drop(lambda m: m, "commands"), "model.commands", "missing"),
    (put(lambda m: m, "resources", []), "resources", "expected an object, got []"),
]


@pytest.mark.filterwarnings("ignore::dmlops.dxdispatch.ModelWarning")  # test_unknown_fields_are_warned_about
@pytest.mark.parametrize("edit,path,message", CONV_ERRORS, ids=[f"{p}-{i}" for i, (_, p, _) in enumerate(CONV_ERRORS)])
def test_malformed_model_errors_name_the_json_path(edit, path, message):
    with pytest.raises(ModelError) as info:
        dxdispatch.load(mutated("dml_convolution.json", edit), base_dir=MODELS)
    assert info.value.path == path
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


BINDING_ERRORS = [
    (put(lambda m: m["dispatchables"]["pad_bits"]["desc"], "PaddingValue", {"Float32": 1}),
     "dispatchables.pad_bits.desc.PaddingValue", 'must be a number or {"UInt16": ...}'),
    (put(lambda m: m["dispatchables"]["pad_bits"]["desc"], "PaddingValue", 70000),
     "dispatchables.pad_bits.desc.PaddingValue", "padding_value"),
    (put(bindings_desc, "PaddingValueDataType", "INT32"), "dispatchables.pad_edge.desc.PaddingValueDataType",
     "does not match"),
    (put(bindings_desc, "StartPadding", [0]), "dispatchables.pad_edge.desc.StartPadding",
     "expected 2 entries (DimensionCount is 2), got 1"),
    (put(bindings_desc, "PaddingMode", "reflect"), "dispatchables.pad_edge.desc.PaddingMode", "reflection"),
    (put(lambda m: m["dispatchables"]["pad_wrap"]["bindings"], "InputTensor", {"name": "storage", "elementOffset": 10}),
     "commands[2].bindings.InputTensor", "needs 12 bytes from byte 40, but resource 'storage' has 48 bytes"),
    (put(lambda m: m["commands"][2]["bindings"], "OutputTensor", {"name": "interleaved", "elementCount": 8}),
     "commands[2].bindings.OutputTensor", "needs 36 bytes from byte 0, but resource 'interleaved' has 32 bytes"),
    (put(lambda m: bindings_desc(m, "pad_bits")["InputTensor"], "Type", "DML_TENSOR_TYPE_INVALID"),
     "dispatchables.pad_bits.desc.InputTensor.Type", "only buffer tensors exist"),
]


@pytest.mark.filterwarnings("ignore::dmlops.dxdispatch.ModelWarning")
@pytest.mark.parametrize("edit,path,message", BINDING_ERRORS,
                         ids=[f"{p}-{i}" for i, (_, p, _) in enumerate(BINDING_ERRORS)])
def test_malformed_binding_errors_name_the_json_path(edit, path, message):
    with pytest.raises(ModelError) as info:
        dxdispatch.load(mutated("dml_bindings.json", edit))
    assert info.value.path == path
    assert message in str(info.value)


def test_errors_at_dispatch_time_name_the_command():
    # an output bound over its own input: valid JSON, refused by the kernel before it writes
    model = model_json("dml_upsample_2d.json")
    model["resources"]["input"]["sizeInBytes"] = 64
    model["commands"][0]["bindings"]["OutputTensor"] = "input"
    loaded = dxdispatch.load(model)
    with pytest.raises(ModelError) as info:
        loaded.run()
    assert info.value.path == "commands[0]" and "upsample: Upsample2D" in str(info.value)
    assert "overlap" in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(ModelError, match="cannot read the model"):
        dxdispatch.load(tmp_path / "absent.json")
    (tmp_path / "broken.json").write_text('{"resources": {}\n "commands": []}')
    with pytest.raises(ModelError) as info:
        dxdispatch.load(tmp_path / "broken.json")
    assert info.value.path == f"{tmp_path / 'broken.json'}:2:2" and "not valid JSON" in str(info.value)
    (tmp_path / "wrong.npy").write_bytes(b"not numpy")
    np.save(tmp_path / "complex.npy", np.zeros(2, np.complex64))
    np.save(tmp_path / "ints.npy", np.zeros(2, np.int32))
    for source, dtype, message in [("wrong.npy", None, "wrong.npy is not a valid .npy file"),
                                   ("complex.npy", None, "holds complex64, not a DirectML data type"),
                                   ("ints.npy", "FLOAT32", "ints.npy holds INT32 but initialValuesDataType is FLOAT32"),
                                   ("raw.bin", None, "raw file raw.bin needs an initialValuesDataType")]:
        spec = {"initialValues": {"sourcePath": source}}
        if dtype:
            spec["initialValuesDataType"] = dtype
        with pytest.raises(ModelError) as info:
            dxdispatch.load({"resources": {"r": spec}, "dispatchables": {}, "commands": []}, base_dir=tmp_path)
        assert info.value.path == "resources.r.initialValues.sourcePath" and message in str(info.value)


# ---------------------------------------------------------------------------------------------
# DxDispatch parity: what DxDispatch's parser accepts, dmlops accepts (the class: every model
# file, rewritten in the other form, runs to the same results)


def all_models() -> list[str]:
    return sorted(path.name for path in MODELS.glob("*.json"))


def same_results(model: dict, name: str, tmp_path: Path) -> None:
    """``model``, a rewritten form of the model file ``name``, runs to its results and prints
    its lines."""
    expected, expected_lines = run_logged(MODELS / name)
    (tmp_path / name).write_text(json.dumps(model))
    results, lines = run_logged(tmp_path / name)
    assert lines == expected_lines
    for key, values in expected.items():
        np.testing.assert_array_equal(results[key], values, err_msg=key)


@pytest.mark.parametrize("name", all_models())
def test_descs_written_inline_without_desc(name, tmp_path):
    model = model_json(name)
    for spec in model["dispatchables"].values():
        spec.update(spec.pop("desc"))  # DxDispatch reads the desc's fields beside "type"
    same_results(model, name, tmp_path)


@pytest.mark.parametrize("name", all_models())
def test_bindings_given_as_one_element_arrays(name, tmp_path):
    model = model_json(name)
    for owner in [*model["dispatchables"].values(), *model["commands"]]:
        for key, binding in owner.get("bindings", {}).items():
            owner["bindings"][key] = [binding]
    same_results(model, name, tmp_path)


@pytest.mark.parametrize("name", all_models())
def test_command_types_in_any_case(name, tmp_path):
    model = model_json(name)
    for i, command in enumerate(model["commands"]):
        command["type"] = command["type"].upper() if i % 2 else command["type"].lower()
    same_results(model, name, tmp_path)


@pytest.mark.parametrize("name", all_models())
def test_a_utf8_byte_order_mark_is_skipped(name, tmp_path):
    expected, expected_lines = run_logged(MODELS / name)
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + (MODELS / name).read_bytes())
    results, lines = run_logged(tmp_path / name, )
    assert lines == expected_lines
    np.testing.assert_equal(results, expected)


UNKNOWN_FIELDS = [  # (where to put a field dmlops does not know, the JSON path of the warning)
    (lambda m: m, "model.comment"),
    (resource("input"), "resources.input.comment"),
    (lambda m: m["resources"]["filter"]["initialValues"], "resources.filter.initialValues.comment"),
    (lambda m: m["dispatchables"]["conv"], "dispatchables.conv.comment"),
    (conv_desc, "dispatchables.conv.desc.comment"),
    (lambda m: conv_desc(m)["InputTensor"], "dispatchables.conv.desc.InputTensor.comment"),
    (conv_command, "commands[0].comment"),
    (lambda m: conv_command(m)["bindings"], "commands[0].bindings.comment"),
    (lambda m: m["commands"][1], "commands[1].comment"),
]


@pytest.mark.parametrize("get,path", UNKNOWN_FIELDS, ids=[p for _, p in UNKNOWN_FIELDS])
def test_unknown_fields_are_ignored_with_a_warning(get, path, tmp_path):
    model = mutated("dml_convolution.json", put(get, "comment", {"any": ["value"]}))
    with pytest.warns(dxdispatch.ModelWarning) as caught:
        loaded = dxdispatch.load(model, base_dir=MODELS)
    assert [str(w.message).split(": ")[0] for w in caught] == [path]
    assert "ignored" in str(caught[0].message)
    np.testing.assert_array_equal(loaded.run()["output"], run_logged(MODELS / "dml_convolution.json")[0]["output"])


def test_an_unknown_field_in_a_binding_object_is_ignored_with_a_warning():
    model = mutated("dml_bindings.json", put(lambda m: m["commands"][2]["bindings"], "OutputTensor",
                                             {"name": "interleaved", "counter": "c"}))
    with pytest.warns(dxdispatch.ModelWarning, match=r"^commands\[2\]\.bindings\.OutputTensor\.counter: unknown"):
        dxdispatch.load(model)


def print_lines(spec: dict, verbose: bool = False) -> list[str]:
    model = {"resources": {"r": spec}, "dispatchables": {},
             "commands": [{"type": "print", "resource": "r", "verbose": verbose}]}
    return run_logged(model)[1]


@pytest.mark.parametrize("spec,line", [
    # DxDispatch prints the initial values' element count from the buffer's start: sizeInBytes
    # and initialValuesOffsetInBytes change what is stored, not how much is printed
    ({"initialValuesDataType": "INT16", "initialValues": [7, -3], "sizeInBytes": 16}, "7, -3"),
    ({"initialValuesDataType": "INT16", "initialValues": [7, -3], "initialValuesOffsetInBytes": 2}, "0, 7"),
    ({"initialValuesDataType": "UINT32", "initialValues": [5], "sizeInBytes": 12,
      "initialValuesOffsetInBytes": 8}, "0"),
    ({"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 3, "value": 1}}, "1, 1, 1"),  # not 4
    # floats as C++ streams show them: 6 significant digits
    ({"initialValuesDataType": "FLOAT64", "initialValues": [1234567, 0.1, 1e-5, -0.0, "inf", "nan"]},
     "1.23457e+06, 0.1, 1e-05, -0, inf, nan"),
    ({"initialValuesDataType": "UINT64", "initialValues": [18446744073709551615]}, "18446744073709551615"),
    # INT8 and UINT8 are chars to a C++ stream: their bytes are printed as characters
    ({"initialValuesDataType": "UINT8", "initialValues": [72, 105, 33]}, "H, i, !"),
    ({"initialValuesDataType": "INT8", "initialValues": [48, 0, -1]}, "0, \x00, \udcff"),
])
def test_print_shows_what_dxdispatch_shows(spec, line):
    assert print_lines(spec) == [f"Resource 'r': {line}"]


def test_verbose_print_format():
    # "[{index:>width}] value (0x{bits:>2*itemsize}X)\n" per element, width = digits of the count
    lines = print_lines({"initialValuesDataType": "FLOAT32", "initialValues": [0, 1.5, -2] + [1] * 7}, verbose=True)
    assert lines == ["Resource 'r':\n[ 0] 0 (0x       0)\n[ 1] 1.5 (0x3FC00000)\n[ 2] -2 (0xC0000000)\n"
                     + "".join(f"[ {i}] 1 (0x3F800000)\n" for i in range(3, 10))]
    lines = print_lines({"initialValuesDataType": "INT8", "initialValues": [65, -2]}, verbose=True)
    assert lines == ["Resource 'r':\n[0] A (0x41)\n[1] \udcfe (0xFE)\n"]
    lines = print_lines({"initialValuesDataType": "INT64", "initialValues": [-1, 16]}, verbose=True)
    assert lines == ["Resource 'r':\n[0] -1 (0xFFFFFFFFFFFFFFFF)\n[1] 16 (0x              10)\n"]


def test_cli_prints_int8_as_raw_bytes(tmp_path):
    model = {"resources": {"r": {"initialValuesDataType": "INT8", "initialValues": [65, -1]}}, "dispatchables": {},
             "commands": [{"type": "print", "resource": "r"}]}
    (tmp_path / "m.json").write_text(json.dumps(model))
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", str(tmp_path / "m.json")], capture_output=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"Resource 'r': A, \xff\n"


def test_cli_input_path_and_output_path(tmp_path):
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "x.npy", np.arange(3, dtype=np.float32))
    model = {"resources": {"x": {"initialValues": {"sourcePath": "x.npy"}}}, "dispatchables": {},
             "commands": [{"type": "print", "resource": "x"},
                          {"type": "writeFile", "resource": "x", "targetPath": "sub/y.npy"}]}
    (tmp_path / "m.json").write_text(json.dumps(model))
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", str(tmp_path / "m.json"), "--input_path",
                             str(tmp_path / "data"), "--output_path", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Resource 'x': 0, 1, 2\n"
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "sub" / "y.npy"), [0, 1, 2])


def test_cli_prints_warnings_then_runs(tmp_path):
    model = model_json("dml_upsample_2d.json")
    model["resources"]["input"]["note"] = "kept by DxDispatch, ignored"
    (tmp_path / "m.json").write_text(json.dumps(model))
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", str(tmp_path / "m.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stderr.splitlines() == [f"warning: {tmp_path / 'm.json'}: resources.input.note: unknown field, "
                                          "ignored (known: type, initialValuesDataType, initialValues, "
                                          "initialValuesOffsetInBytes, sizeInBytes, resampleSize, resampleMode)"]
    assert result.stdout.startswith("Resource 'output': 1, 1.25,")


def test_image_source_paths_are_named_as_unsupported():
    model = mutated("dml_convolution.json", lambda m: m["resources"]["input"].update(
        initialValues={"sourcePath": "photo.PNG"}, resampleSize=[1, 3, 5, 5]))
    with pytest.raises(ModelError, match=r"^resources\.input\.initialValues\.sourcePath: image files are not "
                                         r"supported by dmlops \(photo\.PNG\)"):
        dxdispatch.load(model)


# ---------------------------------------------------------------------------------------------
# Hostile files: a ModelError naming the place, never another exception, a hang, unbounded
# memory or a file written outside the output directory


def strip(text: str) -> str:
    return dxdispatch._strip_json_extensions(text)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='a/*,"\\\n ]}'),  # strings that look like comments, commas and brackets
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='ab/*,"', max_size=4), inner, max_size=4),
    max_leaves=20)
GAPS = st.sampled_from(["", " ", "\n", "// a comment, ] }\n", "/* a comment, with ] and } */", "/**/"])


@given(JSON_VALUES, st.data())
def test_comments_and_trailing_commas_anywhere(value, data):
    """Any JSON value written with comments between its tokens and trailing commas after its
    arrays' and objects' last entries reads back as itself."""
    def render(v) -> str:
        gap = lambda: data.draw(GAPS)  # noqa: E731
        if isinstance(v, list):
            items = [gap() + render(x) + gap() for x in v]
        elif isinstance(v, dict):
            items = [gap() + json.dumps(k) + gap() + ":" + gap() + render(x) + gap() for k, x in v.items()]
        else:
            return json.dumps(v)
        trailing = "," + gap() if items and data.draw(st.booleans()) else ""
        open_, close = "[]" if isinstance(v, list) else "{}"
        return open_ + gap() + ",".join(items) + trailing + close
    assert json.loads(strip(render(value))) == value


@pytest.mark.parametrize("unit", ['"a\\', "/*", "//", "*/", '"', ",", "[1,", '{"a":', "]", "\\"])
def test_the_comment_stripper_is_linear(unit):
    """600 KB of any repeated fragment (unterminated strings and comments included, which the
    regular expression used before took 30 s on for 60 KB) is stripped in well under a second;
    10 s is the bound on a loaded machine."""
    text = unit * (600_000 // len(unit))
    start = time.perf_counter()
    try:
        strip(text)
    except ModelError as e:
        assert "nested deeper than 64" in str(e)
    assert time.perf_counter() - start < 10


def test_nesting_is_limited_before_parsing(tmp_path):
    ok = {"resources": {"r": {"initialValuesDataType": "UINT16", "initialValues": [1], "note": [[[[1]]]]}},
          "dispatchables": {}, "commands": []}
    (tmp_path / "ok.json").write_text(json.dumps(ok))
    with pytest.warns(dxdispatch.ModelWarning):
        dxdispatch.load(tmp_path / "ok.json")
    (tmp_path / "deep.json").write_text('{"resources": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ModelError) as info:
        dxdispatch.load(tmp_path / "deep.json")
    prefix = len('{"resources": ')  # the object is the first level: the 64th "[" is the 65th
    assert info.value.path == f"{tmp_path / 'deep.json'}:1:{prefix + 64}"
    assert info.value.message == "not valid JSON: nested deeper than 64 arrays and objects"
    deep: object = 1
    for _ in range(100_000):  # a dict built in Python has no parser to stop it
        deep = [deep]
    with pytest.raises(ModelError, match="^model: nested too deeply"):
        dxdispatch.load({"resources": {"r": {"initialValuesDataType": "UINT16", "initialValues": deep}},
                         "dispatchables": {}, "commands": []})


@pytest.mark.parametrize("data,message", [
    (b'{"resources": {"\xff": 1}}', "not UTF-8 text (byte 16 is 0xFF)"),
    (b"\xfe\xff\x00{", "not UTF-8 text (byte 0 is 0xFE)"),  # UTF-16
    (b'{"resources": ' + b"1" * 5000 + b"}", "not valid JSON: Exceeds the limit"),  # Python's int digits limit
])
def test_files_that_are_not_utf8_json(tmp_path, data, message):
    (tmp_path / "m.json").write_bytes(data)
    with pytest.raises(ModelError) as info:
        dxdispatch.load(tmp_path / "m.json")
    assert info.value.path == str(tmp_path / "m.json") and info.value.message.startswith(message)


@pytest.mark.parametrize("edit,path", [
    (put(lambda m: conv_desc(m)["FusedActivation"]["Desc"], "Alpha", int("9" * 400)),
     "dispatchables.conv.desc.FusedActivation"),
    (put(resource("bias"), "initialValues", [int("9" * 400), 1, 2, 3]), "resources.bias.initialValues[0]"),
    (put(lambda m: m["resources"]["filter"]["initialValues"], "valueDelta", -int("9" * 400)),
     "resources.filter.initialValues.valueDelta"),
    (put(conv_desc, "Strides", [int("9" * 400), 1]), "dispatchables.conv.desc.Strides"),
    (put(lambda m: conv_command(m)["bindings"], "InputTensor", {"name": "input", "elementOffset": 10**400}),
     "commands[0].bindings.InputTensor"),
    (put(conv_desc, "InputTensor", {"DataType": "FLOAT32", "Sizes": [2**63, 2, 5, 5]}),
     "dispatchables.conv.desc.InputTensor"),
])
def test_huge_numbers_are_model_errors(edit, path):
    with pytest.raises(ModelError) as info:
        dxdispatch.load(mutated("dml_convolution.json", edit), base_dir=MODELS)
    assert info.value.path == path


def source_model(source: str, **spec) -> dict:
    return {"resources": {"r": {"initialValues": {"sourcePath": source}, **spec}}, "dispatchables": {}, "commands": []}


def load_in_a_child(tmp_path: Path, model: dict) -> subprocess.CompletedProcess:
    """``python -m dmlops run`` on ``model``, in a child process: a hang fails the test (a
    timeout) instead of stopping the test run."""
    (tmp_path / "m.json").write_text(json.dumps(model))
    return subprocess.run([sys.executable, "-m", "dmlops", "run", str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("source", ["fifo.dat", "fifo.npy", "/dev/zero", "/dev/urandom", "/dev/null", "adir.npy"])
def test_source_paths_must_be_regular_files(tmp_path, source):
    os.mkfifo(tmp_path / "fifo.dat")
    os.mkfifo(tmp_path / "fifo.npy")
    (tmp_path / "adir.npy").mkdir()
    result = load_in_a_child(tmp_path, source_model(source, initialValuesDataType="UINT8"))
    assert result.returncode == 1
    assert result.stderr == (f"error: {tmp_path / 'm.json'}: resources.r.initialValues.sourcePath: "
                             f"{tmp_path / source if not source.startswith('/') else source} is not a regular file\n")


def test_source_files_larger_than_their_buffer_are_not_read(tmp_path):
    (tmp_path / "big.dat").write_bytes(bytes(1000))
    np.save(tmp_path / "big.npy", np.zeros(250, np.float32))
    for source in ("big.dat", "big.npy"):
        with pytest.raises(ModelError) as info:
            dxdispatch.load(source_model(source, initialValuesDataType="FLOAT32", sizeInBytes=64), base_dir=tmp_path)
        assert info.value.path in ("resources.r.initialValues.sourcePath", "resources.r.sizeInBytes")
        assert "more than the 64" in str(info.value) or "do not fit in sizeInBytes 64" in str(info.value)
    # a .npy header claiming more data than the file holds is refused before numpy allocates it
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (2**40,)
    with open(tmp_path / "liar.npy", "wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(bytes(4))
    with pytest.raises(ModelError, match=r"liar.npy has 4 bytes of data; its header \(float32, shape \(1099511627776,\)\)"):
        dxdispatch.load(source_model("liar.npy"), base_dir=tmp_path)


def write_model(target: str) -> dict:
    return {"resources": {"r": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2]}}, "dispatchables": {},
            "commands": [{"type": "writeFile", "resource": "r", "targetPath": target}]}


@pytest.mark.parametrize("target,message", [
    ("../x.npy", "leaves the output directory"),
    ("a/../../x.dat", "leaves the output directory"),
    ("a/..", "leaves the output directory"),
    ("..\\x.dat", "leaves the output directory"),  # Windows' separator too
    ("/tmp/x.dat", "is absolute"),
    ("\\x.dat", "is absolute"),
    ("C:x.dat", "is absolute"),
    ("", "is not a file name"),
    ("x\0.dat", "is not a file name"),
    (".", "names a directory"),
    ("sub/", "names a directory"),
    ("sub/.", "names a directory"),
])
def test_write_file_targets_stay_inside_the_output_directory(tmp_path, target, message):
    with pytest.raises(ModelError) as info:
        dxdispatch.load(write_model(target))  # refused before anything runs
    assert info.value.path == "commands[0].targetPath" and message in info.value.message


def test_write_file_through_symbolic_links(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "escape").symlink_to(outside)  # a directory link leading out
    (outside / "victim.dat").write_bytes(b"keep")
    (out / "final.dat").symlink_to(outside / "victim.dat")  # a final link leading out
    (out / "inner").mkdir()
    (out / "loop.dat").symlink_to(out / "inner" / "x.dat")  # a final link, even inside, is not followed
    (out / "adir.dat").mkdir()
    os.mkfifo(out / "fifo.dat")
    for target, message in [("escape/x.dat", "leads outside the output directory"), ("final.dat", "cannot write"),
                            ("loop.dat", "cannot write"), ("adir.dat", "cannot write"), ("fifo.dat", "cannot write")]:
        with pytest.raises(ModelError) as info:
            dxdispatch.load(write_model(target)).run(out)
        assert info.value.path == "commands[0].targetPath" and message in info.value.message, target
    assert sorted(os.listdir(outside)) == ["victim.dat"] and (outside / "victim.dat").read_bytes() == b"keep"
    assert os.listdir(out / "inner") == []
    dxdispatch.load(write_model("inner/ok.dat")).run(out / "escape" / ".." / "out")  # the directory itself may be any path
    assert (out / "inner" / "ok.dat").read_bytes() == np.array([1, 2], "<f4").tobytes()


BAD_FILES = {  # name: the bytes of a model file that must end in one error line
    "not_utf8": b'{"resources": {"\xff": 1}}',
    "deep": b"[" * 100_000,
    "syntax": b'{"resources": {}\n "commands": []}',
    "huge_size": json.dumps(mutated("dml_convolution.json", put(resource("bias"), "sizeInBytes", 10**30))).encode(),
    "huge_count": json.dumps(mutated("dml_convolution.json", put(lambda m: m["resources"]["bias"], "initialValues",
                                                                 {"valueCount": 2**40, "value": 1}))).encode(),
    "huge_alpha": json.dumps(mutated("dml_convolution.json", put(lambda m: conv_desc(m)["FusedActivation"]["Desc"],
                                                                 "Alpha", int("9" * 400)))).encode(),
    "escape": json.dumps(write_model("../../x.dat")).encode(),
    "device": json.dumps(source_model("/dev/zero", initialValuesDataType="UINT8")).encode(),
    "newline_in_name": json.dumps({"resources": {"a\nb": {"initialValues": [1]}}, "dispatchables": {},
                                   "commands": []}).encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_cli_any_bad_file_is_one_error_line(tmp_path, capsys, name):
    from dmlops.__main__ import main
    (tmp_path / "m.json").write_bytes(BAD_FILES[name])
    assert main(["run", str(tmp_path / "m.json"), "--out", str(tmp_path / "out")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"error: {tmp_path / 'm.json'}")
    assert not (tmp_path / "x.dat").exists()


def test_cli_model_that_is_not_a_regular_file(tmp_path):
    result = subprocess.run([sys.executable, "-m", "dmlops", "run", "/dev/zero"], capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "error: /dev/zero: the model is not a "
                                                                        "regular file\n")


def test_fuzzing_load_and_run(tmp_path):
    """tests/fuzz/fuzz_dxdispatch.py for a minute, coverage-guided (atheris), in a child process
    whose address space is limited to 4 GiB: an exception other than ModelError, a crash, an
    input that runs past 30 s or a file written outside the output directory fails the test,
    with libFuzzer's report. Under AddressSanitizer (scripts/sanitize preloads it, and it
    reserves terabytes of address space) the limit is ASan's own checks instead."""
    script = Path(__file__).resolve().parents[1] / "fuzz" / "fuzz_dxdispatch.py"
    asan = "libasan" in os.environ.get("LD_PRELOAD", "")

    def limit_memory() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    result = subprocess.run([sys.executable, *(["-S"] if sys.flags.no_site else []), str(script),
                             "-max_total_time=60", "-timeout=30", "-rss_limit_mb=4096", "-seed=1"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            preexec_fn=None if asan else limit_memory)
    assert result.returncode == 0, result.stderr[-5000:]
    assert "Done " in result.stderr and " runs in " in result.stderr
