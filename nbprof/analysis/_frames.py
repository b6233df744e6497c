"""Small frame helpers: empty frames of given columns and types, built once and copied;
whether a frame's rows are numbered from 0; a column's array without its Series.

pandas takes about 0.2 ms to make each empty typed column (a frame of eight costs more than
most of a small rank's analysis), and the analysis returns such frames from many places
for every device that lacks the events: each distinct one is built once, and callers get a
copy of it (cheap: no rows), never the shared frame itself.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from nbprof.trace.model import blocks_frame, blocks_made, frame_from_arrays


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
    """``pd.DataFrame(columns)`` on a RangeIndex, made from the arrays directly where every
    column is a 1-D NumPy array of one length: each keeps its array's type, and text stays
    object, as the trace's own tables hold it (the public constructor would check and
    infer every column again, about 0.2 ms for a frame of a few columns, which a job pays
    for each of its ranks' dozen result tables). Anything else goes to the constructor.

    ``own``: the arrays are the caller's to hand over, as
    :func:`nbprof.trace.model.frame_from_arrays` takes them (a big frame then holds them
    as they are, not a copy of them beside them)."""
    # NumPy's fixed-width text (np.where over words gives it) is held as object.
    arrays = {
        c: v.astype(object) if type(v) is np.ndarray and v.dtype.kind in "US" else v
        for c, v in columns.items()
    }
    lengths = {v.shape[0] if type(v) is np.ndarray and v.ndim == 1 else -1 for v in arrays.values()}
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
    length (and an index of that length, when given): each
    column keeps its array's type but a column of text only, which takes the type the
    constructor infers for it. The constructor infers and checks every column (about
    0.2 ms for a collectives table of 16); where its inference could go either way (some
    text, a missing value, fixed-width text, no rows) it is asked."""
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
    out = frame_from_arrays(arrays)
    if index is not None:
        out.index = index
    return out


