"""Small frame helpers: empty frames of given columns and types, built once and copied;
whether a frame's rows are numbered from 0; a column's array without its Series.

pandas takes about 0.2 ms to make each empty typed column (a frame of eight costs more than
most of a small rank's analysis), and the analysis returns such frames from many places
for every device that lacks the events: each distinct one is built once, and callers get a
copy of it (cheap: no rows), never the shared frame itself.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from nbprof.trace.model import frame_from_arrays


@functools.lru_cache(maxsize=256)
def _built(spec: tuple[tuple[str, Any], ...]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in spec})


def empty(columns: Iterable[str], dtype: Any = "object") -> pd.DataFrame:
    """A frame with no rows and these columns, every one of type ``dtype``."""
    return _built(tuple((c, dtype) for c in columns)).copy()


def empty_typed(spec: Iterable[tuple[str, Any]]) -> pd.DataFrame:
    """A frame with no rows and these (column, type) pairs."""
    return _built(tuple(spec)).copy()


def frame(columns: Mapping[str, Any], *, own: bool = False) -> pd.DataFrame:
    """A frame of these columns on a RangeIndex, each keeping its array's type (text held
    as objects stays object, as the analysis' tables hold it); NumPy's fixed-width text
    (``np.where`` over words gives it) is held as object. ``own``: the arrays are the
    caller's to hand over (not copied)."""
    arrays = {
        c: v.astype(object) if type(v) is np.ndarray and v.dtype.kind in "US" else v
        for c, v in columns.items()
    }
    lengths = {
        len(v) if isinstance(v, (np.ndarray, pd.Categorical)) and v.ndim == 1 else -1
        for v in arrays.values()
    }
    if len(lengths) != 1 or -1 in lengths:
        return pd.DataFrame(arrays)
    return frame_from_arrays(arrays, own=own)


#: The type the public constructor gives a column of text held as objects: pandas' own
#: text type where it infers one (pandas 3), else object.
_INFERRED_TEXT: Any = pd.Series(np.array(["text"], dtype=object)).dtype


def inferred_text(values: np.ndarray) -> Any:
    """An object array of str as the public constructor holds it: :data:`_INFERRED_TEXT`."""
    if isinstance(_INFERRED_TEXT, np.dtype):
        return values
    return pd.array(values, dtype=_INFERRED_TEXT)


def constructed(columns: Mapping[str, Any], index: pd.Index | None = None) -> pd.DataFrame:
    """``pd.DataFrame(columns, index=index)``, the same frame, for 1-D NumPy arrays of one
    length (and an index of that length, when given): each column keeps its array's type
    but a column of text only, which takes the type the constructor infers for it. The
    constructor infers and checks every column (about 0.2 ms for a collectives table of
    16); where its inference could go either way (some text, a missing value, fixed-width
    text, no rows) it is asked."""
    arrays: dict[str, Any] = {}
    lengths = set()
    for c, v in columns.items():
        if type(v) is not np.ndarray or v.ndim != 1 or v.dtype.kind in "US" or not len(v):
            return pd.DataFrame(columns, index=index)
        lengths.add(len(v))
        if v.dtype == object:
            kinds = set(map(type, v.tolist()))
            if kinds == {str}:
                v = inferred_text(v)
            elif str in kinds or float in kinds or type(None) in kinds:
                return pd.DataFrame(columns, index=index)
        arrays[c] = v
    if len(lengths) != 1 or (index is not None and len(index) not in lengths):
        return pd.DataFrame(columns, index=index)
    return frame_from_arrays(arrays, index=index)


def rows(df: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``df[mask]`` for a boolean ``mask``: the frame itself where every row is kept
    (frames are never modified in place), else the same frame made from each column's
    rows (pandas' selection goes through its general take and reindexing: about 55 us
    for a frame of 70 rows, against 15)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.all():
        return df
    arrays = stored_arrays(df)
    names = list(df.columns)
    if (
        arrays is None
        or mask.shape != (len(df),)
        or df.attrs
        or len(set(names)) != len(names)
        or not all(isinstance(a, (np.ndarray, pd.Categorical)) for a in arrays)
    ):
        return df[mask]
    at = np.flatnonzero(mask)
    taken = {c: a[at] for c, a in zip(names, arrays, strict=True)}
    out = frame_from_arrays(taken, own=True, index=df.index[at])
    out.columns = df.columns
    return out


def rank_rows(df: pd.DataFrame, rank: int) -> pd.DataFrame:
    """The rows of ``rank`` (:func:`rows`: the frame itself for a one-rank trace)."""
    return rows(df, column(df, "rank") == rank) if not df.empty else df


def row_dict(df: pd.DataFrame, i: int) -> dict[str, Any]:
    """Row ``i`` as plain values."""
    return {str(k): v for k, v in df.iloc[i].to_dict().items()}


def numbered(df: pd.DataFrame) -> bool:
    """Whether the rows are numbered 0, 1, ... (what ``ignore_index`` and ``reset_index``
    give)."""
    i = df.index
    return isinstance(i, pd.RangeIndex) and i.start == 0 and i.step == 1


#: pandas' accessor of a column's stored array, by position (private; where a pandas
#: lacks it, columns are read through their Series).
_STORED: Any = getattr(pd.DataFrame, "_get_column_array", None)


def stored_array(df: Any, name: Any) -> Any:
    """The array pandas stores for column ``name`` of a plain frame, as it is (shared with
    the frame: never to be written); None where that does not apply (not a frame, a
    repeated or missing name, no accessor)."""
    if type(df) is not pd.DataFrame or _STORED is None:
        return None
    try:
        at = df.columns.get_loc(name)
        return _STORED(df, at) if type(at) is int else None
    except (KeyError, TypeError, AttributeError, pd.errors.InvalidIndexError):
        return None


def stored_arrays(df: Any) -> tuple[Any, ...] | None:
    """The arrays pandas stores for each column of a plain frame, in column order, as they
    are (shared with the frame: never to be written); None where that does not apply."""
    if type(df) is not pd.DataFrame or _STORED is None:
        return None
    return tuple(_STORED(df, i) for i in range(df.shape[1]))


def column(df: Any, name: Any, dtype: Any = None) -> np.ndarray:
    """``df[name].to_numpy(dtype)``, the same array (a read-only view where it shares the
    frame's memory), without building the Series: a rank's analysis reads a few hundred
    columns, and a Series costs several times reading its array. A text column held as a
    ``Categorical`` comes as its values (objects); read its codes with
    :func:`nbprof.analysis._text.name_column`."""
    values = stored_array(df, name)
    if type(values) is np.ndarray:
        out = np.asarray(values, dtype=dtype)
        # What to_numpy gives: the stored array is never handed out writable.
        if out is values or np.shares_memory(values[:2], out[:2]):
            out = out.view()
            out.flags.writeable = False
        return out
    if isinstance(values, pd.Categorical) and dtype in (None, object):
        codes = values.codes
        if not len(codes) or codes.min() >= 0:
            # Its values: the categories at the codes (each row the category's own object).
            return np.asarray(values.categories.to_numpy(dtype=object)[codes])
    if isinstance(values, pd.api.extensions.ExtensionArray):
        return np.asarray(values.to_numpy(dtype=dtype))
    return np.asarray(df[name].to_numpy(dtype=dtype))


def dtype_of(df: Any, name: Any) -> Any:
    """The dtype of what :func:`column` gives (``df[name].dtype``, a text column held as a
    ``Categorical`` reading as object), without building the Series."""
    values = stored_array(df, name)
    if isinstance(values, pd.Categorical):
        return np.dtype(object)
    return df[name].dtype if values is None else values.dtype
