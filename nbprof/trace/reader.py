"""``read(path)``: a trace file or a folder of per-rank files -> :class:`Trace`.

One path: source (:mod:`nbprof.trace.io`, plain or gzip, a piece at a time) -> pieces of
whole events (:mod:`nbprof.trace.pieces`) -> event columns (the accelerator,
:mod:`nbprof.trace.accel`, else the pure path, :func:`nbprof.trace.decode.events`) ->
tables (:mod:`nbprof.trace.tables`, links by :mod:`nbprof.trace.links`). This module only
orchestrates: files, progress, the table cache, and a folder's ranks joined into one
trace.

What is an error (:class:`nbprof.TraceError`, naming the file and the reason) and what
is skipped with a note is written once, in docs/errors.md.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from nbprof import _collector, _memory
from nbprof.errors import TraceError, plain_text
from nbprof.trace import accel, io, pieces
from nbprof.trace import cache as table_cache
from nbprof.trace import decode as dec
from nbprof.trace import tables as tb
from nbprof.trace.io import trace_files
from nbprof.trace.model import TABLES, Trace, empty_table

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)

#: Steps per file besides its pieces: read, skimmed, tables, links, frames.
_STAGES_PER_FILE = 5
#: Events tabulated at once from a whole file's array (read whole, not cut into pieces): 8192
#: loaded the 216k-event benchmark trace a little faster than 16384 or more, in less memory.
CHUNK = dec.CHUNK
#: A piece of a file's event array holds about CHUNK events of this size (a Kineto event,
#: as written, is 150 to 400 bytes).
PIECE_BYTES = CHUNK * 256


#: Seconds a load with ``progress=None`` runs before its bar appears.
BAR_DELAY = 1.0


class _Progress:
    """A tqdm.auto bar over load stages; with ``progress=None`` it appears only after
    :data:`BAR_DELAY` seconds, and tqdm is imported only then: ``tqdm.auto`` brings in
    asyncio, about 35 ms, which is more than a small trace's whole load."""

    def __init__(self, total: int, progress: bool | None, desc: str) -> None:
        self._bar: Any = None
        self._total, self._done, self._desc = total, 0, desc
        #: When a bar that waits is to be asked for; None: no bar will be made (any more).
        self._due: float | None = None
        self._start = time.time()
        if progress is None:
            self._due = time.monotonic() + BAR_DELAY
        elif progress:
            self._make(forced=True)

    def _make(self, *, forced: bool) -> None:
        """The bar now: asked for (``progress=True``, kept on screen when the load ends), or
        due, and then only where it is seen."""
        self._due = None
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover - tqdm is a dependency
            return
        if not forced and not _bar_is_seen(tqdm):
            # A text bar written to a file or a pipe (a log, a CI job) only garbles what is
            # read there, e.g. the one-line error that follows it.
            return
        self._bar = tqdm(
            total=self._total,
            initial=self._done,
            desc=self._desc,
            unit="step",
            leave=forced,
            bar_format="{desc}: {bar} {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
        )
        self._bar.start_t = self._start  # its elapsed time counts from the load's start

    def step(self, what: str) -> None:
        if self._due is not None and time.monotonic() >= self._due:
            self._make(forced=False)
        self._done += 1
        if self._bar is not None:
            self._bar.set_postfix_str(what, refresh=False)
            self._bar.update(1)

    def grow(self, n: int) -> None:
        """Add ``n`` steps (a file's decode chunks, known once it has been skimmed)."""
        self._total += n
        if self._bar is not None and n:
            # No refresh here: a refresh between steps would redraw the bar for nothing.
            self._bar.total += n

    def __enter__(self) -> _Progress:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb_: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()


def _bar_is_seen(tqdm: type) -> bool:
    """Whether a progress bar would be seen: a notebook widget, or text on a terminal."""
    if any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__):
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


@dataclass
class _Rank:
    """One file's tables (times relative to ``first_ns``, its earliest event)."""

    rank: int
    first_ns: int
    wall_clock: bool
    #: Per table, its columns (text dictionary-encoded).
    tables: dict[str, tb.Columns]
    event_count: int
    metadata: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: The rank the file itself names (``distributedInfo``), None when it names none.
    file_rank: int | None = None

    def rows(self, table: str) -> int:
        return len(self.tables[table]["rank"])


