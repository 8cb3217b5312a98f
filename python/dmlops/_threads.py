"""How many threads kernels use: process-wide, per calling thread, and through threadpoolctl."""

from __future__ import annotations

import operator
import os
import warnings
from types import TracebackType
from typing import List, Optional, Type

from . import _core

_MAX_THREADS = 1024


def _thread_count(n: object, where: str) -> int:
    if isinstance(n, bool):
        raise TypeError(f"{where}: n must be an int, not bool")
    try:
        count = operator.index(n)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{where}: n must be an int, not {type(n).__name__}") from None
    if not 1 <= count <= _MAX_THREADS:
        raise ValueError(f"{where}: n is {count}; it must be from 1 to {_MAX_THREADS}")
    return count


def set_num_threads(n: int) -> None:
    """Set how many threads kernels use, process-wide.

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
    The new count takes effect at the next call; running calls keep the count they started
    with. The default is ``DMLOPS_NUM_THREADS`` or the CPUs this process may use (its affinity
    mask). A Python thread inside ``with dmlops.threads(m):`` uses ``m`` instead. Results do not
    depend on the thread count. Each call uses only as many threads as its work pays for: small
    tensors run on the calling thread whatever the setting. ``threadpoolctl.threadpool_limits``
    sets this count too.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.set_num_threads(1); dmlops.get_num_threads()
    1
    """
    _core.set_num_threads(_thread_count(n, "set_num_threads"))


def get_num_threads() -> int:
    """The number of threads kernels called from this Python thread use.

    Returns
    -------
    int
        The ``n`` of the innermost ``with dmlops.threads(n)`` around this call, else the value
        of the last :func:`set_num_threads`, else ``DMLOPS_NUM_THREADS``, else the CPUs this
        process may use.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.get_num_threads() >= 1
    True
    """
    return _core.get_num_threads()


class threads:
    """A context in which kernels called from this Python thread use ``n`` threads.

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
    The count belongs to the calling thread only: other Python threads keep theirs, and
    :func:`set_num_threads` does not change it. Contexts nest (the innermost applies, and the
    outer one is back on exit, also after an exception); one object may be entered several
    times. Typical uses: ``with dmlops.threads(1):`` inside the tasks of a thread-parallel
    scheduler (Dask, joblib, a ``ThreadPoolExecutor``) so that ``k`` tasks do not start
    ``k`` times the CPUs; a benchmark loop over thread counts.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.set_num_threads(4)
    >>> with dmlops.threads(1):
    ...     dmlops.get_num_threads()
    1
    >>> dmlops.get_num_threads()
    4
    """

    def __init__(self, n: int) -> None:
        self.n = _thread_count(n, "threads")
        self._previous: List[int] = []

    def __enter__(self) -> "threads":
        self._previous.append(_core.set_local_num_threads(self.n))
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], error: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        _core.set_local_num_threads(self._previous.pop())

    def __repr__(self) -> str:
        return f"dmlops.threads({self.n})"


def _check_environment() -> None:
    value = os.environ.get("DMLOPS_NUM_THREADS")
    if value is not None and _core.parse_num_threads(value) is None:
        warnings.warn(f"DMLOPS_NUM_THREADS={value!r} is not an integer from 1 to {_MAX_THREADS}; "
                      f"using {_core.default_num_threads()} threads", RuntimeWarning, stacklevel=3)
    caches = os.environ.get("DMLOPS_CACHE_SIZES")
    if caches is not None and _core.cache_sizes()["source"] != "environment":
        warnings.warn(f"DMLOPS_CACHE_SIZES={caches!r} is not three sizes L1d,L2,L3 such as '48K,2M,32M' "
                      f"(1K to 1024M, L1d <= L2); using the sizes the CPU reports", RuntimeWarning, stacklevel=3)


def _register_threadpoolctl() -> None:
    """Lets threadpoolctl see and limit dmlops like BLAS and OpenMP (when it is installed).

    The controller finds the extension module by its exported C functions; limits set through
    it are process-wide, as ``set_num_threads``.
    """
    try:
        import threadpoolctl
    except ImportError:
        return
    if not hasattr(threadpoolctl, "register"):  # before threadpoolctl 3.3: no custom controllers
        return

    class DmlopsController(threadpoolctl.LibController):  # type: ignore[misc]
        user_api = "dmlops"
        internal_api = "dmlops"
        filename_prefixes = ("_core.",)
        check_symbols = ("dmlops_get_num_threads", "dmlops_set_num_threads")

        def get_num_threads(self) -> int:
            return int(self.dynlib.dmlops_get_num_threads())

        def set_num_threads(self, num_threads: int) -> None:
            self.dynlib.dmlops_set_num_threads(int(num_threads))

        def get_version(self) -> str:
            from . import __version__
            return __version__

    threadpoolctl.register(DmlopsController)
