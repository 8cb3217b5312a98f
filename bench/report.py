"""`python bench/report.py [options]` from a checkout is `python -m dmlops.bench [options]`."""
import runpy

runpy.run_module("dmlops.bench", run_name="__main__", alter_sys=True)
