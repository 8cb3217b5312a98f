"""`python bench/report.py [options]` from a checkout is `python -m dmlops.bench [options]`."""
import sys

from dmlops.bench import main

sys.exit(main())
