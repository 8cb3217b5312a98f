"""dmlops: DirectML operator semantics on the CPU.

array_likes in (numpy arrays, and PyTorch or JAX CPU tensors through DLPack, read without a
copy), numpy arrays out; strided, multithreaded C++ kernels underneath. Every
operator has a function (``dmlops.pad``) and a descriptor class mirroring its DirectML struct
(``dmlops.Padding1Desc``). The documentation, with the semantics of every operator, is in
docs/ (build it with ``sphinx-build docs build/docs``).
"""

from ._activation import Activation
from ._memory import release_memory
from ._plan import Plan
from ._tensor import DTYPES, TensorDesc, calc_buffer_tensor_size
from ._threads import _check_environment, _register_threadpoolctl, get_num_threads, set_num_threads, threads
from .convolution import ConvolutionDesc, PreparedConvolution, convolution, convolution_algorithms
from .lp_pooling import LpPooling1Desc, LpPoolingDesc, lp_pooling
from .padding import Padding1Desc, PaddingDesc, pad
from .unfold import FoldDesc, UnfoldDesc, fold, unfold
from . import dxdispatch
from .resample import (Resample1Desc, Resample2Desc, Resample3Desc, ResampleDesc, Upsample2DDesc, resample,
                       upsample_2d)

__version__ = "0.1.0"

__all__ = [
    "Activation",
    "ConvolutionDesc",
    "DTYPES",
    "FoldDesc",
    "LpPooling1Desc",
    "LpPoolingDesc",
    "Padding1Desc",
    "PaddingDesc",
    "Plan",
    "PreparedConvolution",
    "Resample1Desc",
    "Resample2Desc",
    "Resample3Desc",
    "ResampleDesc",
    "TensorDesc",
    "UnfoldDesc",
    "Upsample2DDesc",
    "calc_buffer_tensor_size",
    "convolution",
    "convolution_algorithms",
    "dxdispatch",
    "fold",
    "get_num_threads",
    "lp_pooling",
    "pad",
    "release_memory",
    "resample",
    "set_num_threads",
    "threads",
    "unfold",
    "upsample_2d",
]

_check_environment()
_register_threadpoolctl()
