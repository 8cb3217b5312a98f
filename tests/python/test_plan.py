"""Every operator's plan(): pinned for representative inputs (so a refactor cannot silently change
a choice), equal to what the call does (DMLOPS_VERBOSE's line of the call against the plan), on the
calling thread's thread count, with hostile arguments refused as the call refuses them."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

import dmlops
from dmlops import TensorDesc, _core

ISAS = ("avx512", "avx2", "sse2", "neon", "portable")
X86 = platform.machine().lower() in ("x86_64", "amd64")


def f32(*sizes):
    return TensorDesc("float32", sizes)


# (descriptor, algorithm, tiles (the pinned subset), tasks) on 2 threads.
CASES = {
    "pad_reflection": (lambda: dmlops.Padding1Desc(f32(1, 3, 8, 40), start_padding=(0, 0, 2, 2), end_padding=(0, 0, 2, 2),
                                                   padding_mode="reflection"),
                       "gather", {"rows": 36, "row": 44, "copy_runs": 1, "gather_runs": 2, "border_elements": 4}, 36),
    "pad_mirror": (lambda: dmlops.Padding1Desc(f32(2, 40), start_padding=(0, 20), end_padding=(0, 20),
                                               padding_mode="reflection"),
                   "gather", {"rows": 2, "row": 80, "copy_runs": 1, "mirror_runs": 2}, 2),
    "pad_nothing": (lambda: dmlops.Padding1Desc(f32(1, 3, 8, 8), start_padding=0, end_padding=0),
                    "copy", {"rows": 1, "row": 192}, 1),
    "pad_edge_rows": (lambda: dmlops.PaddingDesc(f32(4, 16), start_padding=(2, 0), end_padding=(2, 0), padding_mode="edge"),
                      "gather", {"rows": 8, "row": 16, "border_elements": 0}, 8),
    "upsample_nearest": (lambda: dmlops.Upsample2DDesc(f32(1, 3, 8, 8), scale_size=(2, 2)),
                         "gather", {"rows": 24, "row": 16, "row_copies": 2, "repeat_runs": 1}, 24),
    "upsample_linear": (lambda: dmlops.Upsample2DDesc(f32(1, 3, 8, 8), scale_size=(2, 2), interpolation_mode="linear"),
                        "filter", {"pass1": 3, "pass2": 2, "block2": 16, "block3": 16, "tile": 256}, 3),
    "resample_down": (lambda: dmlops.Resample3Desc(f32(1, 3, 8, 8), interpolation_mode="linear",
                                                   scales=(1, 1, 0.5, 0.5), rounding_direction="decreasing"),
                      "filter", {"pass1": 2, "pass2": 3, "block2": 4, "block3": 4, "tile": 16}, 3),
    "resample_identity": (lambda: dmlops.ResampleDesc(f32(1, 3, 8, 8), interpolation_mode="linear", scales=(1, 1, 1, 1)),
                          "copy", {"rows": 1, "row": 192}, 1),
    "lp_p1": (lambda: dmlops.LpPooling1Desc(f32(1, 3, 8, 8), window_size=(2, 2), strides=(2, 2), p=1),
              "sum_abs", {"rows": 12, "blocks": 1, "block": 4, "span": 8, "outer_taps": 2}, 12),
    "lp_p2": (lambda: dmlops.LpPooling1Desc(f32(1, 3, 8, 8), window_size=(2, 2), p=2),
              "sum_squares", {"rows": 21, "blocks": 1, "block": 7, "span": 8, "outer_taps": 2}, 21),
    "lp_p3": (lambda: dmlops.LpPooling1Desc(TensorDesc("float16", (1, 3, 8, 8)), window_size=(3, 3), strides=(2, 2), p=3),
              "sum_powers", {"rows": 9, "blocks": 1, "block": 3, "span": 7, "outer_taps": 3}, 9),
    "unfold": (lambda: dmlops.UnfoldDesc(f32(1, 3, 8, 8), window_sizes=(3, 3)),
               "rows", {"rows": 27, "pieces": 1, "blocks0_per_piece": 6, "streamed": 0}, 27),
    "fold": (lambda: dmlops.FoldDesc(f32(1, 27, 36), f32(1, 3, 8, 8), window_sizes=(3, 3)),
             "slabs", {"planes": 3, "slabs": 3, "slab_rows": 3, "in_place": 1, "prefetched": 0}, 9),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_plan_is_pinned(case):
    make, algorithm, tiles, tasks = CASES[case]
    with dmlops.threads(2):
        plan = make().plan()
    assert isinstance(plan, dmlops.Plan)
    assert (plan.algorithm, plan.tasks, plan.threads, plan.rewrite) == (algorithm, tasks, 2, ""), plan
    assert {k: plan.tiles[k] for k in tiles} == tiles, plan
    assert plan.tiles["grain"] >= 1 and plan.isa in ISAS and plan.reason, plan


def test_the_reasons_name_the_paths():
    with dmlops.threads(2):
        assert "; the rows repeat 2x: each is gathered once and copied" in CASES["upsample_nearest"][0]().plan().reason
        # Rows too long to permute whole: with the byte permute (vbmi), a batch of rows and their
        # copies per call.
        wide = dmlops.Upsample2DDesc(f32(1, 2, 4, 64), scale_size=(2, 2)).plan().reason
        vbmi = "repeats of 2 to 8 as one byte permute" in wide
        assert ("each is gathered once and copied, a batch of rows per call" in wide) == vbmi, wide
        assert "two-tap axes by the pairs kernel" in CASES["upsample_linear"][0]().plan().reason
        antialiased = dmlops.Resample3Desc(f32(1, 3, 8, 8), interpolation_mode="linear", scales=(1, 1, 0.5, 0.5),
                                           rounding_direction="decreasing", antialiased=True).plan()
        assert "wider filters tap by tap" in antialiased.reason
        lp = CASES["lp_p3"][0]().plan().reason
        assert lp.startswith("p = 3: ") and "the 3 taps of stride 2 along W are compiled in" in lp
        assert lp.endswith("input rows packed into scratch first")  # float16 rows are converted
        assert CASES["lp_p2"][0]().plan().reason.endswith("input rows read in place")
        assert "strided runs" in dmlops.UnfoldDesc(f32(1, 1, 9), window_sizes=(3,), strides=(3,)).plan().reason
    # The byte-permute kernels (AVX512_VBMI) are named where they run, and never without AVX-512;
    # so are narrow rows (input rows of at most 128 bytes: AVX-512F for float32).
    code = ("import dmlops; t = dmlops.TensorDesc('float32', (1, 1, 9));"
            "print(dmlops.UnfoldDesc(t, window_sizes=(2,), strides=(2,)).plan().reason);"
            "print(dmlops.Upsample2DDesc(dmlops.TensorDesc('uint8', (1, 1, 4, 256)), scale_size=(3, 3)).plan().reason);"
            "p = dmlops.Upsample2DDesc(dmlops.TensorDesc('float32', (1, 1, 4, 32)), scale_size=(3, 3)).plan();"
            "print(p.isa, p.reason, dmlops._core.fma_isa())")
    unfold, upsample, narrow = run_child(code, DMLOPS_DISABLE_AVX512="1").stdout.splitlines()
    assert "vbmi" not in unfold and "vbmi" not in upsample
    # Without it, stride-2 runs are AVX2 packs where the CPU has AVX2, else element by element.
    avx2 = narrow.split()[-1] == "avx2"
    assert ("one narrowing pack per 32 output bytes (avx2)" in unfold) == avx2
    assert "element by element" in unfold
    assert "one permute of it" not in narrow and not narrow.startswith("avx512")
    unfold, upsample, narrow = run_child(code).stdout.splitlines()
    assert ("stride-2 runs as one byte permute" in unfold) == ("repeats of 2 to 8 as one byte permute" in upsample)
    assert ("every 64 output bytes one permute of it" in narrow) == narrow.endswith(" avx512") == narrow.startswith("avx512 ")


def test_the_plan_follows_the_thread_count():
    desc = dmlops.UnfoldDesc(f32(1, 1, 64, 4096), window_sizes=(1, 1))
    with dmlops.threads(1):
        one = desc.plan()
    with dmlops.threads(8):
        eight = desc.plan()
    # One row, cut into 4 pieces per thread (at most one per 32 KiB of it: 32 here).
    assert (one.threads, one.tiles["pieces"], one.tasks) == (1, 4, 4), one
    assert (eight.threads, eight.tiles["pieces"], eight.tasks) == (8, 32, 32), eight
    # Rows of 160 KB are cut into column blocks when there are fewer than 4 per thread.
    pad = dmlops.Padding1Desc(f32(8, 40000), start_padding=(0, 1), end_padding=(0, 1))
    with dmlops.threads(1):
        assert "column_blocks" not in pad.plan().tiles
    with dmlops.threads(4):
        split = pad.plan()
    assert split.tiles["column_blocks"] == 3 and split.tasks == 8 * 3, split
    # The tiles a filter cuts for the threads reach every thread: a quarter antialiased
    # resampling's 64 tiles of 4,096 outputs at 16 threads go in chunks of 4, not 8.
    quarter = dmlops.Resample3Desc(f32(1, 16, 512, 512), interpolation_mode="linear", scales=(1, 1, 0.25, 0.25),
                                   rounding_direction="increasing", antialiased=True)
    for threads in (1, 4, 8, 16):
        with dmlops.threads(threads):
            plan = quarter.plan()
        assert plan.tasks // plan.tiles["grain"] >= min(threads, plan.tasks), (threads, plan)
    with dmlops.threads(16):
        assert (quarter.plan().tasks, quarter.plan().tiles["grain"]) == (64, 4), quarter.plan()


def run_child(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), check=True, capture_output=True,
                          text=True)


# In a child (DMLOPS_VERBOSE is read once): every case's plan inside dmlops.threads(3), printed as
# the log prints it, then the call, whose log line must say the same.
CHILD = """
import numpy as np, dmlops, sys
sys.path.insert(0, {here!r})
from test_plan import CASES
for name in sorted(CASES):
    d = CASES[name][0]()
    with dmlops.threads(3):
        p = d.plan()
        tiles = ",".join(f"{{k}}:{{v}}" for k, v in p.tiles.items())
        print(f"-> algorithm={{p.algorithm}} isa={{p.isa}} tiles={{tiles}} tasks={{p.tasks}} threads={{p.threads}} "
              f"reason={{p.reason}}", flush=True)
        d(np.ones(d.input.sizes, d.input.dtype))
