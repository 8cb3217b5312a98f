"""The thread count used by every kernel (one process-wide pool of std::threads)."""

from __future__ import annotations

import operator
import os
import warnings

from . import _core


def set_num_threads(n: int) -> None:
    """Set how many threads kernels use (n >= 1). Takes effect at the next call; waits for a
    running kernel to finish. The default is ``DMLOPS_NUM_THREADS`` or the CPUs this process
    may use. Results do not depend on the thread count.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.set_num_threads(1); dmlops.get_num_threads()
    1
    """
    if isinstance(n, bool):
        raise TypeError("set_num_threads: n must be an int, not bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads: n must be an int, not {type(n).__name__}") from None
    if not -2**31 <= n < 2**31:  # beyond a C int, where the C++ range check cannot even see it
        raise ValueError(f"set_num_threads: n is {n}; at most 1024 threads")
    _core.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads kernels use."""
    return _core.get_num_threads()


def _check_environment() -> None:
    value = os.environ.get("DMLOPS_NUM_THREADS")
    if value is None:
        return
    try:
        ok = 1 <= int(value) <= 1024
    except ValueError:
        ok = False
    if not ok:
        warnings.warn(f"DMLOPS_NUM_THREADS={value!r} is not an integer from 1 to 1024; "
                      f"using {_core.default_num_threads()} threads", RuntimeWarning, stacklevel=3)
