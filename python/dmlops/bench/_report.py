"""The report: runs the selected cases, checks every peer against dmlops, times them, and prints,
saves and plots the results. See dmlops.bench for the command line."""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Optional, TextIO

import numpy as np

import dmlops
from dmlops import _core

from . import convolution, lp_pooling, padding, resample, unfold
from ._case import EVERY_CASE_GOALS, PEERS, Case, Peer, Peers
from ._harness import (BLOCK_WARMUP_S, SEED, Copier, cpu_model, load_average, load_gauge_start, median_ms, other_load,
                       time_calls, usable_cpus)
from ._machine import best, limit_value, measure

# Prefix of the names the same-bytes copies (Setup.same_bytes) are timed under, apart from the peers'.
SAME_BYTES = " copy "
# The name dmlops' prepared call (Setup.prepared) is timed under.
PREPARED = "dmlops prepared"

FAMILIES = {"padding": padding, "convolution": convolution, "lp_pooling": lp_pooling, "unfold": unfold,
            "resample": resample}

# Per tier: timed calls at most, seconds of timed calls per implementation, warm-up calls and
# seconds, copy-limit buffer size and FMA-loop milliseconds.
SETTINGS = {
    "full": dict(repeat=30, budget=1.0, warmup=5, block_warmup=BLOCK_WARMUP_S, copy_bytes=256 << 20, fma_ms=200.0),
    "quick": dict(repeat=7, budget=0.2, warmup=2, block_warmup=BLOCK_WARMUP_S, copy_bytes=256 << 20, fma_ms=100.0),
    "smoke": dict(repeat=3, budget=0.002, warmup=1, block_warmup=0.0, copy_bytes=8 << 20, fma_ms=10.0),
}
LIMIT_TEXT = {"copy": "copy", "fma": "FMA"}


def all_cases() -> list:
    return [c for module in FAMILIES.values() for c in module.cases()]


def select(tier: str, ops: Optional[list] = None) -> list:
    """The cases of a tier, optionally only those whose family or operator is in `ops`."""
    chosen = [c for c in all_cases() if tier in c.tiers]
    if ops:
        names = {c.family for c in all_cases()} | {c.op for c in all_cases()}
        unknown = sorted(set(ops) - names)
        if unknown:
            raise ValueError(f"dmlops.bench: unknown operator {', '.join(unknown)}; choose from {', '.join(sorted(names))}")
        chosen = [c for c in chosen if c.family in ops or c.op in ops]
    return chosen


class Progress:
    """A one-line progress bar on stderr (no dependency): [#####.....] 12/40 label. When the
    stream is not a terminal (a log file, CI), one plain line per step instead of carriage
    returns."""

    def __init__(self, total: int, enabled: bool, stream: Optional[TextIO] = None):
        self.total, self.done, self.enabled = max(total, 1), 0, enabled
        self.stream = stream or sys.stderr
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()

    def _write(self, bar: str, label: str) -> None:
        elapsed = time.perf_counter() - self.started
        if self.terminal:
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {elapsed:5.1f}s {label[:70]:<70}")
        else:
            self.stream.write(f"{self.done}/{self.total} {elapsed:5.1f}s {label}\n")
        self.stream.flush()

    def tick(self, label: str) -> None:
        if self.enabled:
            filled = 30 * self.done // self.total
            self._write("#" * filled + "." * (30 - filled), label)
        self.done += 1

    def close(self) -> None:
        if self.enabled:
            self.done = self.total
            self._write("#" * 30, "done")
            if self.terminal:
                self.stream.write("\n")
                self.stream.flush()


def prep_text(row: dict) -> str:
    """ONNX Runtime's time over dmlops' prepared call's, where both were timed."""
    ratio = row.get("prepared", {}).get("speedup", {}).get("onnxruntime")
    return "-" if ratio is None else f"{ratio:.2f}x"


def shape_text(shape: tuple) -> str:
    return "x".join(map(str, shape))


def fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _caches(caches: Optional[dict]) -> str:
    """L1d/L2/L3 as "48K/2M/32M (cpuid)": the sizes the kernels' tiles were derived from."""
    if not caches:
        return "-"
    def size(n: int) -> str:
        return f"{n >> 20}M" if n % (1 << 20) == 0 else f"{n >> 10}K"
    return f"{size(caches['l1d'])}/{size(caches['l2'])}/{size(caches['l3'])} ({caches['source']})"

