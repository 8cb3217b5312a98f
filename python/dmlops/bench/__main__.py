import os
import sys

# Thread pools that busy-wait after a call take a core from whatever is timed next: dmlops and
# torch at 2 threads ran no faster than at 1 after numpy's matmul or torch itself. Both knobs
# are read once, when the library is loaded (numpy is already imported: dmlops imports it), so
# the report restarts itself once with them set, unless the caller chose values:
# - OPENBLAS_NUM_THREADS=1: OpenBLAS' idle threads spin for about 0.1 s after every BLAS call;
#   the numpy column is single-threaded numpy throughout.
# - GOMP_SPINCOUNT=20000: torch's OpenMP workers spin 300,000 rounds by default (several ms) before
#   they sleep; 20,000 is a short poll like dmlops' own (200 microseconds), and torch ran faster
#   with it too.
WAIT_SETTINGS = {"OPENBLAS_NUM_THREADS": "1", "GOMP_SPINCOUNT": "20000"}
missing = {k: v for k, v in WAIT_SETTINGS.items() if k not in os.environ}
if missing:
    os.environ.update(missing)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "dmlops.bench", *sys.argv[1:]])

from ._report import main  # noqa: E402

sys.exit(main())
