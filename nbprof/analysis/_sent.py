"""Frames sent between processes as their columns' arrays, made into frames again only when
read.

A job's workers send one rank summary each to the client (:mod:`nbprof.parallel`), and
each summary holds about ten small frames (its steps, its timeline sample, its panel's
tables). pandas pickles a frame with its index, its column Index and its block manager:
about 30 µs to pickle and 50 µs to unpickle each, where its arrays alone take a few, and
the client unpickles every summary while its workers still need the cores. Most of those
frames are never read during the load (a rank's panel tables and timeline are read when
that rank is shown), so a frame sent this way is kept as its arrays until first read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames
from nbprof.trace.model import frame_from_arrays

#: The type of a column Index of text names: the one a rebuilt frame's columns get.
_NAMES_DTYPE: Any = pd.Index(["name"], tupleize_cols=False).dtype
#: Where an object keeps its fields that are still packed.
_PACKED = "_packed_fields"


@dataclass(frozen=True)
class Packed:
    """A frame as its column names and arrays (each with its own type)."""

    names: tuple[str, ...]
    arrays: tuple[Any, ...]

    def frame(self) -> pd.DataFrame:
        """The frame again: the same columns, types and values, on a RangeIndex."""
        return frame_from_arrays(dict(zip(self.names, self.arrays, strict=True)))


def pack(df: Any) -> Packed | None:
    """``df`` as a :class:`Packed` that gives back an equal frame; None for a frame it
    would not (rows not numbered from 0, names that are not distinct text, attributes or
    flags set, a pandas without the accessor), which is then sent as it is."""
    if type(df) is not pd.DataFrame or df.shape[1] == 0 or not _frames.numbered(df):
        return None
    names = tuple(df.columns)
    if (
        any(type(c) is not str for c in names)
        or len(set(names)) != len(names)
        or df.columns.name is not None
        or df.columns.dtype != _NAMES_DTYPE
        or df.index.name is not None
        or df.attrs
        or not df.flags.allows_duplicate_labels
    ):
        return None
    arrays = _frames.stored_arrays(df)
    if arrays is None or not all(_rebuilt_as_is(a) for a in arrays):
        return None
    return Packed(names, arrays)


def _rebuilt_as_is(a: Any) -> bool:
    """Whether :func:`~nbprof.trace.model.frame_from_arrays` makes this stored array the
    same column again: NumPy numbers, booleans and objects, and pandas' text arrays (what
    the analysis' frames hold); dates, categories and the rest are sent as pandas does."""
    if type(a) is np.ndarray:
        return a.ndim == 1 and a.dtype.kind in "biufcO"
    return isinstance(getattr(a, "dtype", None), pd.StringDtype)


class PackedWhenSent:
    """A mixin for a dataclass whose frame fields (named in ``_SENT_FRAMES``; a field may
    also be a dict of frames) are pickled as :class:`Packed` and made into frames again on
    first read, one field at a time."""

    _SENT_FRAMES: tuple[str, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        packed: dict[str, Any] = dict(state.pop(_PACKED, None) or {})
        for name in self._SENT_FRAMES:
            if name not in state:
                continue
            value = state[name]
            if isinstance(value, dict):
                parts = {k: pack(v) for k, v in value.items()}
                if all(p is not None for p in parts.values()):
                    packed[name] = parts
                    del state[name]
            else:
                p = pack(value)
                if p is not None:
                    packed[name] = p
                    del state[name]
        if packed:
            state[_PACKED] = packed
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    if not TYPE_CHECKING:  # hidden from mypy, which would take any attribute name then

        def __getattr__(self, name: str) -> Any:
            # Only called for what the instance does not hold: a field still packed.
            packed = self.__dict__.get(_PACKED)
            if not packed or name not in packed:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            p = packed[name]
            value = {k: v.frame() for k, v in p.items()} if isinstance(p, dict) else p.frame()
            # Two threads reading it at once both build it: equal frames, one kept.
            self.__dict__[name] = value
            packed.pop(name, None)
            return value
