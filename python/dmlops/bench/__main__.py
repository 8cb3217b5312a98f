import os
import sys

# numpy's OpenBLAS keeps its idle threads busy-waiting for a while (about 0.1 s) after every
# BLAS call: in a report that times numpy's matmul-based formulations next to everything else,
# they would take a core from whatever runs next (dmlops and torch at 2 threads ran no faster
# than at 1). OpenBLAS reads its thread count only when numpy is first imported, which has
# already happened (dmlops imports numpy), so the report restarts itself once with
# OPENBLAS_NUM_THREADS=1: the numpy column is single-threaded numpy throughout.
if "OPENBLAS_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "dmlops.bench", *sys.argv[1:]])

from ._report import main  # noqa: E402

sys.exit(main())
