"""The columns tables read from events' ``args``, straight from the C scanner's fields.

The Python path decodes each event's ``args`` into a msgspec struct, then gathers a field
at a time into columns. For scanned events, the scanner (``_scan.fields``) reads the keys
a table needs from every ``args`` object at once, into numbers and tags saying what each
key held; the columns are made from those with numpy. A field holding anything the struct
would not take as it is read here (text where a number is due, a huge integer, a float
that is not finite) makes :func:`read` answer None, and the table decodes the structs
instead, so the columns, and any error, are the Python path's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import numpy as np

from nbprof.trace.scan import ArgSpans, _scan

# What a key held (the scanner's tags).
ABSENT, INT, FLOAT, STR, NULL, BOOL, INTS, ARRAY, OBJECT, OTHER = range(10)

#: The tags a field of each kind is read from here.
INT_FIELD = frozenset({ABSENT, NULL, INT})
NUMBER_FIELD = frozenset({ABSENT, NULL, INT, FLOAT})
DIMS_FIELD = frozenset({ABSENT, NULL, INT, INTS})
#: A field that may be text (ROCm's memcpy direction): text is left to the struct, which
#: checks its UTF-8.
KIND_FIELD = frozenset({ABSENT, NULL, INT})
RAW_FIELD = frozenset(range(10))

_LIMIT = 2**62
#: Each kind's tags as a mask indexed by tag: one lookup per value.
_MASKS = {
    kind: np.isin(np.arange(256), list(kind))
    for kind in (INT_FIELD, NUMBER_FIELD, DIMS_FIELD, KIND_FIELD, RAW_FIELD)
}


class ArgColumns(Protocol):
    """What a table reads of its events' args, a field (struct attribute) at a time."""

    def num(self, attr: str, dtype: type, missing: float) -> np.ndarray: ...
    def dims(self, attr: str) -> np.ndarray: ...
    def device(self, attr: str, pid: np.ndarray) -> np.ndarray: ...
    def stream(self, attr: str, tid: np.ndarray, ids: Any) -> np.ndarray: ...
    def memcpy_kind(self, attr: str, kinds: frozenset[str]) -> list[str]: ...
    def raw_texts(self, attr: str) -> np.ndarray: ...


@dataclass
class _Field:
    tags: np.ndarray
    num: np.ndarray
    ival: np.ndarray
    start: np.ndarray
    stop: np.ndarray


def spec_of(kind: type[msgspec.Struct], tags: Mapping[str, frozenset[int]]) -> dict[str, Any]:
    """Each struct attribute's key in the JSON and the tags it is read from here."""
    names = {f.name: f.encode_name for f in msgspec.structs.fields(kind)}
    return {attr: (names[attr].encode(), allowed) for attr, allowed in tags.items()}


def read(spans: ArgSpans, spec: dict[str, Any]) -> ArgColumns | None:
    """The fields ``spec`` (see :func:`spec_of`) of these args as columns; None when the
    scanner cannot read them all as the struct would (the caller decodes structs then)."""
    if _scan is None:
        return None
    attrs = list(spec)
    got = _scan.fields(spans.data, *spans.bounds(), tuple(spec[a][0] for a in attrs))
    if got is None:
        return None
    fields: dict[str, _Field] = {}
    for attr, (tags, num, ival, start, stop) in zip(attrs, got, strict=True):
        f = _Field(
            np.frombuffer(tags, np.uint8),
            np.frombuffer(num, np.float64),
            np.frombuffer(ival, np.int64),
            np.frombuffer(start, np.int64),
            np.frombuffer(stop, np.int64),
        )
        allowed = spec[attr][1]
        if allowed is not RAW_FIELD and not _MASKS[allowed][f.tags].all():
            return None
        fields[attr] = f
    return _Scanned(spans.data, fields)


class _Scanned:
    """:class:`ArgColumns` from the scanner's fields."""

    def __init__(self, data: Any, fields: dict[str, _Field]) -> None:
        self._data = data
        self._fields = fields

    def num(self, attr: str, dtype: type, missing: float) -> np.ndarray:
        # As tables._num: a number as a float (an int converted as Python converts it),
        # unknown where absent or null, and where not finite or beyond 2**62.
        f = self._fields[attr]
        out = np.where((f.tags == INT) | (f.tags == FLOAT), f.num, np.nan)
        bad = ~np.isfinite(out) | (np.abs(out) > float(_LIMIT))
        out[bad] = missing
        return out.astype(np.int64) if dtype is np.int64 else out

    def dims(self, attr: str) -> np.ndarray:
        # As tables._product of each: an array's product (the scanner's, -1 when empty or
        # out of range), an int itself (the scanner's ints, of at most 18 digits, are all
        # inside +-2**62), else -1.
        f = self._fields[attr]
        return np.where((f.tags == INTS) | (f.tags == INT), f.ival, -1).astype(np.int64)

    def device(self, attr: str, pid: np.ndarray) -> np.ndarray:
        # As tables._device_col: the device's number, else the event's pid, as text; one
        # str per distinct device.
        f = self._fields[attr]
        keys = np.where(f.tags == INT, f.ival, pid)
        uniq, inverse = np.unique(keys, return_inverse=True)
        texts = np.empty(len(uniq), dtype=object)
        texts[:] = [str(k) for k in uniq.tolist()]
        return texts[inverse.reshape(-1)]

    def stream(self, attr: str, tid: np.ndarray, ids: Any) -> np.ndarray:
        # As tables._stream_col: the stream's number (inside +-2**62, as every int read
        # here is), else the event's tid.
        f = self._fields[attr]
        return np.where(f.tags == INT, f.ival, tid).astype(np.int64)

    def memcpy_kind(self, attr: str, kinds: frozenset[str]) -> list[str]:
        # Only numbers or nothing here (see KIND_FIELD): no direction given as text.
        return [""] * len(self._fields[attr].tags)

    def raw_texts(self, attr: str) -> np.ndarray:
        assert _scan is not None
        f = self._fields[attr]
        texts = _scan.texts(self._data, f.start, f.stop)
        out = np.empty(len(texts), dtype=object)
        out[:] = texts
        return out
