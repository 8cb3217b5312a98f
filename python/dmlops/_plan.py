"""How a call computes: the :class:`Plan` every descriptor's ``plan()`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Plan:
    """How an operator's calls compute: what a descriptor's ``plan()`` returns (made by dmlops,
    not by the caller). The C++ code that sets up a call computes it, so it is what the call
    does, for arrays laid out as the descriptor's tensors say (C-contiguous when they give no
    strides) on the calling thread's thread count. ``DMLOPS_VERBOSE=1`` logs the same fields
    for every call, as one line on stderr.

    Parameters
    ----------
    algorithm : str
        The kernel path. Convolution: one of :func:`dmlops.convolution_algorithms`. Padding and
        nearest-neighbour resampling (a separable gather): ``copy`` (no axis remapped),
        ``fill`` (a size-1 output axis lies in the padding) or ``gather`` (each output row as
        runs). Linear resampling: ``filter`` (one pass per resampled axis). Lp pooling:
        ``sum_abs`` (p = 1), ``sum_squares`` (p = 2) or ``sum_powers`` (p >= 3). Unfold:
        ``rows``. Fold: ``slabs``.
    reason : str
        Why, in a few words (convolution: why it applies, or ``forced (...)``).
    isa : str
        The instruction set of the kernels it runs: ``avx512``, ``avx2``, or the build's
        baseline: ``sse2`` (x86-64), ``neon`` (Arm64) or ``portable`` (other processors).
    rewrite : str
        Convolution's geometry rewrite applied before choosing: ``""``, ``compact`` (large
        strides, dilations or paddings: a compact copy of the positions the taps read),
        ``sampled`` (a strided one-tap window: a 1x1 layer over ``x[..., ::stride]``) or both;
        ``""`` for the other operators.
    tiles : dict of str to int
        The tiles and blocking, in a fixed order: the GEMM's ``MR``, ``NR``, ``K``; the
        gather's ``rows``, ``row`` and the run counts of a row (``copy_runs``, ``mirror_runs``,
        ``gather_runs``, ...), ``row_copies`` where whole rows repeat, ``streamed`` where its rows
        go out through a buffer in L1 with streaming stores; the filter's pass order
        (``pass1``, ``pass2``: axes) and tile blocks; Lp pooling's ``block`` and ``span``; unfold's
        ``streamed``; fold's ``slab_rows``, ``in_place`` and
        ``prefetched``; and the ``grain`` (tasks per chunk of the parallel loop)
        where one is used.
    tasks : int
        Tasks of its main parallel loop (``backward_phases``: its phases, run one after the
        other, each a forward layer with its own tasks).
    threads : int
        The calling thread's thread count (:func:`dmlops.threads`).

    Raises
    ------
    TypeError
        A field is missing (a frozen dataclass: every field is required).

    Examples
    --------
    >>> import dmlops
    >>> d = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 8, 9, 9)),
    ...                            dmlops.TensorDesc("float32", (16, 8, 1, 1)))
    >>> plan = d.plan()
    >>> plan.algorithm, plan.tiles["MR"], plan.rewrite, plan.reason
    ('gemm', 6, '', 'any forward layer')
    >>> p = dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 3, 8, 8)), scale_size=(2, 2)).plan()
    >>> p.algorithm, p.tiles["row_copies"]
    ('gather', 2)
    """

    algorithm: str
    reason: str
    isa: str
    rewrite: str
    tiles: dict[str, int]
    tasks: int
    threads: int

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Plan:
        return cls(d["algorithm"], d["reason"], d["isa"], d["rewrite"], dict(d["tiles"]), d["tasks"], d["threads"])

    def __str__(self) -> str:
        tiles = " ".join(f"{k}={v}" for k, v in self.tiles.items())
        rewrite = f" rewrite={self.rewrite}" if self.rewrite else ""
        return (f"algorithm={self.algorithm} isa={self.isa}{rewrite} {tiles} tasks={self.tasks} "
                f"threads={self.threads} ({self.reason})")
