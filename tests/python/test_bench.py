"""python -m dmlops.bench, run in its smoke tier (tiny shapes, a few seconds): the report runs
every operator family, checks every peer it times, writes its JSON and plot, skips missing peer
libraries with one line each, and fails loudly when dmlops' answer is wrong."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import pytest

import dmlops
from dmlops import bench
from dmlops.bench import _report
from dmlops.bench._case import EXACT, Tolerance

FAMILIES = {"padding", "convolution", "lp_pooling", "unfold", "resample"}
OPTIONAL = ("torch", "onnxruntime", "onnx", "matplotlib")


def installed(module: str) -> bool:
    return sys.modules.get(module, False) is not None and importlib.util.find_spec(module) is not None


def check_report_json(data: dict, threads: list) -> None:
    env, limits, rows = data["environment"], data["limits"], data["results"]
    assert env["tier"] == "smoke" and env["threads"] == threads and env["seed"] == bench._harness.SEED
    assert env["versions"]["numpy"] == np.__version__ and env["versions"]["dmlops"] == dmlops.__version__
    assert limits["isa"] == dmlops._core.fma_isa()
    for t in map(str, threads):
        assert limits["copy"][t]["GBps"] > 0 and limits["copy"][t]["method"] in ("np.copyto", "dmlops.pad")
        assert limits["fma"][t]["GFLOPs"] > 0
    assert {r["family"] for r in rows} == FAMILIES
    assert {(r["case"], r["op"]) for r in rows} == {(c.name, c.op) for c in _report.select("smoke")}
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["threads"] in threads and r["limit"] in ("copy", "fma") and r["work"] > 0
        assert r["ms"]["dmlops"] > 0 and 0 < r["fraction_of_limit"] == pytest.approx(
            r["achieved_per_s"] / r["limit_per_s"])
        # Every timed peer was checked first, and passed; every other peer says why not.
        timed = set(r["ms"]) - {"dmlops"}
        assert {c["peer"] for c in r["checks"] if c["ok"]} == timed
        assert set(r["speedup"]) == timed
        assert timed | set(r["skipped"]) == set(bench.PEERS)
        for peer in timed:
            assert r["speedup"][peer] == pytest.approx(r["ms"][peer] / r["ms"]["dmlops"], rel=1e-3)
        # Data movement is timed beside plain copies of an output-sized buffer, its "copy" and
        # "fresh copy" goals' yardsticks.
        copy = r["same_bytes_copy"]
        moves = r["op"] in ("pad", "unfold") or (r["op"] in ("upsample_2d", "resample") and "nearest" in r["case"])
        assert (copy is not None) == moves
        if copy is not None:
            if r["op"] == "pad":
                out_bytes = np.dtype(r["dtype"]).itemsize * int(np.prod(
                    [n + s + e for n, s, e in zip(r["shape"], *_pads(r["detail"]))]))
                assert copy["bytes"] == out_bytes
            # Both yardsticks are the faster of the same two methods, into a buffer / a new array.
            assert set(copy["ms"]) == {"np.copyto", "dmlops.pad", "np.empty+copyto", "dmlops.pad new"}
            into = min(copy["ms"]["np.copyto"], copy["ms"]["dmlops.pad"])
            fresh = min(copy["ms"]["np.empty+copyto"], copy["ms"]["dmlops.pad new"])
            assert copy["ms"][copy["method"]] == into and copy["ms"][copy["fresh_method"]] == fresh
            assert copy["fraction"] == pytest.approx(into / r["ms"]["dmlops"], rel=1e-3)
            assert copy["fresh_fraction"] == pytest.approx(fresh / r["ms"]["dmlops"], rel=1e-3)
        # numpy has a formulation of every smoke case.
        assert "numpy" in timed


def _pads(detail: str) -> tuple:
    """The start and end paddings of a pad case, from its detail text "pads (...) (...)"."""
    start, end = detail.removeprefix("pads ").split(") (")
    return tuple(int(v) for v in start.strip("()").split(",") if v.strip()), tuple(
        int(v) for v in end.strip("()").split(",") if v.strip())


def test_smoke_report_with_the_installed_peers(tmp_path, capsys):
    out_json, out_png = tmp_path / "report.json", tmp_path / "report.png"
    out_scaling = tmp_path / "scaling.png"
    code = bench.main(["--smoke", "--threads", "1,2", "--json", str(out_json), "--plot", str(out_png),
                       "--scaling-plot", str(out_scaling)])
    text = capsys.readouterr()
    assert code == 0, text.out + text.err
    assert "All correctness checks passed." in text.out and "FAILED" not in text.out
    data = json.loads(out_json.read_text())
    check_report_json(data, [1, 2])
    rows = data["results"]
    # The table names every case in full, the longest (29 characters) included.
    assert all(f" {r['case']} " in text.out for r in rows)
    # A peer that is installed is compared (and timed) somewhere; one that is not is named once.
    for peer, module in (("torch", "torch"), ("onnxruntime", "onnxruntime")):
        if installed(module) and (peer != "onnxruntime" or installed("onnx")):
            assert any(peer in r["ms"] for r in rows), peer
            assert peer not in data["environment"]["skipped_peers"]
        else:
            assert f"{peer}: skipped" in text.out
    # Every convolution row times the prepared call too; with ONNX Runtime, the table compares the two.
    conv = [r for r in rows if r["op"] == "convolution" and r["status"] == "ok"]
    assert conv and all(r["prepared"]["ms"] > 0 for r in conv)
    if any("onnxruntime" in r["ms"] for r in conv):
        assert "ort/prep" in text.out
        assert all(r["prepared"]["speedup"]["onnxruntime"] == r["ms"]["onnxruntime"] / r["prepared"]["ms"] for r in conv)
    assert out_png.exists() == out_scaling.exists() == installed("matplotlib")
    if installed("matplotlib"):
        assert out_png.read_bytes()[:8] == out_scaling.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The scaling table: a line per case, its times at 1 and 2 threads as in the rows above it,
    # and SLOWER where the two counts timed interleaved (each row's interleaved_ms) say so.
    scaling = text.out.split("Scaling: ")[1].split("\n\n")[0].splitlines()[3:]
    cases = {(r["op"], r["case"]) for r in rows if r["status"] == "ok"}
    assert len(scaling) == len(cases)
    assert all(r["interleaved_ms"] > 0 for r in rows if r["status"] == "ok")
    by_key = {(r["op"], r["case"][:28], r["threads"]): r for r in rows}
    for line in scaling:
        op = line.split()[0]
        case = line[12:40].strip()
        times = [float(v) for v in line.split("|")[1].split()]
        assert times == [round(by_key[(op, case, t)]["ms"]["dmlops"], 3) for t in (1, 2)], line
        slower = by_key[(op, case, 2)]["interleaved_ms"] > 1.1 * by_key[(op, case, 1)]["interleaved_ms"]
        assert line.rstrip().endswith("SLOWER at 2" if slower else "| ok"), line
        # "vs peer": the faster peer's time over dmlops' in each count's row (the smaller ratio).
        ratios = line.split("|")[3].split()
        for t, ratio in zip((1, 2), ratios):
            peer = [v for k, v in by_key[(op, case, t)]["speedup"].items() if k in ("torch", "onnxruntime")]
            assert ratio == (f"{min(peer):.2f}x" if peer else "-"), line


def test_smoke_report_without_the_optional_libraries(tmp_path, capsys, monkeypatch):
    for module in OPTIONAL:  # an import of a module mapped to None raises ImportError
        monkeypatch.setitem(sys.modules, module, None)
    out_json, out_png = tmp_path / "report.json", tmp_path / "report.png"
    code = bench.main(["--smoke", "--threads", "2", "--no-progress", "--json", str(out_json), "--plot", str(out_png)])
    text = capsys.readouterr().out
    assert code == 0, text
    for peer in ("torch", "onnxruntime"):
        assert sum(line.startswith(f"{peer}: skipped") for line in text.splitlines()) == 1
    assert f"matplotlib is not installed: {out_png} not drawn" in text and not out_png.exists()
    assert "Scaling:" not in text  # one thread count
    data = json.loads(out_json.read_text())
    check_report_json(data, [2])
    assert all(set(r["ms"]) | {"numpy"} == {"dmlops", "numpy"} for r in data["results"])


def test_a_wrong_dmlops_result_marks_the_case_failed(monkeypatch, capsys):
    real_pad = dmlops.pad

    def off_by_one(x, start, end, *args, **kwargs):
        y = real_pad(x, start, end, *args, **kwargs)
        if kwargs.get("out") is None:
            y.flat[-1] += 1
        return y

    monkeypatch.setattr(dmlops, "pad", off_by_one)
    assert bench.main(["--smoke", "--op", "pad", "--threads", "1", "--no-progress", "--peers", "numpy"]) == 1
    captured = capsys.readouterr()
    assert "FAILED pad" in captured.err and "dmlops differs from numpy" in captured.err
    assert "FAILED: 2 case(s)" in captured.out
    report = bench.run(["padding"], [1], smoke=True, peers=("numpy",), progress=False, stream=False)
    assert len(report.failures) == 2 and all(not c["ok"] for r in report.failures for c in r["checks"])


def test_a_prepared_call_that_differs_marks_the_case_failed(monkeypatch, capsys):
    real_prepare = dmlops.ConvolutionDesc.prepare

    def wrong(self, w, *args, **kwargs):
        run = real_prepare(self, w, *args, **kwargs)
        return lambda x, out=None: run(x) + 1

    monkeypatch.setattr(dmlops.ConvolutionDesc, "prepare", wrong)
    report = bench.run(["convolution"], [1], smoke=True, peers=("numpy",), progress=False, stream=False)
    assert report.failures and all("prepared call differs" in r["error"] for r in report.failures)


def test_tiers_and_operator_filter():
    for tier in ("quick", "smoke"):
        assert {c.family for c in _report.select(tier)} == FAMILIES
    assert {c.op for c in _report.select("full", ["unfold"])} == {"unfold", "fold"}
    assert {c.family for c in _report.select("quick", ["upsample_2d", "pad"])} == {"resample", "padding"}
    # Every case has a name of its own within its operator.
    names = [(c.op, c.name) for c in _report.all_cases()]
    assert len(names) == len(set(names))
    with pytest.raises(ValueError, match="unknown operator nope"):
        _report.select("quick", ["nope"])
    with pytest.raises(SystemExit):
        bench.main(["--op", "nope"])
    with pytest.raises(SystemExit):
        bench.main(["--threads", "0"])


def test_list_prints_the_selected_cases(capsys):
    assert bench.main(["--quick", "--list", "--op", "convolution"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(_report.select("quick", ["convolution"])) and "resnet 3x3 64@56" in lines[0]


def test_tolerances():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert EXACT.mismatch(a, a.copy()) is None
    assert "1 elements differ" in EXACT.mismatch(a, a + (a == 5))
    assert "dtype" in EXACT.mismatch(a, a.astype(np.float64))
    assert "shape" in EXACT.mismatch(a, a.T)
    close = Tolerance(atol=1e-3)
    assert close.mismatch(a, a + 5e-3) is None  # 1e-3 x max|a| = 0.011
    assert "exceeds" in close.mismatch(a, a + 0.02)
    border = Tolerance(atol=1e-6, border=1)
    b = a.copy()
    b[0, 0] = 100  # outside the compared interior
    assert border.mismatch(a, b) is None
    b[1, 1] = 100
    assert border.mismatch(a, b) is not None


def test_fma_peak_and_isa():
    assert dmlops._core.fma_isa() in ("avx512", "avx2", "sse2", "neon", "portable")
    assert dmlops._core.fma_peak_gflops(1, 5.0) > 0
    with pytest.raises(ValueError, match="threads is 0"):
        dmlops._core.fma_peak_gflops(0, 5.0)


def test_progress_writes_lines_to_a_log_and_a_bar_to_a_terminal():
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, terminal = io.StringIO(), Terminal()
    for stream in (log, terminal):
        bar = _report.Progress(2, True, stream)
        bar.tick("first case")
        bar.tick("second case")
        bar.close()
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines()[0].startswith("0/2 ") and log.getvalue().splitlines()[0].endswith(" first case")
    assert [line.split()[0] for line in log.getvalue().splitlines()] == ["0/2", "1/2", "2/2"]
    assert terminal.getvalue().count("\r") == 3 and terminal.getvalue().endswith("\n")
    assert "[" + "#" * 30 + "] 2/2" in terminal.getvalue()
    silent = io.StringIO()
    quiet = _report.Progress(2, False, silent)
    quiet.tick("case")
    quiet.close()
    assert silent.getvalue() == ""


def test_sharing_report_runs_every_scenario(capsys):
    from dmlops.bench import sharing

    rows = sharing.run(threads=2, calls=2, rounds=2)
    text = capsys.readouterr().out
    assert [r["case"] for r in rows] == list(sharing.cases())
    for r in rows:
        assert r["alone"] > 0 and r["busy process"] > 0 and r["rounds"] == 2
        assert ("after torch" in r) == ("after 1-thread torch" in r) == installed("torch")
        scenarios = [k for k in sharing.SCENARIOS if k in r]
        assert sorted(r["ratios"]) == sorted(scenarios + (["after torch / after 1-thread torch"] if "after torch" in r else []))
        assert r["ratios"]["alone"] == 1.0 and all(v > 0 for v in r["ratios"].values())
        assert r["case"] in text


def test_scaling_limit_measures_every_count(capsys):
    from dmlops.bench import scaling_limit

    rows = scaling_limit.run([1, 2, 3], rounds=2, batch=2, channels=8, size=6, seconds=0.002)
    text = capsys.readouterr().out
    assert [r["threads"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["fma_gflops"] > 0 and r["independent_gflops"] > 0 and r["one_call_ms"] > 0
        assert r["one_call_gflops"] == pytest.approx(2 * 2 * 8 * 8 * 9 * 36 / r["one_call_ms"] / 1e6)
        assert f"{r['one_call_ms']:12.3f}" in text
    assert rows[0]["fma_speedup"] == rows[0]["independent_speedup"] == rows[0]["one_call_speedup"] == 1.0
    assert rows[2]["one_call_speedup"] == pytest.approx(rows[0]["one_call_ms"] / rows[2]["one_call_ms"])


@pytest.mark.parametrize("kwargs, field", [
    ({"threads": []}, "threads"), ({"threads": [0]}, "threads"), ({"threads": [1025]}, "threads"),
    ({"rounds": 0}, "rounds"), ({"batch": 0}, "batch"), ({"channels": -1}, "channels"), ({"size": 0}, "size"),
    ({"seconds": 0}, "seconds"), ({"seconds": float("nan")}, "seconds"), ({"channels": 10**5}, "bytes"),
])
def test_scaling_limit_refuses_bad_arguments(kwargs, field):
    from dmlops.bench import scaling_limit

    args = {"threads": [1], **kwargs}
    with pytest.raises(ValueError, match=field):
        scaling_limit.run(args.pop("threads"), out=None, **args)


needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                    reason="pinning a thread needs os.sched_setaffinity (Linux)")


@needs_affinity
def test_scaling_limit_times_each_cpu_pinned(capsys):
    from dmlops.bench import scaling_limit

    before = os.sched_getaffinity(0)
    cpus = sorted(before)
    rows = scaling_limit.per_cpu(rounds=2, channels=8, size=6, seconds=0.002)
    text = capsys.readouterr().out
    assert os.sched_getaffinity(0) == before  # only the measuring threads were pinned
    assert [r["cpu"] for r in rows] == cpus
    for r in rows:
        assert r["fma_gflops"] > 0 and 0 < r["kernel_share"] <= 1
        assert r["kernel_share"] == pytest.approx(r["kernel_gflops"] / max(q["kernel_gflops"] for q in rows))
        assert f"{r['kernel_gflops']:11.0f}" in text
    assert max(r["kernel_share"] for r in rows) == 1.0
    assert f"together are worth {sum(r['kernel_share'] for r in rows):.2f} of the fastest" in text
    # One CPU: the measurement ran there (a pinned thread that reads its own affinity).
    seen = scaling_limit._pinned(cpus[-1], lambda: os.sched_getaffinity(0))
    assert seen == {cpus[-1]}
    assert [r["cpu"] for r in scaling_limit.per_cpu(1, 8, 6, 0.002, cpus=[cpus[0]], out=None)] == [cpus[0]]


@needs_affinity
def test_scaling_limit_pinning_that_fails_is_a_value_error(monkeypatch):
    from dmlops.bench import scaling_limit

    def refuse(pid, cpus):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    with pytest.raises(ValueError, match="cannot pin a thread to CPU 0"):
        scaling_limit._pinned(0, lambda: None)


@needs_affinity
@pytest.mark.parametrize("kwargs, field", [
    ({"cpus": []}, "cpus"), ({"cpus": [-1]}, "cpus"), ({"cpus": [10**6]}, "cpus"), ({"rounds": 0}, "rounds"),
    ({"channels": 0}, "channels"), ({"size": -3}, "size"), ({"seconds": 0}, "seconds"),
    ({"seconds": float("inf")}, "seconds"), ({"channels": 10**5}, "bytes"),
])
def test_scaling_limit_per_cpu_refuses_bad_arguments(kwargs, field):
    from dmlops.bench import scaling_limit

    with pytest.raises(ValueError, match=field):
        scaling_limit.per_cpu(out=None, **kwargs)


@needs_affinity
def test_scaling_limit_command_line_per_cpu(capsys):
    from dmlops.bench import scaling_limit

    assert scaling_limit.main(["--per-cpu", "--threads", "1", "--rounds", "1", "--batch", "1", "--channels", "4",
                               "--size", "5"]) == 0
    text = capsys.readouterr().out
    assert "pinned to each CPU" in text and "of the fastest one" in text and "independent calls" in text


def test_scaling_judges_more_threads_on_the_interleaved_timing():
    """The table's times are the rows'; "SLOWER" is judged on the counts timed interleaved, which
    share the machine's drift, and on the rows only when a run has no interleaved timing."""
    def row(threads: int, ms: float, interleaved) -> dict:
        return {"op": "pad", "case": "c", "threads": threads, "status": "ok", "ms": {"dmlops": ms, "torch": 2 * ms},
                "speedup": {"torch": 2.0}, "interleaved_ms": interleaved}

    def judged(rows: list) -> dict:
        report = _report.Report({"threads": [1, 2]}, {}, rows)
        (line,) = report.scaling()
        return line

    # The rows say 2 threads took 1.5x as long (drift); interleaved, they took 0.6x.
    drifted = judged([row(1, 1.0, 1.0), row(2, 1.5, 0.6)])
    assert drifted["ms"] == [1.0, 1.5] and drifted["slower_at"] == [] and drifted["vs_best_peer"] == [2.0, 2.0]
    # Interleaved, 2 threads took 1.2x as long: slower, whatever the rows say.
    assert judged([row(1, 1.0, 1.0), row(2, 0.6, 1.2)])["slower_at"] == [2]
    # No interleaved timing (a count failed in it): the rows judge.
    assert judged([row(1, 1.0, None), row(2, 1.5, None)])["slower_at"] == [2]
    assert "SLOWER at 2" in _report.Report({"threads": [1, 2]}, {}, [row(1, 1.0, 1.0), row(2, 0.6, 1.2)]).scaling_text()


