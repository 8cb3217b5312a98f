"""Hostile cases run in a child process under an address-space limit.

A crash (a signal), a hang or unbounded memory in dmlops must show up as one failed test, not end
the test run: ``Child.call(fn, *args)`` runs ``fn`` (a module-level function, pickled by name) in
a spawned worker whose address space is limited to ``LIMIT_BYTES`` (``resource.RLIMIT_AS``), and
says how it ended: ``Outcome("returned", value)``, ``Outcome("raised", "ValueError: ...")``,
``Outcome("crashed", "exit code -11")`` or ``Outcome("hung", ...)``. After a crash or a hang the
worker is replaced, so the next call starts clean.

Under the sanitizers (scripts/sanitize preloads libasan) no limit is set: AddressSanitizer
reserves terabytes of address space for its shadow memory, and checks every access itself.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
from dataclasses import dataclass
from typing import Any, Callable

# Generous for any case here (small arrays), far below what an unbounded loop or scratch takes.
LIMIT_BYTES = 4 << 30


def limit_address_space(limit: int = LIMIT_BYTES) -> None:
    """RLIMIT_AS for this process (nothing under AddressSanitizer, see the module docstring)."""
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _serve(conn: Any) -> None:
    limit_address_space()
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            result = ("returned", fn(*args))
        except BaseException as e:  # noqa: BLE001 - every exception is reported, the parent judges it
            result = ("raised", f"{type(e).__name__}: {str(e)[:2000]}")
        conn.send(result)


@dataclass
class Outcome:
    how: str  # returned, raised, crashed or hung
    value: Any = None  # the return value, or the exception / exit status as text

    def ok(self, *allowed: str) -> bool:
        """Returned, or raised one of the ``allowed`` exception types (by name)."""
        return self.how == "returned" or (self.how == "raised" and str(self.value).split(":")[0] in allowed)


class Child:
    """One spawned worker, restarted after a crash or a hang."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self._context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self._process: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        self._process = self._context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._conn.close()
        self._process = self._conn = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Outcome:
        if self._process is None or not self._process.is_alive():
            self._start()
        self._conn.send((fn, args))
        if not self._conn.poll(self.timeout):
            self._stop()
            return Outcome("hung", f"no answer in {self.timeout} s")
        try:
            how, value = self._conn.recv()
        except EOFError:
            self._process.join()
            code = self._process.exitcode
            self._stop()
            return Outcome("crashed", f"exit code {code}")
        return Outcome(how, value)

    def close(self) -> None:
        self._stop()
