"""Library-wide pieces: TensorDesc, calc_buffer_tensor_size, threads, fork safety."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import dmlops
from strategies import GARBAGE, expect_only_value_or_type_errors, garbage_settings, mutated_json, mutated_kwargs


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
    for bad, error in ((0, ValueError), (-2, ValueError), (2.0, TypeError), (True, TypeError), ("2", TypeError),
                       (1025, ValueError), (2**31, ValueError), (2**64, ValueError), (-2**63, ValueError)):
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


def test_cache_sizes_are_plausible():
    caches = dmlops._core.cache_sizes()
    assert set(caches) == {"l1d", "l2", "l3", "source"}
    assert 4096 <= caches["l1d"] <= caches["l2"] and caches["l3"] > 0
    assert caches["source"] in ("environment", "cpuid", "sysfs", "sysctl", "windows", "default")


def test_cpu_features_are_consistent():
    """What the CPU has, as the kernels read it: each extension implies the ones it builds on, and
    the switches that turn kernels off leave the report alone."""
    f = dmlops._core.cpu_features()
    assert set(f) == {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vbmi", "avx512_half_rate", "zen4", "neon"}
    assert all(isinstance(v, bool) for v in f.values())
    assert not f["avx512vbmi"] or f["avx512bw"]
    assert not f["avx512bw"] or f["avx512f"]
    assert not (f["avx512_half_rate"] or f["zen4"]) or f["avx512f"]
    assert not (f["neon"] and f["avx2"])
    code = "from dmlops import _core; print(sorted(k for k, v in _core.cpu_features().items() if v))"
    result = run_python("import dmlops; " + code, DMLOPS_DISABLE_AVX2="1", DMLOPS_DISABLE_AVX512="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(sorted(k for k, v in f.items() if v))


@pytest.mark.parametrize("value, expected", [
    ("48K,2M,32M", (48 << 10, 2 << 20, 32 << 20)),
    (" 32768 , 1048576 , 8M ", (32 << 10, 1 << 20, 8 << 20)),
    ("48K,2M", None), ("2M,48K,32M", None), ("48KB,2M,32M", None), ("512,1M,8M", None), ("", None),
])
def test_cache_sizes_environment_variable(value, expected):
    """DMLOPS_CACHE_SIZES replaces the detected sizes when valid; otherwise Python warns and the
    detected ones stay (the same C++ parser decides both)."""
    code = "from dmlops import _core; c = _core.cache_sizes(); print(c['l1d'], c['l2'], c['l3'], c['source'])"
    result = run_python("import dmlops; " + code, DMLOPS_CACHE_SIZES=value)
    assert result.returncode == 0, result.stderr
    *sizes, source = result.stdout.split()
    if expected is None:
        assert source != "environment"
        assert f"DMLOPS_CACHE_SIZES={value!r} is not three sizes" in result.stderr
    else:
        assert (tuple(map(int, sizes)), source) == (expected, "environment")
        assert "DMLOPS_CACHE_SIZES" not in result.stderr


@pytest.mark.parametrize("value", ["1 ", " 3", "2\n", "\t4\t", "", " ", "0", "1025", "-1", "+2", "2x", "1 2", "2.0",
                                   "99999", "0x10"])
def test_one_parser_for_the_environment_variable(value):
    """Python's warning and C++'s choice come from one parser: a value is either used (no
    warning) or reported and replaced by the CPU count; never used silently in one and not the
    other."""
    code = "import dmlops, os; print(dmlops.get_num_threads(), len(os.sched_getaffinity(0)))"
    result = run_python(code, DMLOPS_NUM_THREADS=value)
    assert result.returncode == 0, result.stderr
    used, cpus = map(int, result.stdout.split())
    stripped = value.strip()
    valid = stripped.isdigit() and 1 <= int(stripped) <= 1024
    assert used == (int(stripped) if valid else cpus)
    assert ("is not an integer from 1 to 1024" in result.stderr) == (not valid)


def test_threads_context_is_per_thread_and_nests():
    dmlops.set_num_threads(3)
    seen = {}

    def other() -> None:
        seen["other"] = dmlops.get_num_threads()

    with dmlops.threads(1) as outer:
        assert dmlops.get_num_threads() == 1
        t = threading.Thread(target=other)
        t.start()
        t.join()
        with dmlops.threads(5):
            assert dmlops.get_num_threads() == 5
            dmlops.set_num_threads(2)  # process-wide: does not touch this thread's own count
            assert dmlops.get_num_threads() == 5
            with outer:  # the same object entered again
                assert dmlops.get_num_threads() == 1
            assert dmlops.get_num_threads() == 5
        assert dmlops.get_num_threads() == 1
    assert seen["other"] == 3
    assert dmlops.get_num_threads() == 2
    with pytest.raises(KeyError):
        with dmlops.threads(4):
            raise KeyError("inside")
    assert dmlops.get_num_threads() == 2
    for bad, error in ((0, ValueError), (1025, ValueError), (2**70, ValueError), (2.0, TypeError),
                       (True, TypeError), ("2", TypeError)):
        with pytest.raises(error, match="threads"):
            dmlops.threads(bad)
    assert repr(dmlops.threads(3)) == "dmlops.threads(3)"


@pytest.mark.parametrize("threads", [2, 5, 17])
def test_every_operator_gives_the_same_bits_inside_threads(threads):
    calls = every_operator_call()
    with dmlops.threads(1):
        expected = {name: bits_of(call()) for name, call in calls.items()}
    dmlops.set_num_threads(1)
    with dmlops.threads(threads):
        for name, call in calls.items():
            assert bits_of(call()) == expected[name], f"{name}: threads({threads}) differs from 1"


def test_threadpoolctl_sees_and_limits_dmlops():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    dmlops.set_num_threads(3)
    [info] = [lib for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "dmlops"]
    assert info["num_threads"] == 3 and info["version"] == dmlops.__version__
    assert info["filepath"] == os.path.realpath(dmlops._core.__file__)
    with threadpoolctl.threadpool_limits(1):
        assert dmlops.get_num_threads() == 1
    assert dmlops.get_num_threads() == 3
    with threadpoolctl.threadpool_limits(limits={"dmlops": 2}):
        assert dmlops.get_num_threads() == 2
    assert dmlops.get_num_threads() == 3


def test_threads_the_os_refuses_do_not_hang_or_fail():
    """Under an address-space limit that leaves room for a few thread stacks only, asking for
    1024 threads runs with the threads that could be made, correctly, and stays usable."""
    code = """
