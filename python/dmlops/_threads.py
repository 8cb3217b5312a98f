"""The thread count used by every kernel (one process-wide pool of std::threads)."""

from __future__ import annotations

import operator
import os
import warnings

from . import _core


def set_num_threads(n: int) -> None:
    """Set how many threads kernels use.

    Parameters
    ----------
    n : int
        The thread count, 1 to 1024.

    Raises
    ------
    TypeError
        ``n`` is not an integer (bool included).
    ValueError
        ``n`` is outside 1..1024.

    Notes
    -----
    One process-wide pool of ``std::thread`` serves every kernel. The new count takes effect
    at the next call; a running kernel finishes first. The default is ``DMLOPS_NUM_THREADS``
    or the CPUs this process may use (its affinity mask). Results do not depend on the thread
    count, and calls from several Python threads at once are safe (the GIL is released while a
    kernel runs). Small tensors run on one thread whatever the setting.

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
    """The number of threads kernels use.

    Returns
    -------
    int
        The value of the last :func:`set_num_threads`, else ``DMLOPS_NUM_THREADS``, else the
        CPUs this process may use.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.get_num_threads() >= 1
    True
    """
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