def rows(df: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``df[mask]`` for a boolean ``mask``: the frame itself where every row is kept
    (frames are never modified in place), else the same frame pandas' boolean selection
    makes (the same blocks, in the same order and layout, the same columns and labels),
    taken block by block where every block is a NumPy array: pandas checks the mask and
    the labels and goes through its general take (about 55 us for a frame of 70 rows,
    against 15)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.all():
        return df
    mgr: Any = getattr(df, "_mgr", None)
    blocks = getattr(mgr, "blocks", None)
    if (
        type(df) is not pd.DataFrame
        or not blocks_made()
        or blocks is None
        or mask.shape != (len(df),)
        or df.attrs
        or not df.flags.allows_duplicate_labels
        or not all(type(b.values) is np.ndarray and b.values.ndim == 2 for b in blocks)
    ):
        return df[mask]
    at = np.flatnonzero(mask)
    # np.take keeps the values C-ordered, as pandas' take does (a fancy index would not).
    taken = tuple(b.make_block_same_class(np.take(b.values, at, axis=1)) for b in blocks)
    axes = [mgr.axes[0], df.index.take(at)]  # the same column Index, the labels taken
    return blocks_frame(taken, axes, consolidated=False)


def rank_rows(df: pd.DataFrame, rank: int) -> pd.DataFrame:
    """The rows of ``rank`` (:func:`rows`: the frame itself for a one-rank trace)."""
    return rows(df, column(df, "rank") == rank) if not df.empty else df


def row_dict(df: pd.DataFrame, i: int) -> dict[str, Any]:
    """``{str(k): v for k, v in df.iloc[i].to_dict().items()}``: row ``i`` as plain values.

    The row of a frame with a text column is an object Series whose values to_dict turns
    into Python's own (each column's NumPy scalar boxed, text as it is): read here from
    each column's array and boxed the same way, without the row's Series (about 80 us for
    the devices table). Any other frame (no object column, so the row would take a
    common type; repeated names; extension columns) is read by pandas."""
    arrays = stored_arrays(df)
    names = list(df.columns)
    if (
        _BOX is None
        or arrays is None
        or len(set(names)) != len(names)
        or not all(type(a) is np.ndarray and a.ndim == 1 for a in arrays)
        or not any(a.dtype == object for a in arrays)
    ):
        return {str(k): v for k, v in df.iloc[i].to_dict().items()}
    return {str(k): _BOX(a[i]) for k, a in zip(names, arrays, strict=True)}


#: pandas' boxing of a NumPy scalar as Python's own (what Series.to_dict applies to an
#: object row); None in a pandas without it (rows are then read by pandas).
try:
    _BOX: Any = importlib.import_module("pandas.core.dtypes.cast").maybe_box_native
except (ImportError, AttributeError):  # pragma: no cover - a pandas that moved it
    _BOX = None


def numbered(df: pd.DataFrame) -> bool:
    """Whether the rows are numbered 0, 1, ... (what ``ignore_index`` and ``reset_index``
    give)."""
    i = df.index
    return isinstance(i, pd.RangeIndex) and i.start == 0 and i.step == 1


#: pandas' accessor of a column's stored array (private; None in a pandas without it).
_STORED: Any = getattr(pd.DataFrame, "_get_column_array", None)


def _stored(df: Any, name: Any) -> Any:
    """The array pandas stores for column ``name`` of a plain frame, read without a Series;
    None where that does not apply (not a frame, a repeated or missing name, no accessor)."""
    if type(df) is not pd.DataFrame or _STORED is None:
        return None
    memo = _memo(df) if type(name) is str else None
    if memo is None:
        return _stored_now(df, name)
    got = memo.get(name, _UNSEEN)
    if got is _UNSEEN:
        got = memo[name] = _stored_now(df, name)
    return got


def _stored_now(df: pd.DataFrame, name: Any) -> Any:
    try:
        at = df.columns.get_loc(name)
        return _STORED(df, at) if type(at) is int else None
    except (KeyError, TypeError, AttributeError, pd.errors.InvalidIndexError):
        return None


#: The attribute of a frame holding :func:`_memo`'s answers (pandas neither pickles nor
#: copies an attribute of its own object).
_MEMO = "_nbprof_columns"
_UNSEEN = object()


def _memo(df: pd.DataFrame) -> dict[Any, Any] | None:
    """The columns already read from ``df`` (by name; by (name, dtype) as :func:`column`
    gave them), for as long as its manager, blocks and column names are the ones they
    were read from.

    A rank's analysis reads about 400 columns of 23 frames, 250 of them again (each read
    asks pandas for the column's position, block and array: about 1.5 µs). The arrays
    are pandas' own: a column set or replaced, inserted or dropped gives the frame new
    blocks or names (or a new manager), and the answers are then read afresh; values
    written in place are in the same arrays. None where the frame's internals are not
    as expected."""
    d = getattr(df, "__dict__", None)
    mgr = d.get("_mgr") if d is not None and _STORED is not None else None
    blocks = getattr(mgr, "blocks", None)
    axes = getattr(mgr, "axes", None)
    if blocks is None or not axes:
        return None
    memo = d.get(_MEMO)  # type: ignore[union-attr]
    if memo is None or memo[0] is not mgr or memo[1] is not blocks or memo[2] is not axes[0]:
        memo = (mgr, blocks, axes[0], {})
        object.__setattr__(df, _MEMO, memo)
    out: dict[Any, Any] = memo[3]
    return out


def stored_array(df: Any, name: Any) -> Any:
    """The array pandas stores for column ``name`` of a plain frame, as it is (shared with
    the frame: never to be written); None where that does not apply (not a frame, a
    repeated or missing name, no accessor)."""
    return _stored(df, name)


def stored_arrays(df: Any) -> tuple[Any, ...] | None:
    """The arrays pandas stores for each column of a plain frame, in column order, as they
    are (shared with the frame: never to be written); None where that does not apply (not
    a frame, no accessor)."""
    if type(df) is not pd.DataFrame or _STORED is None:
        return None
    return tuple(_STORED(df, i) for i in range(df.shape[1]))


def column(df: Any, name: Any, dtype: Any = None) -> np.ndarray:
    """``df[name].to_numpy(dtype)``, the same array (a read-only view where it shares the
    frame's memory), without building the Series.

    Selecting a column makes a Series (its index, its flags, its name) only for the array
    to be taken out of it again: about 20 µs each, and one rank's analysis reads a few
    hundred columns. A column stored as a plain NumPy array is read from the frame's
    blocks directly; anything else (an extension type such as pandas' text dtype, a
    repeated column name, not a frame at all) goes through the Series as before.
    """
    memo = _memo(df) if type(df) is pd.DataFrame and type(name) is str else None
    if memo is not None:
        got = memo.get((name, dtype))
        if got is not None:
            return got
        values = memo.get(name, _UNSEEN)
        if values is _UNSEEN:
            values = memo[name] = _stored_now(df, name)
    else:
        values = _stored(df, name)
    if type(values) is np.ndarray:
        out = np.asarray(values, dtype=dtype)
        # What to_numpy gives: the stored array is never handed out writable.
        if out is values or np.shares_memory(values[:2], out[:2]):
            out = out.view()
            out.flags.writeable = False
            if memo is not None:
                # Read-only, so one view serves every caller; a converted copy is each
                # caller's own (some write to it), never remembered.
                memo[(name, dtype)] = out
        return out
    if isinstance(values, pd.api.extensions.ExtensionArray):
        # What Series.to_numpy returns for a column of an extension type (pandas' text
        # type: the frames of text the public constructor made), without the Series.
        return np.asarray(values.to_numpy(dtype=dtype))
    return np.asarray(df[name].to_numpy(dtype=dtype))


def dtype_of(df: Any, name: Any) -> Any:
    """``df[name].dtype`` without building the Series."""
    values = _stored(df, name)
    return df[name].dtype if values is None else values.dtype