import resource, numpy as np, dmlops
x = np.arange(16 * 256 * 256, dtype=np.float32).reshape(16, 256, 256)
expected = dmlops.pad(x, (0, 3, 3), (0, 3, 3), mode="reflection")
y = np.empty_like(expected)  # before the limit: the limit is for the threads
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (96 << 20), resource.RLIM_INFINITY))
dmlops.set_num_threads(1024)
for _ in range(3):
    y[...] = 0
    dmlops.pad(x, (0, 3, 3), (0, 3, 3), mode="reflection", out=y)
    assert np.array_equal(y, expected)
with open("/proc/self/status") as f:
    print(next(int(line.split()[1]) for line in f if line.startswith("Threads:")))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert 2 < int(result.stdout) < 200  # some workers were made, most were refused


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


# ---------------------------------------------------------------------------------------------
# Every operator under threads: thread-count independence, concurrent callers, fork

def every_operator_call() -> dict:
    """One call of every operator (and mode family), on inputs big enough to be split over threads."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 8, 48, 40)).astype(np.float32)
    h = x.astype(np.float16)
    u8 = rng.integers(0, 256, size=(2, 8, 48, 40), dtype=np.uint8)
    w = rng.standard_normal((16, 4, 3, 3)).astype(np.float32)
    wt = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    cols = dmlops.unfold(x, (3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1))
    return {
        "pad constant": lambda: dmlops.pad(u8, (0, 1, 3, 2), (1, 0, 2, 5), mode="constant", value=9),
        "pad reflection": lambda: dmlops.pad(x[:, :, ::-1], (0, 0, 70, 3), (0, 0, 2, 50), mode="reflection"),
        "pad v1 symmetric": lambda: dmlops.PaddingDesc(dmlops.TensorDesc.from_array(h), padding_mode="symmetric",
                                                       start_padding=(0, 0, 5, 5), end_padding=(1, 1, 0, 9))(h),
        "unfold": lambda: dmlops.unfold(x, (3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1)),
        "fold": lambda: dmlops.fold(cols, (48, 40), (3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1)),
        "upsample nearest": lambda: dmlops.upsample_2d(u8, (2, 3)),
        "upsample linear": lambda: dmlops.upsample_2d(h, 2, "linear"),
        "resample linear": lambda: dmlops.resample(x, (1, 1, 1.75, 0.5), "linear"),
        "resample antialiased": lambda: dmlops.resample(x, (1, 1, 0.4, 0.3), "linear", antialiased=True),
        "resample nearest": lambda: dmlops.resample(u8, (1, 1, 1.5, 2.5), rounding_direction="increasing"),
        "lp pooling": lambda: dmlops.lp_pooling(x, (3, 3), strides=(2, 1), start_padding=(1, 1), end_padding=(1, 1),
                                                dilations=(1, 2), p=3),
        "convolution": lambda: dmlops.convolution(x, w, b, start_padding=(1, 1), end_padding=(1, 1), group_count=2,
                                                  fused_activation="relu"),
        "convolution backward": lambda: dmlops.convolution(x, wt, direction="backward", strides=(2, 2),
                                                           output_padding=(1, 1)),
        "convolution depthwise float16": lambda: dmlops.convolution(h, h[0, :, :3, :3].reshape(8, 1, 3, 3),
                                                                    group_count=8, strides=(2, 2)),
    }


def bits_of(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("threads", [2, 7])
def test_every_operator_gives_the_same_bits_for_any_thread_count(threads):
    calls = every_operator_call()
    dmlops.set_num_threads(1)
    expected = {name: bits_of(call()) for name, call in calls.items()}
    dmlops.set_num_threads(threads)
    for name, call in calls.items():
        assert bits_of(call()) == expected[name], f"{name}: {threads} threads differ from 1"


def test_concurrent_callers_while_the_thread_count_changes():
    """8 Python threads call every operator for a few seconds while the main thread keeps
    changing the thread count: every result equals the single-threaded one, nothing deadlocks
    (every thread must finish within the timeout), no exception."""
    calls = every_operator_call()
    dmlops.set_num_threads(1)
    expected = {name: bits_of(call()) for name, call in calls.items()}
    names = sorted(calls)
    failures: list = []
    stop = threading.Event()

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                name = names[int(rng.integers(len(names)))]
                if bits_of(calls[name]()) != expected[name]:
                    failures.append(f"{name}: differs from the single-threaded result")
        except Exception as error:  # reported below; a worker must not die silently
            failures.append(f"{type(error).__name__}: {error}")

    workers = [threading.Thread(target=worker, args=(seed,), daemon=True) for seed in range(8)]
    for t in workers:
        t.start()
    deadline = time.monotonic() + 3.0
    counts = itertools.cycle([2, 7, 1, 3, 8, 2])
    while time.monotonic() < deadline and not failures:
        dmlops.set_num_threads(next(counts))
        time.sleep(0.01)
    stop.set()
    for t in workers:
        t.join(timeout=60)
    assert not [t for t in workers if t.is_alive()], "a caller did not finish: deadlock"
    assert not failures, failures[:5]


def _run_every_operator_and_exit(expected: dict) -> None:
    """In a forked child: run every operator on the (inherited) pool, exit 0 if all agree."""
    status = 1
    try:
        calls = every_operator_call()
        for threads in (2, 1, 3):
            dmlops.set_num_threads(threads)
            for name, call in calls.items():
                if bits_of(call()) != expected[name]:
                    os.write(2, f"child: {name} differs\n".encode())
                    raise SystemExit
        status = 0
    finally:
        os._exit(status)


def wait_for_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung (deadlock in the pool after fork)")


def test_every_operator_works_in_a_forked_child_even_mid_call():
    """fork() while the pool is busy on another thread: the child rebuilds its pool (its copy of
    the parent's may be mid-task, its mutexes held) and runs every operator correctly."""
    calls = every_operator_call()
    dmlops.set_num_threads(2)
    expected = {name: bits_of(call()) for name, call in calls.items()}
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            for call in calls.values():
                call()

    background = threading.Thread(target=busy, daemon=True)
    background.start()
    try:
        for _ in range(3):
            time.sleep(0.05)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork of a threaded process
                pid = os.fork()
            if pid == 0:
                _run_every_operator_and_exit(expected)
            assert wait_for_child(pid, timeout=120) == 0
    finally:
        stop.set()
        background.join(timeout=60)
    assert not background.is_alive()


@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_tensor_descs_and_activations(data):
    """The building blocks every descriptor takes: garbage in, ValueError/TypeError out."""
    args = data.draw(mutated_kwargs(dict(dtype="float16", sizes=(2, 3), strides=(-3, 1)),
                                    dict(sizes=[(2**62, 4), (2**32, 2**32), (0,), (1,) * 9], strides=[(2**63 - 1, 1)])))
    note(f"dmlops.TensorDesc(**{args!r})")
    expect_only_value_or_type_errors(lambda: dmlops.TensorDesc(**args))
    d = data.draw(mutated_json(dmlops.TensorDesc("float16", (2, 3), (-3, 1)).to_dict()))
    note(f"dmlops.TensorDesc.from_dict({d!r})")
    expect_only_value_or_type_errors(lambda: dmlops.TensorDesc.from_dict(d))
    wrapped = data.draw(mutated_json({"Type": "DML_TENSOR_TYPE_BUFFER", "Desc": d}))
    expect_only_value_or_type_errors(lambda: dmlops.TensorDesc.from_dict(wrapped))
    expect_only_value_or_type_errors(lambda: dmlops.calc_buffer_tensor_size(**args))
    params = data.draw(mutated_kwargs(dict(alpha=0.5, beta=2.0), dict(alpha=[float("nan"), 1e39, "x"])))
    name = data.draw(st.sampled_from(["elu", "linear", "clip", "relu", "softmax"]) | GARBAGE)
    note(f"dmlops.Activation({name!r}, **{params!r})")
    expect_only_value_or_type_errors(lambda: dmlops.Activation(name, **params))
    a = data.draw(mutated_json(dmlops.Activation("linear", alpha=0.5, beta=2.0).to_dict()))
    note(f"dmlops.Activation.from_dict({a!r})")
    expect_only_value_or_type_errors(lambda: dmlops.Activation.from_dict(a))
