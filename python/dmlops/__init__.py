"""dmlops: DirectML operator semantics on the CPU.

numpy arrays in, numpy arrays out; strided, multithreaded C++ kernels underneath. Every
operator has a function (``dmlops.pad``) and a descriptor class mirroring its DirectML struct
(``dmlops.Padding1Desc``). The specification is shared/spec/operators.md.
"""

from ._tensor import DTYPES, TensorDesc, calc_buffer_tensor_size
from ._threads import _check_environment, get_num_threads, set_num_threads
from .lp_pooling import LpPooling1Desc, LpPoolingDesc, lp_pooling
from .padding import Padding1Desc, PaddingDesc, pad

__version__ = "0.1.0"

__all__ = [
    "DTYPES",
    "LpPooling1Desc",
    "LpPoolingDesc",
    "Padding1Desc",
    "PaddingDesc",
    "TensorDesc",
    "calc_buffer_tensor_size",
    "get_num_threads",
    "lp_pooling",
    "pad",
    "set_num_threads",
]

_check_environment()
