"""nbprof's one accelerator, the C extension ``nbprof.trace._accel``, behind one interface.

It reads a piece of a trace's event array straight into :class:`EventColumns`
(:func:`events`), the keys the tables need from the events' ``args`` (:func:`fields`),
raw JSON values as dictionary-encoded text (:func:`texts`), and nests CPU ops per thread
(:func:`nest`, :func:`innermost`). Each reads only text (or rows) it reads exactly as
the pure-Python path does; for anything else it answers None and the caller reads that
input the pure way, so tables and error messages never depend on which ran. Where a piece
is left to the pure path is logged (debug); the piece is read there at once.

The extension is optional (an install without a C compiler): then the first trace read
logs one WARNING saying so and how much slower the pure path is, and everything is read
in pure Python. ``NBPROF_ACCEL=0`` turns it off on purpose (to compare the two paths).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import numpy as np

from nbprof.trace.events import ArgSpans, EventColumns
from nbprof.trace.text import Text

logger = logging.getLogger(__name__)

try:
    from nbprof.trace import _accel as _accel
except ImportError:  # built without a C compiler: the pure path reads everything
    _accel = None  # type: ignore[assignment]

#: ``NBPROF_ACCEL=0`` turns the accelerator off.
ENV = "NBPROF_ACCEL"
#: How much longer the pure path takes to load and analyse a trace, measured side by side
#: by benchmarks/bench_load.py (benchmarks/RESULTS.md, "Trace load and analysis", the
#: ``pure`` contender): 2.12x the accelerated time at 2.16M events and 1.81x at 216k
#: (medians of the same run).
PURE_SLOWDOWN = 2.1

_said = False


def available() -> bool:
    """Whether the accelerator runs: it is built and not turned off. The first call where it
    is missing logs the one warning."""
    if os.environ.get(ENV, "1").strip() == "0":
        _say(logging.INFO, "turned off (NBPROF_ACCEL=0)")
        return False
    if _accel is None:
        _say(logging.WARNING, "not built (nbprof was installed without a C compiler)")
        return False
    return True


def _say(level: int, why: str) -> None:
    global _said
    if not _said:
        _said = True
        logger.log(
            level,
            "nbprof's C accelerator is %s: traces are read in pure Python, about %.1fx as "
            "slow; the results are the same (reinstall nbprof where a C compiler is found "
            "to build it)",
            why,
            PURE_SLOWDOWN,
        )


def _unescape(quoted: bytes) -> Any:
    return msgspec.json.decode(quoted)


def events(
    data: bytes | bytearray | memoryview,
    span: tuple[int, int],
    cat_codes: dict[bytes, int],
    phase_codes: dict[bytes, int],
) -> EventColumns | None:
    """The events of ``data[span]`` as columns; None where the accelerator leaves this
    text to the pure path."""
    assert _accel is not None
    got = _accel.scan(data, span[0], span[1], cat_codes, phase_codes, _unescape)
    if got is None:
        return None
    codes, name, names, pid, tid, fid, ts, dur, a_start, a_stop, texts = got
    columns = EventColumns(
        codes=np.frombuffer(codes, np.uint8),
        name=Text(np.frombuffer(name, np.int32), names),
        pid=np.frombuffer(pid, np.int64),
        tid=np.frombuffer(tid, np.int64),
        id=np.frombuffer(fid, np.int64),
        ts=np.frombuffer(ts, np.int64),
        dur=np.frombuffer(dur, np.float64),
        args=ArgSpans(data, np.frombuffer(a_start, np.int64), np.frombuffer(a_stop, np.int64)),
    )
    for i, which, text in texts:
        (columns.pid_text, columns.tid_text, columns.id_text)[which][i] = text
    return columns


def _bounds(spans: ArgSpans) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(spans.start, np.int64), np.ascontiguousarray(spans.stop, np.int64)


def join(spans: ArgSpans) -> bytes:
    """The JSON array of these values, absent ones as ``{}`` (as the structs hold them)."""
    assert _accel is not None  # spans come only from the accelerator
    return _accel.join(spans.data, *_bounds(spans))


def texts(spans: ArgSpans) -> Text:
    """The raw text of each span ("" where absent), dictionary-encoded."""
    assert _accel is not None
    codes, distinct = _accel.texts(spans.data, *_bounds(spans))
    return Text(np.frombuffer(codes, np.int32), distinct)


# -- args fields -----------------------------------------------------------------------------

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
    def device(self, attr: str, pid: np.ndarray) -> Text: ...
    def stream(self, attr: str, tid: np.ndarray, ids: Any) -> np.ndarray: ...
    def memcpy_kind(self, attr: str, kinds: frozenset[str]) -> Text: ...
    def raw_texts(self, attr: str) -> Text: ...


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


def fields(spans: ArgSpans, spec: dict[str, Any]) -> ArgColumns | None:
    """The fields ``spec`` (see :func:`spec_of`) of these args as columns; None where the
    accelerator cannot read them all as the struct would (the caller decodes structs)."""
    assert _accel is not None
    attrs = list(spec)
    got = _accel.fields(spans.data, *_bounds(spans), tuple(spec[a][0] for a in attrs))
    if got is None:
        return None
    read: dict[str, _Field] = {}
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
        read[attr] = f
    return _Scanned(spans.data, read)


class _Scanned:
    """:class:`ArgColumns` from the accelerator's fields."""

    def __init__(self, data: Any, read: dict[str, _Field]) -> None:
        self._data = data
        self._fields = read

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

    def device(self, attr: str, pid: np.ndarray) -> Text:
        # As tables._device_col: the device's number, else the event's pid, as text.
        f = self._fields[attr]
        keys = np.where(f.tags == INT, f.ival, pid)
        uniq, inverse = np.unique(keys, return_inverse=True)
        return Text(inverse.reshape(-1).astype(np.int32), [str(k) for k in uniq.tolist()])

    def stream(self, attr: str, tid: np.ndarray, ids: Any) -> np.ndarray:
        # As tables._stream_col: the stream's number (inside +-2**62, as every int read
        # here is), else the event's tid.
        f = self._fields[attr]
        return np.where(f.tags == INT, f.ival, tid).astype(np.int64)

    def memcpy_kind(self, attr: str, kinds: frozenset[str]) -> Text:
        # Only numbers or nothing here (see KIND_FIELD): no direction given as text.
        return Text.repeat("", len(self._fields[attr].tags))

    def raw_texts(self, attr: str) -> Text:
        f = self._fields[attr]
        return texts(ArgSpans(self._data, f.start, f.stop))