"""


def test_the_call_logs_its_plan_one_line_per_call():
    here = os.path.dirname(os.path.abspath(__file__))
    result = run_child(CHILD.format(here=here), DMLOPS_VERBOSE="1", DMLOPS_NUM_THREADS="2")
    plans, lines = result.stdout.splitlines(), result.stderr.splitlines()
    assert len(plans) == len(CASES) and len(lines) == len(CASES), result.stderr
    for plan, line in zip(plans, lines):
        assert line.startswith("dmlops: ") and line.endswith(plan[len("-> "):]), (plan, line)
        assert " -> algorithm=" in line and " threads=3 " in line, line
    assert lines[0].startswith("dmlops: Fold 1x27x36 f32 window 3x3 -> algorithm=slabs"), lines[0]
    by_name = dict(zip(sorted(CASES), lines))
    assert by_name["pad_reflection"].startswith("dmlops: Padding1 reflection 1x3x8x40 f32 -> algorithm=gather")
    assert by_name["upsample_nearest"].startswith("dmlops: Upsample2D nearest_neighbor 1x3x8x8 f32 to 1x3x16x16 ->")
    assert by_name["lp_p3"].startswith("dmlops: LpPooling1 p=3 1x3x8x8 f16 window 3x3 -> algorithm=sum_powers")
    assert by_name["unfold"].startswith("dmlops: Unfold 1x3x8x8 f32 window 3x3 -> algorithm=rows")
    assert run_child(CHILD.format(here=here)).stderr == ""


@pytest.mark.skipif(not X86, reason="the sse2 baseline is x86-64's")
def test_without_avx2_every_kernel_says_sse2():
    code = ("import sys; sys.path.insert(0, {here!r})\nfrom test_plan import CASES\nimport dmlops\n"
            "print(sorted({{CASES[n][0]().plan().isa for n in CASES}}), dmlops._core.fma_isa())")
    here = os.path.dirname(os.path.abspath(__file__))
    assert run_child(code.format(here=here), DMLOPS_DISABLE_AVX2="1").stdout.split() == ["['sse2']", "sse2"]


SPEC = ("float32", (1, 3, 8, 8), None)
HOSTILE = [
    ("padding", ("Padding1", SPEC, None, "reflection", (0, 0, -1, 2), (0, 0, 2, 2), 0.0, True)),
    ("padding", ("Padding1", SPEC, None, "reflection", (0, 0, 2**62, 2), (0, 0, 2, 2), 0.0, True)),
    ("padding", ("Padding1", SPEC, None, "sideways", (0, 0, 1, 1), (0, 0, 1, 1), 0.0, True)),
    ("padding", ("Padding1", ("float32", (1, 3, 8, 8), (1, 1, 1)), None, "edge", (0,) * 4, (0,) * 4, 0.0, True)),
    ("resample", ("Resample3", SPEC, None, "linear", "decreasing", (1, 1, 0, 1), None, None, False)),
    ("resample", ("Resample3", SPEC, None, "linear", "decreasing", (1, 1, 1e30, 1e30), None, None, False)),
    ("resample", ("Resample3", ("int32", (1, 3, 8, 8), None), None, "linear", "decreasing", (1,) * 4, None, None, False)),
    ("upsample_2d", (SPEC, None, (2**62, 2), "nearest_neighbor")),
    ("upsample_2d", (SPEC, None, ("2", 2), "nearest_neighbor")),
    ("lp_pooling", ("LpPooling1", SPEC, None, (1, 1), (9, 9), (0, 0), (0, 0), None, 2)),
    ("lp_pooling", ("LpPooling1", SPEC, None, (1, 1), (2, 2), (0, 0), (0, 0), None, 0)),
    ("lp_pooling", ("LpPooling1", SPEC, None, (0, 1), (2, 2), (0, 0), (0, 0), None, 2)),
    ("unfold", (SPEC, None, (3, 3), (1, 1), (1, 1), (0, 0), (-1, 0))),
    ("unfold", (("float32", (2**20, 2**20, 8, 8), None), None, (2**20, 1), (1, 1), (1, 1), (2**21, 0), (0, 0))),
    ("fold", (("float32", (1, 27, 35), None), SPEC, (3, 3), (1, 1), (1, 1), (0, 0), (0, 0))),
    ("fold", (("float32", (1, 27, 36), None), ("float64", (1, 3, 8, 8), None), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0))),
]


@pytest.mark.parametrize("op, args", HOSTILE)
def test_hostile_arguments_to_plan_raise_as_the_descriptor_does(op, args):
    with pytest.raises((ValueError, TypeError)) as infer:
        getattr(_core, f"{op}_infer")(*args)
    with pytest.raises(infer.type) as plan:
        getattr(_core, f"{op}_plan")(*args)
    assert str(plan.value) == str(infer.value)
