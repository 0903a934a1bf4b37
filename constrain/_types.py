"""Dtype constants and array aliases shared by every stage.

Every flat array in ``constrain`` uses one of these dtypes; kernels are compiled for exactly these,
so wrappers convert at the boundary instead of letting numba specialise on int32 vs int64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BITMASK_DTYPE",
    "BOOL_DTYPE",
    "BYTE_DTYPE",
    "INDPTR_DTYPE",
    "STATE_DTYPE",
    "TOKEN_DTYPE",
    "BoolArray",
    "ByteArray",
    "Int32Array",
    "Int64Array",
    "UInt64Array",
]

TOKEN_DTYPE = np.int32
STATE_DTYPE = np.int32
BITMASK_DTYPE = np.int32
INDPTR_DTYPE = np.int64
BYTE_DTYPE = np.uint8
BOOL_DTYPE = np.bool_

Int32Array = NDArray[np.int32]
Int64Array = NDArray[np.int64]
UInt64Array = NDArray[np.uint64]
ByteArray = NDArray[np.uint8]
BoolArray = NDArray[np.bool_]
AnyArray = NDArray[Any]