@dataclass
class Report:
    """Everything one run measured: environment, machine limits, one row per case and thread
    count, the operator issues' goals judged, and how busy other processes kept the machine."""

    environment: dict
    limits: dict
    rows: list = field(default_factory=list)
    targets: list = field(default_factory=list)

    @property
    def failures(self) -> list:
        return [r for r in self.rows if r["status"] != "ok"]

    @property
    def peers(self) -> list:
        """The peer columns that have at least one figure, in PEERS order."""
        return [p for p in PEERS if any(p in r["ms"] for r in self.rows)]

    def to_dict(self) -> dict:
        limits = {**self.limits, "copy": {str(k): v for k, v in self.limits["copy"].items()},
                  "fma": {str(k): v for k, v in self.limits["fma"].items()}}
        return {"environment": self.environment, "limits": limits, "results": self.rows, "targets": self.targets}

    def save_json(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    def header(self) -> str:
        env, lim = self.environment, self.limits
        versions = "   ".join(f"{k} {v or '-'}" for k, v in env["versions"].items())
        lines = [
            f"dmlops benchmark report ({env['tier']} run, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(env['started']))})",
            f"CPU: {env['cpu']}; {env['usable_cpus']} usable of {env['logical_cpus']} logical CPUs; kernels' ISA "
            f"{lim['isa']}; caches {_caches(env.get('caches'))}; threads {','.join(map(str, env['threads']))}",
            versions,
            f"seeds: inputs {SEED}, filters {SEED + 1}; median of up to {env['repeat']} timed calls per figure "
            f"(or {env['budget']:g} s of them, at least {min(5, env['repeat'])}) after >= {env['warmup']} warm-up calls",
            "limits (best of start and end of this run): "
            + "; ".join(f"{t} thr: copy {lim['copy'][t]['GBps']:.1f} GB/s ({lim['copy'][t]['method']}, "
                        f"{lim['copy'][t]['bytes'] >> 20} MiB), FMA {lim['fma'][t]['GFLOPs']:.0f} GFLOP/s"
                        for t in env["threads"]),
        ]
        lines += [f"{peer}: skipped - {why}" for peer, why in env["skipped_peers"].items()]
        return "\n".join(lines)

    def table(self) -> str:
        peers = self.peers
        short = {"numpy": "numpy", "torch": "torch", "onnxruntime": "ort"}
        wide = max([28] + [len(r["case"]) for r in self.rows])  # case names are never cut
        prepared = "onnxruntime" in peers and any("prepared" in r for r in self.rows)
        head = (f"{'op':<11} {'case':<{wide}} {'shape':<18} {'dtype':<7} {'thr':>3} | {'dmlops':>8} "
                + "".join(f"{short[p]:>8} " for p in peers) + "| "
                + "".join(f"{short[p] + '/dml':>9} " for p in peers) + (f"{'ort/prep':>9} " if prepared else "")
                + f"| {'of limit':>9} | {'of copy':>9} | check")
        lines = [head, "-" * len(head)]
        for r in self.rows:
            ms = r["ms"]
            limit = "-" if r["fraction_of_limit"] is None else f"{100 * r['fraction_of_limit']:.0f}% {LIMIT_TEXT[r['limit']]}"
            copy = r["same_bytes_copy"]
            of_copy = "-" if copy is None else f"{100 * copy['fraction']:.0f}/{100 * copy['fresh_fraction']:.0f}%"
            lines.append(
                f"{r['op']:<11} {r['case']:<{wide}} {shape_text(r['shape'])[:18]:<18} {r['dtype']:<7} {r['threads']:>3} | "
                f"{fmt(ms.get('dmlops'), '8.3f'):>8} " + "".join(f"{fmt(ms.get(p), '8.3f'):>8} " for p in peers) + "| "
                + "".join(f"{fmt(r['speedup'].get(p), '8.2f') + 'x' if p in r['speedup'] else '-':>9} " for p in peers)
                + (f"{prep_text(r):>9} " if prepared else "") + f"| {limit:>9} | {of_copy:>9} | {'ok' if r['status'] == 'ok' else 'FAILED'}")
        return "\n".join(lines)

    def notes(self) -> str:
        lines = [
            "ms: median wall time per call, every implementation allocating its output; peer/dml: peer time over dmlops "
            "time (above 1x: dmlops is faster).",
            "of limit: copy = (bytes read + written) per second over the copy bandwidth measured above (data movement, "
            "and lp pooling and linear resampling,\n  whose few operations per byte leave them memory-bound; above 100% "
            "means the case fits in cache); FMA = FLOP/s over the FMA peak (convolution).",
            "ort/prep: ONNX Runtime's time over dmlops' call with its filter prepared once (ConvolutionDesc.prepare), "
            "as ONNX Runtime's session prepacks its constant weights (torch and dmlops' plain call pack on every call).",
            "of copy: data movement's speed as a share of a plain copy of its output's bytes, into an existing buffer / "
            "into a new array; each copy is the faster of np.copyto on as many Python threads and dmlops.pad without "
            "padding on dmlops' pool\n  (see the goals below).",
            "check: every peer's result was compared with dmlops' before timing (bit-exact for data movement, float "
            "tolerance for arithmetic; see the JSON).",
            "numpy: its BLAS on " + (f"{self.environment['openblas_threads']} thread(s) (OPENBLAS_NUM_THREADS; "
                                     "python -m dmlops.bench sets 1, since OpenBLAS' idle threads busy-wait "
                                     "after each call and would slow whatever runs next)"
                                     if self.environment.get("openblas_threads") else
                                     "its default threads: OpenBLAS' idle threads busy-wait after each call and can "
                                     "slow the multithreaded columns; set OPENBLAS_NUM_THREADS=1 before importing numpy"),
            "torch: its OpenMP workers spin " + (f"GOMP_SPINCOUNT={self.environment['gomp_spincount']} rounds before "
                                                 "they sleep (python -m dmlops.bench sets 20000: a short poll like "
                                                 "dmlops' own)" if self.environment.get("gomp_spincount") else
                                                 "libgomp's default 300,000 rounds after each call, which can slow "
                                                 "the next column; set GOMP_SPINCOUNT=20000 before importing torch"),
        ]
        seen: set = set()
        for r in self.rows:
            for peer, why in r["skipped"].items():
                key = (r["op"], r["case"], peer, why)
                if key not in seen and peer not in self.environment["skipped_peers"]:
                    seen.add(key)
                    lines.append(f"  {r['op']} {r['case']}: {peer} n/a - {why}")
            if r.get("note") and (r["op"], r["case"], "note") not in seen:
                seen.add((r["op"], r["case"], "note"))
                lines.append(f"  {r['op']} {r['case']}: {r['note']}")
        busy = self.environment.get("other_processes_cpus")
        lines.append(f"load average {self.environment['load_average_start']} at the start, "
                     f"{self.environment.get('load_average_end', 'n/a')} at the end; other processes kept "
                     f"{fmt(busy, '.2f')} of {self.environment['logical_cpus']} CPUs busy on average"
                     + (" - figures disturbed, rerun on a quiet machine" if busy is not None and busy > 0.1 else ""))
        return "\n".join(lines)

    def targets_text(self) -> str:
        if not self.targets:
            return ""
        lines = ["Goals of the operator issues (thr: the thread count judged):"]
        for v in self.targets:
            what = {"limit": "of limit", "copy": "of same-bytes copy", "fresh copy": "of allocating copy",
                    "faster peer": "vs faster peer (like for like)"}.get(v["metric"], f"speed-up vs {v['metric']}")
            fraction = v["metric"] in ("limit", "copy", "fresh copy")
            value = ("n/a" if v["value"] is None else f"{100 * v['value']:.0f}%" if fraction else f"{v['value']:.2f}x")
            goal = f"{100 * v['goal']:.0f}%" if fraction else f"{v['goal']:.1f}x"
            met = "n/a" if v["met"] is None else ("met" if v["met"] else "NOT MET")
            lines.append(f"  {v['op']:<11} {v['case']:<28} {v['threads']:>3} thr  {what:<30} {value:>7} >= {goal:<5} {met}")
        if any(v["metric"] in ("copy", "fresh copy") for v in self.targets):
            lines.append("  (of same-bytes copy: the time of a plain copy of an output-sized buffer into an existing one, the "
                         "faster of np.copyto on as many Python threads and dmlops.pad without padding, timed interleaved "
                         "with the case, over dmlops' time;\n  of allocating copy: the same two copies into a new array "
                         "(np.empty + np.copyto, dmlops.pad without out=), the faster over dmlops' time: like dmlops' call, "
                         "it pays for the OS zeroing fresh pages when the output is too large for the allocator to reuse)")
        return "\n".join(lines)

    def failures_text(self) -> str:
        if not self.failures:
            return "All correctness checks passed."
        lines = [f"FAILED: {len(self.failures)} case(s) - dmlops disagrees with a peer or raised:"]
        lines += [f"  {r['op']} {r['case']} threads={r['threads']}: {r['error']}" for r in self.failures]
        return "\n".join(lines)

    def scaling(self) -> list:
        """Per case: dmlops' time at each thread count (its rows'), its speed-up over the
        smallest count, the faster peer's speed-up over dmlops in each count's row, and the counts
        slower than the one before them (beyond 10% noise), judged on the counts' interleaved
        timing where the run has one (see time_thread_counts). Empty for a run of one thread
        count."""
        counts = sorted(set(self.environment["threads"]))
        if len(counts) < 2:
            return []
        cases: dict = {}
        for r in self.rows:
            if r["status"] == "ok":
                cases.setdefault((r["op"], r["case"]), {})[r["threads"]] = r
        result = []
        for (op, case), by_threads in cases.items():
            if not all(t in by_threads for t in counts):
                continue
            ms = [by_threads[t]["ms"]["dmlops"] for t in counts]
            # The faster peer's: the smaller of the peers' times over dmlops'.
            vs_peer = [faster_peer(by_threads[t], like_for_like=False) for t in counts]
            interleaved = all(by_threads[t].get("interleaved_ms") for t in counts)
            judged = [by_threads[t]["interleaved_ms"] for t in counts] if interleaved else ms
            slower = [counts[i + 1] for i in range(len(counts) - 1) if judged[i + 1] > 1.1 * judged[i]]
            result.append({"op": op, "case": case, "threads": counts, "ms": ms, "speedup": [ms[0] / m for m in ms],
                           "vs_best_peer": vs_peer, "interleaved_ms": judged if interleaved else None,
                           "slower_at": slower})
        return result

    def scaling_text(self) -> str:
        rows = self.scaling()
        if not rows:
            return ""
        counts = rows[0]["threads"]
        head = (f"{'op':<11} {'case':<28} | " + "".join(f"{'t' + str(t) + ' ms':>9} " for t in counts) + "| "
                + "".join(f"{'x t' + str(t):>7} " for t in counts[1:]) + "| "
                + "".join(f"{'vs peer' + str(t):>10} " for t in counts) + "| more threads")
        lines = [f"Scaling: dmlops' median time per thread count, its speed-up over {counts[0]} thread(s), the faster "
                 "of torch and ONNX Runtime over dmlops at each count (above 1x: dmlops is faster), and whether more "
                 "threads took over 10% longer, judged on the counts timed interleaved (their times in the JSON)", head,
                 "-" * len(head)]
        for r in rows:
            ratios = [fmt(v, "9.2f") + "x" if v is not None else "-" for v in r["vs_best_peer"]]
            lines.append(f"{r['op']:<11} {r['case'][:28]:<28} | " + "".join(f"{m:9.3f} " for m in r["ms"]) + "| "
                         + "".join(f"{x:6.2f}x " for x in r["speedup"][1:]) + "| "
                         + "".join(f"{q:>10} " for q in ratios) + "| "
                         + ("ok" if not r["slower_at"] else "SLOWER at " + ",".join(map(str, r["slower_at"]))))
        return "\n".join(lines)

    def plot_scaling(self, path: Optional[str] = None):
        """Speed (calls per second) against threads, one panel per case: dmlops and each peer, with
        dmlops' ideal linear scaling dotted. Needs matplotlib and a run of several thread counts.
        Saved to `path`; returns the figure."""
        from matplotlib.figure import Figure

        rows = self.scaling()
        if not rows:
            raise ValueError("dmlops.bench: a scaling plot needs a run of at least two thread counts")
        columns = min(5, len(rows))
        lines = -(-len(rows) // columns)
        fig = Figure(figsize=(3.2 * columns, 2.6 * lines), layout="constrained")
        for i, r in enumerate(rows):
            ax = fig.add_subplot(lines, columns, i + 1)
            counts = r["threads"]
            for name in ["dmlops"] + [p for p in self.peers if p != "dmlops"]:
                found = [row for row in self.rows if (row["op"], row["case"]) == (r["op"], r["case"])
                         and name in row["ms"]]
                found.sort(key=lambda row: row["threads"])
                if found:
                    ax.plot([row["threads"] for row in found], [1e3 / row["ms"][name] for row in found], marker="o",
                            markersize=3, linewidth=2 if name == "dmlops" else 1, label=name)
            ax.plot(counts, [1e3 / r["ms"][0] * t / counts[0] for t in counts], ":", color="gray", label="linear")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(counts, [str(t) for t in counts])
            ax.set_title(f"{r['op']} {r['case']}", fontsize=8)
            ax.tick_params(labelsize=7)
            if i % columns == 0:
                ax.set_ylabel("calls / s", fontsize=8)
            if i == 0:
                ax.legend(fontsize=6)
        fig.suptitle(f"speed against threads ({self.environment['cpu']}, {self.environment['tier']} run)", fontsize=9)
        if path:
            fig.savefig(path, dpi=110)
        return fig

    def text(self) -> str:
        parts = [self.header(), "", self.table(), self.notes()]
        if self.scaling():
            parts += ["", self.scaling_text()]
        if self.targets:
            parts += ["", self.targets_text()]
        parts += ["", self.failures_text()]
        return "\n".join(parts)

    def plot(self, path: Optional[str] = None, ax=None):
        """A bar chart of the speed-ups (peer time / dmlops time, log scale) per case and thread
        count; saved to `path` or drawn into `ax`. Needs matplotlib. Returns the figure."""
        from matplotlib.figure import Figure

        rows = [r for r in self.rows if r["speedup"]]
        peers = [p for p in self.peers if p != "dmlops"]
        if ax is None:
            fig = Figure(figsize=(min(18.0, max(6.0, 0.2 * len(rows) * max(1, len(peers)) + 2)), 5.0),
                         layout="constrained")
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        x = np.arange(len(rows))
        width = 0.8 / max(1, len(peers))
        for i, peer in enumerate(peers):
            values = [r["speedup"].get(peer, np.nan) for r in rows]
            ax.bar(x + (i - (len(peers) - 1) / 2) * width, values, width, label=f"vs {peer}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("dmlops speed-up (peer time / dmlops time)", fontsize=8)
        ax.set_xticks(x, [f"{r['op']} {r['case']} t{r['threads']}" for r in rows], rotation=70, ha="right",
                      fontsize=7)
        ax.set_title(f"dmlops speed-ups ({self.environment['cpu']}, {self.environment['tier']} run)", fontsize=9)
        ax.legend(fontsize=8)
        if path:
            fig.savefig(path, dpi=120)
        return fig


def run_case(case: Case, threads: int, peers: Peers, settings: dict, announce) -> dict:
    dmlops.set_num_threads(threads)
    peers.set_threads(threads)
    row: dict = {"op": case.op, "family": case.family, "case": case.name, "shape": list(case.shape), "dtype": case.dtype,
           "detail": case.detail, "threads": threads, "limit": case.limit,
           "work_unit": "bytes" if case.limit == "copy" else "FLOP", "work": None, "ms": {}, "timed_calls": {},
           "speedup": {}, "achieved_per_s": None, "limit_per_s": None, "fraction_of_limit": None, "same_bytes_copy": None,
           "checks": [], "skipped": {}, "status": "ok", "error": None,
           "note": case.note or None}
    try:
        setup = case.setup(peers, threads)
        ours = setup.dmlops()
    except Exception as e:  # a crash in dmlops is a result to report, not a reason to stop the run
        row.update(status="FAILED", error=f"dmlops raised {e.__class__.__name__}: {e}")
        announce(row, row["error"])
        return row
    row["work"] = setup.work
    fns = {"dmlops": setup.dmlops}
    if setup.prepared is not None:
        if np.array_equal(setup.prepared(), ours):
            fns[PREPARED] = setup.prepared
        else:
            row.update(status="FAILED", error="dmlops' prepared call differs from its plain call")
            announce(row, row["error"])
    for name in PEERS:
        peer = setup.peers.get(name, peers.skipped.get(name, f"no {name} formulation"))
        if not isinstance(peer, Peer):
            row["skipped"][name] = peer
            continue
        try:
            error = peer.tolerance.mismatch(ours, peer.call())
        except Exception as e:  # the peer failed where its trial call succeeded
            row["skipped"][name] = f"{name} raised {e.__class__.__name__}: {str(e).splitlines()[0][:80]}"
            continue
        row["checks"].append({"peer": name, "tolerance": str(peer.tolerance), "ok": error is None, "error": error})
        if error is None:
            fns[name] = peer.call
        else:
            mismatch = f"dmlops differs from {name}: {error}"
            row.update(status="FAILED", error=mismatch if row["error"] is None else f"{row['error']}; {mismatch}")
            announce(row, mismatch)
    copier = Copier(setup.same_bytes, threads) if setup.same_bytes else None
    if copier is not None:  # the faster of two plain copies, interleaved with the others
        fns.update({SAME_BYTES + name: fn for name, fn in copier.calls().items()})
    try:
        ms = median_ms(time_calls(fns, settings["warmup"], settings["repeat"], settings["budget"],
                                  settings["block_warmup"]))
    finally:
        if copier is not None:
            copier.close()
    copies = {key.removeprefix(SAME_BYTES): ms.pop(key) for key in list(ms) if key.startswith(SAME_BYTES)}
    if copies:
        method = min(Copier.INTO, key=lambda name: copies[name])
        fresh_method = min(Copier.FRESH, key=lambda name: copies[name])
        row["same_bytes_copy"] = {"bytes": setup.same_bytes, "ms": copies, "method": method,
                                  "fresh_method": fresh_method, "fraction": copies[method] / ms["dmlops"],
                                  "fresh_fraction": copies[fresh_method] / ms["dmlops"]}
    prepared_ms = ms.pop(PREPARED, None)
    if prepared_ms is not None:
        row["prepared"] = {"ms": prepared_ms, "speedup": {k: ms[k] / prepared_ms for k in ("onnxruntime",) if k in ms}}
    row["ms"] = ms
    row["speedup"] = {k: v / ms["dmlops"] for k, v in ms.items() if k != "dmlops"}
    row["achieved_per_s"] = setup.work / (ms["dmlops"] * 1e-3)
    return row


def time_thread_counts(case: Case, threads: list, peers: Peers, settings: dict) -> dict:
    """dmlops' median ms at each thread count, timed interleaved: the counts take turns in
    rounds of blocks of calls, as the implementations of one row do. Timed one count after the
    other, a machine whose speed drifts (a virtual machine beside other tenants: 10-20% over
    seconds) made a count look slower than the one before it; timed so, they share the drift.
    They judge "more threads" only; the table's times stay the rows', beside which the peers
    were timed (on the 16-core Xeon the two differed by up to 2x either way at 1 thread: 3x3
    256@14 took 1.73 ms in its row and 3.67 interleaved, 3x3 512@7 4.55 and 2.32). Empty when
    the case cannot run (its rows say why)."""
    try:
        call = case.setup(peers, max(threads)).dmlops
        call()
    except Exception:
        return {}

    def at(t: int):
        def run() -> None:
            dmlops.set_num_threads(t)
            call()
        return run

    return median_ms(time_calls({t: at(t) for t in threads}, settings["warmup"], settings["repeat"], settings["budget"],
                                settings["block_warmup"]))


def faster_peer(row: dict, like_for_like: bool = True) -> Optional[float]:
    """The smaller of torch's and ONNX Runtime's speed-ups over dmlops in `row`, None without
    either. like_for_like (the "faster peer" goal): torch (which packs its filter on every call)
    against dmlops' plain call, ONNX Runtime (whose session prepacks its constant weights) against
    dmlops' prepared call where the case has one; else both against the plain call (the scaling
    table)."""
    ratios = dict(row["speedup"])
    ort_prepared = row.get("prepared", {}).get("speedup", {}).get("onnxruntime") if like_for_like else None
    if ort_prepared is not None:
        ratios["onnxruntime"] = ort_prepared
    return min((v for k, v in ratios.items() if k in ("torch", "onnxruntime")), default=None)


def goal_applies(scope: str, threads: int, largest: int) -> bool:
    """Whether a goal scoped "" (every count), "max" or "N" (see Case.goals) is judged at `threads`."""
    if not scope:
        return True
    return threads == largest if scope == "max" else threads == int(scope)


def judge_targets(cases: list, rows: list, counts: list) -> list:
    """Each case's goals (Case.goals and EVERY_CASE_GOALS), judged in its rows at the thread
    counts of the run their scope names; a goal whose figure is missing (no peer) is "n/a"."""
    verdicts = []
    goals = {(c.op, c.name): {**EVERY_CASE_GOALS, **c.goals} for c in cases}
    largest = max(counts)
    for r in rows:
        if (r["op"], r["case"]) not in goals:
            continue
        for key, goal in goals[(r["op"], r["case"])].items():
            metric, _, scope = key.partition("@")
            if not goal_applies(scope, r["threads"], largest):
                continue
            if metric == "limit":
                value = r["fraction_of_limit"]
            elif metric in ("copy", "fresh copy"):
                field_name = "fraction" if metric == "copy" else "fresh_fraction"
                value = r["same_bytes_copy"][field_name] if r["same_bytes_copy"] else None
            elif metric == "faster peer":
                value = faster_peer(r)
            else:
                value = r["speedup"].get(metric)
            verdicts.append({"op": r["op"], "case": r["case"], "threads": r["threads"], "metric": metric,
                             "value": value, "goal": goal, "met": None if value is None else value >= goal})
    return verdicts


def default_threads() -> list:
    return sorted({1, usable_cpus()})


def run(ops: Optional[list] = None, threads: Optional[list] = None, quick: bool = False, smoke: bool = False,
        repeat: Optional[int] = None, peers: tuple = PEERS, progress: bool = True,
        stream: Optional[TextIO] = None) -> Report:
    """Runs the benchmark report and returns it (Report: .rows, .limits, .targets, .failures,
    .table(), .plot(), .save_json()). Prints it to `stream` (default stdout; False: silent).

    ops: operator families or functions to run (default all: padding, convolution, lp_pooling,
    unfold, resample); threads: thread counts (default 1 and the usable CPUs); quick: the issues'
    target shapes only; smoke: tiny shapes, few repeats (seconds; for tests); peers: the peer
    libraries to use, those not installed are skipped with a line saying so."""
    out = sys.stdout if stream is None else stream
    tier = "smoke" if smoke else "quick" if quick else "full"
    settings: dict = dict(SETTINGS[tier])
    if repeat is not None:
        if repeat < 1:
            raise ValueError(f"dmlops.bench: repeat is {repeat}; it must be >= 1")
        settings["repeat"] = repeat
    threads = list(threads or default_threads())
    if not threads or min(threads) < 1:
        raise ValueError(f"dmlops.bench: threads is {threads}; give positive integers, e.g. [1, 2]")
    unknown = set(peers) - set(PEERS)
    if unknown:
        raise ValueError(f"dmlops.bench: unknown peer {', '.join(sorted(unknown))}; choose from {', '.join(PEERS)}")
    cases = select(tier, ops)
    loaded = Peers(exclude=tuple(p for p in PEERS if p not in peers))
    restore_threads = dmlops.get_num_threads()
    torch_threads = loaded.torch.get_num_threads() if loaded.torch is not None else None

    env: dict = {"tier": tier, "started": time.time(), "cpu": cpu_model(), "logical_cpus": os.cpu_count(),
           "usable_cpus": usable_cpus(), "caches": _core.cache_sizes(), "python": platform.python_version(), "threads": threads,
           "versions": {"dmlops": dmlops.__version__, "numpy": loaded.versions["numpy"],
                        "torch": loaded.versions.get("torch"), "onnxruntime": loaded.versions.get("onnxruntime"),
                        "onnx": loaded.versions.get("onnx")},
           "skipped_peers": dict(loaded.skipped), "seed": SEED, **{k: settings[k] for k in ("repeat", "budget", "warmup")},
           "load_average_start": load_average(), "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
           "gomp_spincount": os.environ.get("GOMP_SPINCOUNT")}
    interleave = len(set(threads)) > 1
    bar = Progress(4 * len(threads) + len(cases) * (len(threads) + interleave), progress)

    def announce(row: dict, what: str) -> None:  # loudly, at once: a wrong answer must not wait for the table
        sys.stderr.write(f"\nFAILED {row['op']} {row['case']} threads={row['threads']}: {what}\n")

    gauge = load_gauge_start()
    def limits() -> dict:
        return measure(threads, settings["copy_bytes"], settings["fma_ms"], settings["repeat"], settings["budget"],
                       settings["block_warmup"], bar.tick)

    try:
        at_start = limits()
        report = Report(env, at_start)
        for case in cases:
            rows = []
            for t in threads:
                bar.tick(f"{case.op} {case.name} {shape_text(case.shape)} {case.dtype} threads={t}")
                rows.append(run_case(case, t, loaded, settings, announce))
            if interleave:
                bar.tick(f"{case.op} {case.name} {shape_text(case.shape)} {case.dtype} threads interleaved")
                by_count = time_thread_counts(case, sorted(set(threads)), loaded, settings)
                for row in rows:
                    row["interleaved_ms"] = by_count.get(row["threads"])
            report.rows.extend(rows)
        report.limits = best(at_start, limits())
        bar.close()
    finally:
        dmlops.set_num_threads(restore_threads)
        if torch_threads is not None:
            loaded.torch.set_num_threads(torch_threads)
    env["load_average_end"] = load_average()
    env["other_processes_cpus"] = other_load(*gauge)
    env["seconds"] = round(time.time() - env["started"], 2)
    for row in report.rows:
        if row["achieved_per_s"] is not None:
            row["limit_per_s"] = limit_value(report.limits, row["limit"], row["threads"])
            row["fraction_of_limit"] = row["achieved_per_s"] / row["limit_per_s"]
    report.targets = judge_targets(cases, report.rows, threads)
    if out is not False:
        print(report.text(), file=out)
    return report


def parse_list(text: str, what: str, kind=str) -> list:
    try:
        values = [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be a comma-separated list, e.g. 1,2") from None
    if not values:
        raise argparse.ArgumentTypeError(f"{what} is empty")
    return values


def main(argv: Optional[list] = None) -> int:
    from . import __doc__ as doc

    parser = argparse.ArgumentParser(prog="python -m dmlops.bench", description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(doc.split("\n\n")[1:]))
    parser.add_argument("--quick", action="store_true", help="the operator issues' target shapes only (under a minute)")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, few repeats: checks the report runs")
    parser.add_argument("--threads", type=lambda s: parse_list(s, "--threads", int), default=None,
                        help="comma-separated thread counts (default: 1 and the usable CPUs)")
    parser.add_argument("--op", action="append", default=None, metavar="NAME",
                        help="only this operator family or function (repeatable): padding/pad, convolution, "
                             "lp_pooling, unfold/fold, resample/upsample_2d")
    parser.add_argument("--peers", type=lambda s: parse_list(s, "--peers"), default=list(PEERS),
                        help=f"peer libraries to compare with (default {','.join(PEERS)})")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per figure at most")
    parser.add_argument("--json", metavar="PATH", help="write everything to this JSON file")
    parser.add_argument("--plot", metavar="PATH", help="bar chart of the speed-ups (needs matplotlib)")
    parser.add_argument("--scaling-plot", metavar="PATH",
                        help="speed against threads, a panel per case (needs matplotlib and several --threads)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--list", action="store_true", help="list the cases the options select and exit")
    args = parser.parse_args(argv)
    ops = [name for item in args.op for name in item.split(",") if name] if args.op else None
    tier = "smoke" if args.smoke else "quick" if args.quick else "full"
    try:
        if args.list:
            for c in select(tier, ops):
                print(f"{c.family:<12} {c.op:<12} {c.name:<28} {shape_text(c.shape):<18} {c.dtype:<8} {c.detail}")
            return 0
        report = run(ops, args.threads, args.quick, args.smoke, args.repeat, tuple(args.peers),
                     progress=not args.no_progress)
    except ValueError as e:
        parser.error(str(e))
    if args.json:
        report.save_json(args.json)
        print(f"wrote {args.json}")
    for path, draw in ((args.plot, report.plot), (args.scaling_plot, report.plot_scaling)):
        if not path:
            continue
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(f"matplotlib is not installed: {path} not drawn (pip install matplotlib)")
            continue
        if draw == report.plot_scaling and not report.scaling():
            print(f"{path} not drawn: a scaling plot needs at least two --threads counts")
            continue
        draw(path)
        print(f"wrote {path}")
    return 1 if report.failures else 0
