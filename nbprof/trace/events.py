"""A run of trace events as columns: what the tables read of each event.

Both ways of reading events give this, the same columns for the same text: the
accelerator (:mod:`nbprof.trace.accel`) and the pure-Python path
(:func:`nbprof.trace.decode.events`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import numpy as np

from nbprof.trace.text import Text

#: What the pid, tid or id column holds for an id written as text that is not a number.
TEXT_ID = np.iinfo(np.int64).min


@dataclass
class ArgSpans:
    """Events' raw ``args``, as spans of the bytes they were read from (a negative start:
    no ``args``)."""

    data: bytes | bytearray | memoryview
    start: np.ndarray
    stop: np.ndarray

    def __len__(self) -> int:
        return len(self.start)

    def take(self, pos: np.ndarray | slice) -> ArgSpans:
        return ArgSpans(self.data, self.start[pos], self.stop[pos])


#: Events' raw ``args``: spans (the accelerator's), or the msgspec slices the structs hold.
Args = ArgSpans | list[msgspec.Raw]


@dataclass
class EventColumns:
    """Events as columns. ``codes`` packs each event's category number and phase (as
    ``tables.sort_events`` reads them); ``ts`` is in ns (``NO_TS`` where absent)."""

    codes: np.ndarray
    name: Text
    pid: np.ndarray
    tid: np.ndarray
    #: A flow event's ``id`` (-1 when absent or null).
    id: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    args: Args
    #: Ids written as text that is not a number, by event: their column holds
    #: :data:`TEXT_ID` there. The tables give them codes (in order of first use).
    pid_text: dict[int, str] = field(default_factory=dict)
    tid_text: dict[int, str] = field(default_factory=dict)
    id_text: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.codes)

    def slice(self, start: int, stop: int) -> EventColumns:
        """Events ``start .. stop`` of these."""
        s = slice(start, stop)

        def texts(d: dict[int, str]) -> dict[int, str]:
            return {i - start: t for i, t in d.items() if start <= i < stop}

        args = self.args
        return EventColumns(
            self.codes[s],
            self.name.take(s),
            self.pid[s],
            self.tid[s],
            self.id[s],
            self.ts[s],
            self.dur[s],
            args.take(s) if isinstance(args, ArgSpans) else args[s],
            texts(self.pid_text),
            texts(self.tid_text),
            texts(self.id_text),
        )

    def ids(self, which: str, idx: np.ndarray) -> list[int | str]:
        """The ids ``idx`` of column ``which`` (pid, tid, id) as written: numbers, and text."""
        column: np.ndarray = getattr(self, which)
        texts: dict[int, str] = getattr(self, f"{which}_text")
        values: list[int | str] = column[idx].tolist()
        for j in np.flatnonzero(column[idx] == TEXT_ID).tolist():
            values[j] = texts[int(idx[j])]
        return values