def read(
    path: str | os.PathLike[str], *, progress: bool | None = None, cache: bool = False
) -> Trace:
    """Read a Kineto / Chrome trace: ``.json``, ``.json.gz``, or a folder of per-rank files.

    ``progress``: ``None`` shows a bar only when the load takes more than about a second;
    ``True``/``False`` force it on or off. ``cache``: reuse the tables of a file read
    before, and keep those of a file read now (see :mod:`nbprof.trace.cache`); the tables
    are the same either way. Raises :class:`nbprof.TraceError` on bad input.
    """
    # The load allocates millions of objects and frees almost none until it ends, so the
    # cyclic collector would run again and again over a growing heap for nothing (about a
    # tenth of the load time); it is back on, as it was, once the tables are built.
    sizes: dict[str, int] = {}
    free = _memory.free_bytes()
    with _collector.paused():
        try:
            return _read(Path(path), progress, sizes, cache)
        except MemoryError as e:
            # Out of memory under a process or container limit (beyond one, Linux's OOM
            # killer ends the process instead; the source refuses what clearly cannot fit
            # beforehand).
            where, size = next(reversed(sizes.items()), (str(path), 0))
            size = size or _memory.size_on_disk(where)
            raise TraceError(where, _memory.not_enough(size, free, detail=str(e))) from None


def _read(p: Path, progress: bool | None, sizes: dict[str, int], cache: bool) -> Trace:
    folder = p.is_dir()
    files = trace_files(p) if folder else [p]
    ranks: list[_Rank] = []
    with _Progress(len(files) * _STAGES_PER_FILE, progress, f"loading {p.name}") as bar:
        for order, f in enumerate(files):
            key = table_cache.Key.of(f) if cache else None
            got = _cached_rank(key) if key is not None else None
            if got is not None:
                for _ in range(_STAGES_PER_FILE):
                    bar.step("cached")
            else:
                got = _read_file(f, bar, sizes)
                if key is not None:
                    # Before the ranks are joined, which shifts their times.
                    _store_rank(key, got)
            rank = got.file_rank if got.file_rank is not None else (order if folder else 0)
            if rank != got.rank:
                _set_rank(got, rank)
            ranks.append(got)
    notes: list[str] = []
    if folder:
        seen = [r.rank for r in ranks]
        if len(set(seen)) != len(seen):
            notes.append(
                "rank numbers in distributedInfo repeat across files; ranks are numbered "
                "by the order of the sorted file names instead"
            )
            for i, r in enumerate(ranks):
                _set_rank(r, i)
    return _assemble(str(p), ranks, folder, notes)


def _read_file(f: Path, bar: _Progress, sizes: dict[str, int]) -> _Rank:
    """One file's tables: streamed where it is laid out as Kineto writes it, else (or
    where the stream does not end as Kineto writes a file, or fails) read whole."""
    path = str(f)
    src = io.open_source(f)
    try:
        head = bytearray()
        for piece in src.pieces:
            head += piece
            if len(head) >= pieces.HEAD_BYTES:
                break
        lay = pieces.layout(head)
        if lay is not None:
            bar.step("read")
            stream = pieces.Stream(src, lay, head, PIECE_BYTES)
            del head
            try:
                return _rank(stream, lambda: stream.top, path, bar, sizes)
            except (pieces.Unstreamable, dec.Malformed, TraceError) as e:
                # An error too: the whole file's JSON is checked before its events are, so
                # read whole, an event's error after it gives way to broken JSON after it.
                logger.debug("%s: read whole (%s)", plain_text(path), e)
                src.close()
                src = io.open_source(f)
                head = bytearray()
            bar.grow(1)  # the whole reading steps past "read" again
        data = src.rest_into(head)
    finally:
        src.close()
    sizes[path] = len(data)
    bar.step("read")
    cut, top = pieces.whole(data, path, PIECE_BYTES)
    try:
        return _rank(_Whole(cut), lambda: top, path, bar, sizes)
    except dec.Malformed as e:  # JSON checked whole: not expected, but never a traceback
        raise TraceError(path, f"not valid JSON ({e})") from None


@dataclass
class _Whole:
    """A whole file's pieces, as a :class:`pieces.Stream` hands them out."""

    cut: list[pieces.Piece]
    _rest: bool = False

    def widen(self) -> None:
        self._rest = True

    def __iter__(self) -> Iterator[pieces.Piece]:
        for piece in self.cut:
            yield piece
            if self._rest:
                # The rest of the array as one piece, from the piece that was not whole.
                yield pieces.Piece(piece.data, (piece.span[0], self.cut[-1].span[1]), True)
                return


def _rank(
    cut: pieces.Stream | _Whole,
    top: Callable[[], pieces.Top | None],
    path: str,
    bar: _Progress,
    sizes: dict[str, int],
) -> _Rank:
    """A file's rank from its pieces: each read into columns and tabulated at once (its
    bytes are then given up), the rank's tables made once every piece is read."""
    parts = tb.Parts()
    ids = tb.Ids()
    mode = dec.TsMode()
    fast = accel.available()
    left = 0
    for piece in cut:
        bar.grow(1)
        try:
            left += _tabulate(parts, piece, fast, ids, mode, path)
        except dec.Malformed:
            if piece.whole:
                raise
            # A cut at a deeper level of an event: the rest of the array is one piece.
            cut.widen()
        bar.step("decoding")
    if left:
        logger.debug("%s: %d pieces read by the pure path", plain_text(path), left)
    end = top()
    assert end is not None
    sizes[path] = end.json_bytes
    bar.step("skimmed")
    meta = end.meta
    built = tb.finish(parts, meta, ids, meta.rank if meta.rank is not None else 0, path, bar.step)
    return _Rank(
        rank=meta.rank if meta.rank is not None else 0,
        first_ns=built.first_ns,
        wall_clock=built.wall_clock,
        tables=built.tables,
        event_count=built.event_count,
        metadata=built.metadata,
        notes=built.notes,
        file_rank=meta.rank,
    )