# -- the ops' nesting walk (see nbprof.trace.links) ----------------------------------------


def walks(*arrays: np.ndarray) -> bool:
    """Whether the accelerator may walk these: it runs, and they hold int64 ids and float64
    times (other types are numpy's to compare)."""
    return (
        _accel is not None
        and os.environ.get(ENV, "1").strip() != "0"
        and all(a.dtype == (np.int64 if a.dtype.kind in "iu" else np.float64) for a in arrays)
    )


def _c(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a)


def nest(
    pid: np.ndarray, tid: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(depth, parent) of ops sorted by start (see ``links.nest``); None where the walk
    does not answer."""
    assert _accel is not None
    depth = np.empty(len(s), np.int32)
    parent = np.empty(len(s), np.int64)
    return (depth, parent) if _accel.nest(_c(pid), _c(tid), _c(s), _c(e), depth, parent) else None


def innermost(
    pid: np.ndarray,
    tid: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    parent: np.ndarray,
    q_pid: np.ndarray,
    q_tid: np.ndarray,
    q_t: np.ndarray,
) -> np.ndarray | None:
    """Each query's innermost op (see ``links.innermost_ops``); None where the walk does not
    answer."""
    assert _accel is not None
    out = np.empty(len(q_t), np.int64)
    got = _accel.innermost(
        _c(pid), _c(tid), _c(s), _c(e), _c(parent), _c(q_pid), _c(q_tid), _c(q_t), out
    )
    return out if got else None
