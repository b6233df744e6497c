"""Telling apart the objects of a NumPy object array by identity, in C.

Shared by the trace's table cache and the analysis: both look at text columns of tens of
thousands of rows that hold a few dozen distinct str objects.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd


def distinct_objects(values: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """(each row's index into the distinct objects, those objects) of a 1-D object array,
    first-appearance order, the objects told apart by identity, not by value.

    A trace's text columns hold one str object per distinct name, so a column of 50,000
    rows holds a few dozen objects: the objects' addresses (what the array stores) are
    factorized as integers in C, and only the few objects are looked at in Python, where
    looking at every row (its type, its hash) costs 20-60 ns a row."""
    arr = np.ascontiguousarray(values)
    n = len(arr)
    if not n:
        return np.zeros(0, dtype=np.intp), []
    # The array's own pointers, read as integers (the array stays alive while they are).
    raw = (ctypes.c_char * arr.nbytes).from_address(arr.ctypes.data)
    addresses = np.frombuffer(memoryview(raw), dtype=np.intp, count=n)
    code, uniq = pd.factorize(addresses)
    at = np.empty(len(uniq), dtype=np.intp)
    at[code] = np.arange(n)  # any row of an address holds the same object
    objects = arr[at].tolist()
    del raw, addresses
    return np.asarray(code, dtype=np.intp), objects