def test_goals_are_judged_at_the_thread_counts_they_name():
    """A bare goal at every count, "@N" at N threads only, "@max" at the run's largest count; "faster
    peer" is the smaller of torch's and ONNX Runtime's speed-ups, n/a without either."""
    from dmlops.bench._case import Case

    case = Case("convolution", "convolution", "c", (1,), "float32", "", "fma", None,
                goals={"copy": 0.8, "faster peer@1": 1.0, "torch@max": 1.2})

    def row(threads: int, speedup: dict) -> dict:
        return {"op": "convolution", "case": "c", "threads": threads, "speedup": speedup,
                "same_bytes_copy": {"fraction": 0.9, "fresh_fraction": 0.7}, "fraction_of_limit": 0.5}

    rows = [row(1, {"torch": 1.3, "onnxruntime": 0.95}), row(4, {"torch": 1.1}), row(16, {"numpy": 3.0})]
    # Like for like: ONNX Runtime against the prepared call where the case has one.
    assert _report.faster_peer({**rows[0], "prepared": {"ms": 1.0, "speedup": {"onnxruntime": 1.02}}}) == 1.02
    assert _report.faster_peer({**rows[0], "prepared": {"ms": 1.0, "speedup": {"onnxruntime": 1.5}}}) == 1.3
    verdicts = {(v["threads"], v["metric"]): (round(v["value"], 3) if v["value"] is not None else None, v["met"])
                for v in _report.judge_targets([case], rows, [1, 4, 16])}
    assert verdicts == {
        (1, "copy"): (0.9, True), (4, "copy"): (0.9, True), (16, "copy"): (0.9, True),
        (1, "faster peer"): (0.95, False),
        (16, "torch"): (None, None),                 # @max: the largest count only, torch absent there
        (16, "faster peer"): (None, None),           # EVERY_CASE_GOALS' "faster peer@16", no peer there
    }
    text = _report.Report({"threads": [1, 4, 16]}, {}, rows, targets=_report.judge_targets([case], rows, [1, 4, 16]))
    assert "vs faster peer (like for like)" in text.targets_text() and "NOT MET" in text.targets_text()