def _tabulate(
    parts: tb.Parts, piece: pieces.Piece, fast: bool, ids: tb.Ids, mode: dec.TsMode, path: str
) -> int:
    """Tabulate one piece: read by the accelerator, else (where it leaves the piece) by the
    pure path; 1 when the pure path read it. A whole file's array is tabulated a chunk of
    events at a time, whichever reads it, so that its rows come out in the same order."""
    batch = CHUNK if piece.whole else None
    got = accel.events(piece.data, piece.span, tb.CAT_CODES, tb.PHASE_CODES) if fast else None
    offset = parts.events
    if got is not None:
        step = batch or max(len(got), 1)
        for at in range(0, len(got), step):
            run = got if step >= len(got) else got.slice(at, at + step)
            tb.tabulate(parts, run, offset + at, ids, path)
        return 0
    runs = dec.events(piece.data, piece.span, offset, path, mode, tb.CAT_NO, tb.PHASE_CODE, batch)
    for run in runs:
        tb.tabulate(parts, run, parts.events, ids, path)
    return 1 if fast else 0


def _cached_rank(key: table_cache.Key) -> _Rank | None:
    got = table_cache.load(key)
    if got is None:
        return None
    frames, info = got
    try:
        if not -(2**31) <= int(info["rank"]) < 2**31:  # the rank column is int32
            raise ValueError(f"rank {info['rank']} out of range")
        return _Rank(
            rank=int(info["rank"]),
            first_ns=int(info["first_ns"]),
            wall_clock=bool(info["wall_clock"]),
            tables={t: tb.columns_of(f) for t, f in frames.items()},
            event_count=int(info["event_count"]),
            metadata=dict(info["metadata"]),
            notes=[str(n) for n in info["notes"]],
            file_rank=None if info["file_rank"] is None else int(info["file_rank"]),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        logger.warning(
            "ignoring a table cache with unreadable facts (%s); reading the trace", plain_text(e)
        )
        return None


def _store_rank(key: table_cache.Key, r: _Rank) -> None:
    info = {
        "rank": r.rank,
        "first_ns": r.first_ns,
        "wall_clock": r.wall_clock,
        "event_count": r.event_count,
        "metadata": r.metadata,
        "notes": r.notes,
        "file_rank": r.file_rank,
    }
    table_cache.store(key, {t: tb.frame_of(t, c) for t, c in r.tables.items()}, info)


def _set_rank(r: _Rank, rank: int) -> None:
    r.rank = rank
    for cols in r.tables.values():
        if "rank" in cols:
            cols["rank"] = np.full(len(cols["rank"]), rank, np.int32)


def _assemble(source: str, ranks: list[_Rank], folder: bool, notes: list[str]) -> Trace:
    origin = min(r.first_ns for r in ranks)
    wall = all(r.wall_clock for r in ranks)
    # Per table, each rank's rows with the shift of their times and of their op rows.
    out: dict[str, list[tb.RankPart]] = {t: [] for t in TABLES}
    op_offset = 0
    for r in ranks:
        shift = (r.first_ns - origin) / 1000.0
        for table, cols in r.tables.items():
            if r.rows(table):
                out[table].append((cols, shift, op_offset))
        op_offset += r.rows("cpu_ops")
        prefix = f"rank {r.rank}: " if folder and len(ranks) > 1 else ""
        notes.extend(prefix + n for n in r.notes)
    built: dict[str, pd.DataFrame] = {}
    for table, parts in out.items():
        if not parts:
            built[table] = empty_table(table)
        elif len(parts) == 1 and not parts[0][1] and not parts[0][2]:
            built[table] = tb.frame_of(table, parts[0][0])
        else:
            built[table] = tb.joined(table, parts)
    metadata: dict[Any, Any] = (  # by rank for a folder
        {r.rank: r.metadata for r in ranks} if folder else dict(ranks[0].metadata)
    )
    if built["kernels"].empty:
        if not built["counters"].empty:
            notes.append(
                "no kernel events in this trace: it was recorded with the CUPTI range "
                "profiler, so it holds per-kernel hardware counters (see `counters`) "
                "instead of a kernel timeline"
            )
        else:
            notes.append("no kernel events in this trace (CPU-only, or GPU activity not recorded)")
    return Trace(
        source=source,
        event_count=sum(r.event_count for r in ranks),
        origin_ns=origin if wall else None,
        metadata=metadata,
        notes=notes,
        **built,
    )
