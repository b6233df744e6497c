"""A piece of a trace's event array read straight into columns by the C scanner.

The pure-Python path decodes each event into a msgspec struct, then gathers the structs'
fields into columns: two passes, and a Python object per event in between. The scanner
(``_scan.c``) reads the JSON once into those columns. It takes only text that it reads
exactly as the Python path does (numeric ids, plain keys, timestamps written as digits
with an optional fraction, valid JSON); for anything else it answers None and the Python
path reads the piece, so tables and error messages do not depend on which path ran. The
extension is optional: an install without a C compiler reads every piece in Python.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

logger = logging.getLogger(__name__)

try:
    from nbprof.trace import _scan as _scan
except ImportError:  # built without a C compiler: the Python path reads everything
    _scan = None  # type: ignore[assignment]
    logger.debug("nbprof.trace._scan is not built; trace events are decoded in Python")

#: ``NBPROF_SCAN=0`` turns the scanner off (to compare the two paths, or to rule it out).
ENV = "NBPROF_SCAN"

#: What the scanner reads (any buffer; shared memory in a helper process).
Buffer = bytes | bytearray | memoryview | mmap.mmap

#: What the scanner puts in the pid or tid column for text that is not a number.
TEXT_ID = np.iinfo(np.int64).min


def available() -> bool:
    """Whether pieces are scanned in C: the extension is built and not turned off."""
    return _scan is not None and os.environ.get(ENV, "1") != "0"


@dataclass
class ArgSpans:
    """Events' raw ``args``, as spans of the file's bytes (a negative start: no ``args``)."""

    data: Buffer
    start: np.ndarray
    stop: np.ndarray

    def __len__(self) -> int:
        return len(self.start)

    def take(self, pos: np.ndarray | slice) -> ArgSpans:
        return ArgSpans(self.data, self.start[pos], self.stop[pos])

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The starts and stops as the scanner's functions take them (contiguous int64)."""
        return (
            np.ascontiguousarray(self.start, np.int64),
            np.ascontiguousarray(self.stop, np.int64),
        )

    def joined(self) -> bytes:
        """The JSON array of these values, absent ones as ``{}`` (as the structs hold them)."""
        assert _scan is not None  # spans come only from the scanner
        return _scan.join(self.data, *self.bounds())


@dataclass
class EventColumns:
    """A run of events as columns: what the tables read of each event."""

    #: Category number plus phase code (as ``tables.sort_events`` packs them).
    codes: np.ndarray
    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    dur: np.ndarray
    args: ArgSpans
    #: Ids written as text that is not a number, by event: ``pid``/``tid`` hold
    #: :data:`TEXT_ID` there. The tables give them codes (in order of first use).
    pid_text: dict[int, str] = field(default_factory=dict)
    tid_text: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, s: slice) -> EventColumns:
        first, stop, _ = s.indices(len(self.codes))
        return EventColumns(
            self.codes[s],
            self.name[s],
            self.pid[s],
            self.tid[s],
            self.dur[s],
            self.args.take(s),
            {i - first: t for i, t in self.pid_text.items() if first <= i < stop},
            {i - first: t for i, t in self.tid_text.items() if first <= i < stop},
        )

    def ids(self, column: np.ndarray, texts: dict[int, str], idx: np.ndarray) -> list[int | str]:
        """The ids ``column[idx]`` (this run's pid or tid) as written: numbers, and text."""
        values: list[int | str] = column[idx].tolist()
        for j in np.flatnonzero(column[idx] == TEXT_ID).tolist():
            values[j] = texts[int(idx[j])]
        return values


def _unescape(quoted: bytes) -> Any:
    return msgspec.json.decode(quoted)


def scan_piece(
    data: Buffer,
    span: tuple[int, int],
    cat_codes: dict[bytes, int],
    phase_codes: dict[bytes, int],
) -> tuple[EventColumns, np.ndarray] | None:
    """The events of ``data[span]`` as columns, and their timestamps in ns (``NO_TS``
    where absent, as ``decode.decode_piece`` gives them); None when the scanner is not
    available or leaves this text to the Python path."""
    if not available():
        return None
    got = _scan.scan(data, span[0], span[1], cat_codes, phase_codes, _unescape)
    if got is None:
        return None
    codes, names, pid, tid, ts, dur, a_start, a_stop, texts = got
    name = np.empty(len(names), dtype=object)
    name[:] = names
    columns = EventColumns(
        codes=np.frombuffer(codes, np.uint8),
        name=name,
        pid=np.frombuffer(pid, np.int64),
        tid=np.frombuffer(tid, np.int64),
        dur=np.frombuffer(dur, np.float64),
        args=ArgSpans(data, np.frombuffer(a_start, np.int64), np.frombuffer(a_stop, np.int64)),
    )
    for i, which, text in texts:
        (columns.tid_text if which else columns.pid_text)[i] = text
    return columns, np.frombuffer(ts, np.int64)
