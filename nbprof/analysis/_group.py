"""Grouping small tables without pandas' groupby.

A rank's tables are small (tens to a few thousand rows), and the panel's tables group
them by one to five keys: at that size a ``DataFrame.groupby(...).agg(...)`` is almost all
fixed cost, paid once per table per device, and for every rank of a job. These helpers
group in plain Python and sum the way pandas does (Kahan-compensated), so a table built
with them holds exactly the numbers the groupby gave.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)


def _pandas_reduceat() -> bool:
    try:
        from pandas.core.groupby import ops
    except ImportError:
        return False
    return hasattr(getattr(ops, "BaseGrouper", None), "_reduceat_aggregate")


#: Whether this pandas sums rows already grouped in order with ``np.add.reduceat`` (recent
#: releases do; older ones always take the compensated Cython sum).
_REDUCEAT = _pandas_reduceat()


def codes(keys: Sequence[Any], *, sort: bool = False) -> tuple[list[Any], np.ndarray]:
    """(distinct keys, each row's index into them): first-appearance order, or sorted
    (keys are str, int or tuples of them, so they order as pandas sorts its groups)."""
    first: dict[Any, int] = {}
    for k in keys:
        if k not in first:
            first[k] = len(first)
    uniq = list(first)
    if not sort:
        return uniq, np.fromiter((first[k] for k in keys), dtype="int64", count=len(keys))
    uniq.sort()
    place = {k: i for i, k in enumerate(uniq)}
    return uniq, np.fromiter((place[k] for k in keys), dtype="int64", count=len(keys))


def sums(code: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per group, the sum of its non-NaN values as pandas' groupby ``sum`` adds them: when
    the rows come grouped in order and hold no NaN, ``np.add.reduceat`` over each run, as
    pandas does; else in row order, Kahan-compensated (a compensation made NaN or infinite by an
    infinity or an overflow restarts at 0), as its Cython kernel does."""
    v = np.asarray(values, dtype="float64")
    in_order = len(code) and bool((code[1:] >= code[:-1]).all())
    if _REDUCEAT and in_order and not np.isnan(v).any():
        starts = np.flatnonzero(np.concatenate(([True], code[1:] != code[:-1])))
        out = np.zeros(n, dtype="float64")
        out[code[starts]] = np.add.reduceat(v, starts)
        return out
    if len(v) and _exact(v):
        # Whole numbers whose sums stay below 2**53 add exactly in any order, so the
        # compensation is always 0 and the sums are plain ones, added in C.
        return np.bincount(code, weights=v, minlength=n).astype("float64")
    total = [0.0] * n
    comp = [0.0] * n
    for g, x in zip(code.tolist(), v.tolist(), strict=True):
        if math.isnan(x):
            continue
        y = x - comp[g]
        t = total[g] + y
        c = t - total[g] - y
        comp[g] = c if math.isfinite(c) else 0.0
        total[g] = t
    return np.array(total, dtype="float64")


def _exact(v: np.ndarray) -> bool:
    """Whether every value is a whole number and their magnitudes add up to less than
    2**53: then every partial sum, in any order, is exact in float64."""
    with np.errstate(invalid="ignore", over="ignore"):
        whole = bool((v == np.trunc(v)).all())  # NaN is not; an infinity fails the bound
        return whole and float(np.abs(v).sum()) < 2.0**53


def counts(code: np.ndarray, n: int) -> np.ndarray:
    """Rows per group (pandas' ``size``)."""
    return np.bincount(code, minlength=n).astype("int64")


def any_true(code: np.ndarray, flags: np.ndarray, n: int) -> np.ndarray:
    """Per group: is any flag set (pandas' ``any`` of a bool column)."""
    out = np.zeros(n, dtype=bool)
    out[code[np.asarray(flags, dtype=bool)]] = True
    return out


#: Rows from which a table counts as long (its keys are grouped by their codes rather than
#: by tuples of their values).
BY_ADDRESS = 1024


def all_text(values: np.ndarray | pd.Categorical | pd.Series) -> bool:
    """Whether every value is a str: pandas drops missing keys (NaN, None) from groups, so
    the plain-Python grouping is used only where there are none. A trace's text columns
    (Categoricals) are asked of their distinct values only."""
    if isinstance(values, pd.Categorical):
        codes = np.asarray(values.codes)
        return (not len(codes) or codes.min() >= 0) and all(
            type(v) is str for v in values.categories.tolist()
        )
    # The set of the values' types, built in C: a third cheaper than a generator.
    return set(map(type, values.tolist())) <= {str}


def factorized(values: np.ndarray | pd.Categorical | pd.Series) -> tuple[np.ndarray, list[Any]]:
    """(each row's index into the distinct values, those values): a Categorical's own codes
    and (sorted) categories, read as they are; anything else in order of first
    appearance."""
    if isinstance(values, pd.Categorical):
        return np.asarray(values.codes, dtype=np.intp), values.categories.tolist()
    uniq, code = codes(values.tolist())
    return code.astype(np.intp), uniq


def sums_or_none(keys: np.ndarray, values: np.ndarray) -> tuple[list[Any], np.ndarray] | None:
    """(sorted distinct keys, each one's sum) as ``groupby(keys, sort=True).sum()`` gives
    them, or None where pandas must decide (a missing key, or a missing or infinite value,
    whose sum pandas releases have answered differently)."""
    if not all_text(keys) or not np.isfinite(values).all():
        return None
    uniq, code = codes(keys.tolist(), sort=True)
    return uniq, sums(code, values, len(uniq))


def largest_first(values: np.ndarray) -> np.ndarray:
    """``np.argsort(-values, kind="stable")`` for float64 values with no NaN: the same
    order (largest first, equal values in their rows' order), from NumPy's quicksort of
    the values, then one sort of whole numbers that puts each run of equal values in row
    order. A stable sort of floats costs about 90 ns a value, and a large trace's idle
    gaps are sorted so twice; this takes half that."""
    v = -np.asarray(values, dtype="float64")
    n = len(v)
    if n < BY_ADDRESS or n >= 1 << 31:
        return np.argsort(v, kind="stable")
    order = np.argsort(v)
    ranked = v[order]
    # Each value's place among the distinct values, then its row: one number, unique.
    run = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1])))
    key = run * np.int64(n) + order
    key.sort()
    return np.asarray(key % n, dtype=np.intp)
