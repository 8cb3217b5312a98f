"""dmlops' benchmark report: every operator against its peers and the machine's limits.

    python -m dmlops.bench [--quick | --smoke] [--threads 1,2] [--op NAME] [--json out.json] [--plot out.png]

It measures this machine's limits, at its start and again at its end (the better figure counts:
other processes can only lower them): copy bandwidth (a 256 MiB buffer copied on each thread
count) and the float32 FMA peak (a register-only FMA loop in the kernels' ISA). In between, for
each operator's benchmark shapes (the ones its issue names) and each thread count, it checks that
numpy, PyTorch and ONNX Runtime give dmlops' result (bit-exact for data movement, a stated float
tolerance for arithmetic; a mismatch marks the case FAILED and the exit status non-zero), times
dmlops and each of them (warm-up, then the median of repeated calls, fixed seeds) and prints one
table: the medians, the speed-up of dmlops over each peer, and the fraction of the machine's
limit dmlops reaches (copy bandwidth for data movement, FMA peak for convolution).

numpy is the only requirement: torch, onnxruntime (with onnx, which builds the models in memory)
and matplotlib (--plot) are each skipped with one line when missing.

From Python: dmlops.bench.run(quick=True) returns a Report (rows, limits, targets, failures,
table(), plot(), save_json()).
"""
from ._case import PEERS
from ._report import Report, all_cases, main, run

__all__ = ["PEERS", "Report", "all_cases", "main", "run"]
