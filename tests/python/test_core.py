"""Library-wide pieces: TensorDesc, calc_buffer_tensor_size, threads, fork safety."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import numpy as np
import pytest

import dmlops


@pytest.mark.parametrize("dtype,sizes,strides,expected", [
    ("float16", (1, 3), None, 8),  # the spec's example: 6 bytes rounded up to 8
    ("float32", (2, 3), None, 24),
    ("uint8", (5,), None, 8),
    ("int64", (2, 3), (3, 1), 48),
    ("float32", (2, 3), (1, 2), 24),  # column-major
    ("float32", (4, 4), (8, 1), (3 * 8 + 3 + 1) * 4),  # padded rows
    ("uint8", (3, 3), (0, 1), 4),  # broadcast rows: 3 bytes -> 4
    ("int16", (3,), (-2,), 12),  # negative stride spans |stride|
    ("float64", (65536, 65536), None, 65536 * 65536 * 8),  # 64-bit arithmetic
])
def test_calc_buffer_tensor_size(dtype, sizes, strides, expected):
    assert dmlops.calc_buffer_tensor_size(dtype, sizes, strides) == expected
    assert dmlops.TensorDesc(dtype, sizes, strides).buffer_size == expected


def test_tensor_desc_names_and_values():
    d = dmlops.TensorDesc(np.float16, [2, 3])
    assert d == dmlops.TensorDesc("FLOAT16", (2, 3)) == dmlops.TensorDesc("DML_TENSOR_DATA_TYPE_FLOAT16", (2, 3))
    assert d.dtype == "float16" and d.sizes == (2, 3) and d.strides is None and d.rank == 2
    assert d != dmlops.TensorDesc("float16", (2, 3), (3, 1))
    assert repr(dmlops.TensorDesc("int8", (4,), (-1,))) == "TensorDesc('int8', (4,), strides=(-1,))"
    assert dmlops.TensorDesc.from_dict({"DataType": "UINT64", "Sizes": [1, 2], "Strides": [2, 1]}) == \
        dmlops.TensorDesc("uint64", (1, 2), (2, 1))
    assert dmlops.TensorDesc.from_array(np.zeros((2, 5), bool)) == dmlops.TensorDesc("uint8", (2, 5))
    assert {dmlops.TensorDesc(t, (1,)).dtype for t in dmlops.DTYPES} == set(dmlops.DTYPES)


@pytest.mark.parametrize("bad,error", [
    ({"dtype": "float32", "sizes": ()}, ValueError),
    ({"dtype": "float32", "sizes": (1,) * 9}, ValueError),
    ({"dtype": "float32", "sizes": (2, -1)}, ValueError),
    ({"dtype": "float32", "sizes": (2, 2.0)}, TypeError),
    ({"dtype": "float128", "sizes": (2,)}, TypeError),
    ({"dtype": "float32", "sizes": (2,), "strides": (1, 1)}, ValueError),
])
def test_tensor_desc_rejects(bad, error):
    with pytest.raises(error, match="TensorDesc"):
        dmlops.TensorDesc(**bad)


def test_tensor_desc_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown field"):
        dmlops.TensorDesc.from_dict({"DataType": "UINT8", "Sizes": [1], "Bogus": 0})
    with pytest.raises(ValueError, match="missing field 'Sizes'"):
        dmlops.TensorDesc.from_dict({"DataType": "UINT8"})


def test_set_num_threads():
    dmlops.set_num_threads(3)
    assert dmlops.get_num_threads() == 3
    dmlops.set_num_threads(np.int64(1))
    assert dmlops.get_num_threads() == 1
    for bad, error in ((0, ValueError), (-2, ValueError), (2.0, TypeError), (True, TypeError), ("2", TypeError)):
        with pytest.raises(error, match="set_num_threads"):
            dmlops.set_num_threads(bad)
    assert dmlops.get_num_threads() == 1


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_environment_variable_sets_the_default():
    result = run_python("import dmlops; print(dmlops.get_num_threads())", DMLOPS_NUM_THREADS="3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3"


def test_invalid_environment_variable_warns_and_uses_the_cpus():
    result = run_python("import dmlops, os; print(dmlops.get_num_threads() == len(os.sched_getaffinity(0)))",
                        DMLOPS_NUM_THREADS="lots")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    assert "DMLOPS_NUM_THREADS='lots' is not an integer" in result.stderr


def _pad_in_child(queue):
    x = np.arange(400_000, dtype=np.float32).reshape(400, 1000)
    y = dmlops.pad(x, (3, 3), (3, 3), mode="reflection")
    queue.put(float(y.sum()))


def test_kernels_work_after_fork():
    """The child of a fork has no worker threads; the pool must be rebuilt, not waited on."""
    dmlops.set_num_threads(2)
    x = np.arange(400_000, dtype=np.float32).reshape(400, 1000)
    expected = float(dmlops.pad(x, (3, 3), (3, 3), mode="reflection").sum())  # the parent's pool exists now
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_pad_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected


def test_demo_runs_and_checks_itself():
    result = subprocess.run([sys.executable, "-m", "dmlops"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all checks passed" in result.stdout
    for mode in ("constant", "edge", "reflection", "symmetric", "wrap"):
        assert f"{mode}: output (1, 1, 8, 10) matches" in result.stdout


def test_demo_runs_and_passes():
    """``python -m dmlops`` (README's first command) checks DirectML's examples and exits 0."""
    result = subprocess.run([sys.executable, "-m", "dmlops"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all checks passed" in result.stdout and "matches DxDispatch's table" in result.stdout
