"""``read(path)``: a trace file or a folder of per-rank files -> :class:`Trace`.

What is an error (:class:`nbprof.TraceError`, naming the file and the reason) and what
is skipped with a note is written once, in docs/errors.md.
"""

from __future__ import annotations

import logging
import mmap
import os
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from nbprof import _collector, _memory
from nbprof.errors import TraceError, plain_text
from nbprof.trace import cache as table_cache
from nbprof.trace import decode as dec
from nbprof.trace import forked, io, links, scan, stream
from nbprof.trace import helpers as helpers_mod
from nbprof.trace import tables as tb
from nbprof.trace.io import read_bytes, trace_files
from nbprof.trace.model import TABLES, Trace, empty_table
from nbprof.trace.scan import EventColumns

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)

#: Timestamps at or above this many ns are wall-clock (after 2001), not relative.
_EPOCH_NS = 10**18
#: Steps per file besides its decode chunks: read, skim, tables, links, frames.
_STAGES_PER_FILE = 5


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
    """One file's tables, times relative to ``first_ns`` (its earliest event)."""

    rank: int
    first_ns: int
    wall_clock: bool
    #: Per table: its columns (a file just read) or its frame (one from the cache). The
    #: frames of a file read now are made only if asked for: the job's tables join the
    #: ranks' columns directly.
    tables: dict[str, tb.Columns | pd.DataFrame]
    event_count: int
    metadata: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: The rank the file itself names (``distributedInfo``), None when it names none.
    file_rank: int | None = None

    def frame(self, table: str) -> pd.DataFrame:
        return _as_frame(table, self.tables[table])

    def rows(self, table: str) -> int:
        got = self.tables[table]
        return len(got) if isinstance(got, pd.DataFrame) else len(got["rank"])


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
        except MemoryError:
            # Out of memory under a process or container limit (beyond one, Linux's OOM
            # killer ends the process instead; read_bytes refuses what clearly cannot fit
            # beforehand).
            where, size = next(reversed(sizes.items()), (str(path), 0))
            raise TraceError(where, _memory.not_enough(size, free)) from None


def _read(p: Path, progress: bool | None, sizes: dict[str, int], cache: bool) -> Trace:
    folder = p.is_dir()
    files = trace_files(p) if folder else [p]
    ranks: list[_Rank] = []
    with _Progress(len(files) * _STAGES_PER_FILE, progress, f"loading {p.name}") as bar:
        for order, f in enumerate(files):
            key = table_cache.Key.of(f) if cache else None
            cached = _cached_rank(key) if key is not None else None
            if cached is not None:
                rank = (
                    cached.file_rank if cached.file_rank is not None else (order if folder else 0)
                )
                if rank != cached.rank:
                    _set_rank(cached, rank)
                ranks.append(cached)
                for _ in range(_STAGES_PER_FILE):
                    bar.step("cached")
                continue
            got = _streamed(f, order if folder else 0, bar)
            if isinstance(got, tuple):
                streamed, sizes[str(f)] = got
                if key is not None:
                    _store_rank(key, streamed)
                ranks.append(streamed)
                continue
            data = read_bytes(f) if got is None else got
            sizes[str(f)] = len(data)
            bar.step("read")
            decoded = dec.decode_file(data, str(f), _piece_bytes())
            del data  # the decoded file keeps the bytes alive until its events are decoded
            bar.step("skimmed")
            rank = decoded.rank if decoded.rank is not None else (order if folder else 0)
            bar.grow(len(decoded.pieces) or -(-len(decoded.raw_events) // CHUNK))
            built = _build_rank(decoded, rank, str(f), bar.step)
            built.file_rank = decoded.rank
            del decoded
            if key is not None:
                # Before _assemble, which shifts times and renumbers ranks of these frames.
                _store_rank(key, built)
            ranks.append(built)
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


def _cached_rank(key: table_cache.Key) -> _Rank | None:
    got = table_cache.load(key)
    if got is None:
        return None
    frames, info = got
    try:
        return _Rank(
            rank=int(info["rank"]),
            first_ns=int(info["first_ns"]),
            wall_clock=bool(info["wall_clock"]),
            tables=dict(frames),
            event_count=int(info["event_count"]),
            metadata=dict(info["metadata"]),
            notes=[str(n) for n in info["notes"]],
            file_rank=None if info["file_rank"] is None else int(info["file_rank"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        logger.warning("ignoring a table cache with unreadable facts (%s); reading the trace", e)
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
    table_cache.store(key, {t: r.frame(t) for t in r.tables}, info)


def _set_rank(r: _Rank, rank: int) -> None:
    r.rank = rank
    for got in r.tables.values():
        if isinstance(got, pd.DataFrame):
            if "rank" in got:
                got["rank"] = np.int32(rank)
        elif "rank" in got:
            got["rank"] = np.full(len(got["rank"]), rank, np.int32)


def _assemble(source: str, ranks: list[_Rank], folder: bool, notes: list[str]) -> Trace:
    origin = min(r.first_ns for r in ranks)
    wall = all(r.wall_clock for r in ranks)
    # Per table, each rank's rows with the shift of their times and of their op rows.
    out: dict[str, list[_Part]] = {t: [] for t in TABLES}
    op_offset = 0
    for r in ranks:
        shift = (r.first_ns - origin) / 1000.0
        for table, got in r.tables.items():
            if r.rows(table):
                out[table].append((got, shift, op_offset))
        op_offset += r.rows("cpu_ops")
        prefix = f"rank {r.rank}: " if folder and len(ranks) > 1 else ""
        notes.extend(prefix + n for n in r.notes)
    built: dict[str, pd.DataFrame] = {}
    for table, parts in out.items():
        if not parts:
            built[table] = empty_table(table)
        elif len(parts) == 1 and not parts[0][1] and not parts[0][2]:
            got = parts[0][0]
            if isinstance(got, pd.DataFrame):  # from the cache
                built[table] = tb.typed(table, got)
            else:
                built[table] = tb.typed_frame(table, got)
        else:
            built[table] = _joined(table, parts)
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


#: One rank's rows of a table (columns or a frame), the shift of their times (µs) onto the
#: job's origin, and of their ``op_index`` onto the joined ``cpu_ops``.
_Part: TypeAlias = "tuple[tb.Columns | pd.DataFrame, float, int]"  # (pandas named lazily)


def _joined(table: str, parts: list[_Part]) -> pd.DataFrame:
    """Ranks' rows of one table, one after another, shifted (see :data:`_Part`), typed.

    Column by column in numpy: shifting a frame per rank in place and concatenating them
    costs pandas' bookkeeping per column per rank, which a job of many ranks multiplies.
    """
    cols = [_columns(p) for p, _, _ in parts]
    names = list(cols[0])
    dtypes = [a.dtype for a in cols[0].values()]
    if any(list(c) != names or [a.dtype for a in c.values()] != dtypes for c in cols):
        # Ranks whose columns differ (from the cache of another version): pandas aligns them.
        frames = [_shifted(_as_frame(table, p), shift, offset) for p, shift, offset in parts]
        return tb.typed(table, pd.concat(frames, ignore_index=True))
    joined: tb.Columns = {}
    for c in names:
        pieces = [got[c] for got in cols]
        if c in ("ts", "launch_ts"):
            pieces = [a + s if s else a for a, (_, s, _) in zip(pieces, parts, strict=True)]
        elif c == "op_index":
            pieces = [
                np.where(a >= 0, a + offset, -1) if offset else a
                for a, (_, _, offset) in zip(pieces, parts, strict=True)
            ]
        joined[c] = np.concatenate(pieces)
    return tb.typed_frame(table, joined)


def _as_frame(table: str, got: tb.Columns | pd.DataFrame) -> pd.DataFrame:
    """A table as a frame: a file read now keeps its columns, one from the cache a frame."""
    return got if isinstance(got, pd.DataFrame) else tb.frame_of(table, got)


def _columns(got: tb.Columns | pd.DataFrame) -> tb.Columns:
    if isinstance(got, pd.DataFrame):
        return {str(c): got[c].to_numpy() for c in got.columns}
    return got


def _shifted(frame: pd.DataFrame, shift: float, op_offset: int) -> pd.DataFrame:
    frame = frame.copy(deep=False)
    if shift:
        for col in ("ts", "launch_ts"):
            if col in frame:
                frame[col] = frame[col] + shift
    if "op_index" in frame and op_offset:
        idx = frame["op_index"].to_numpy()
        frame["op_index"] = np.where(idx >= 0, idx + op_offset, -1)
    return frame


_STEP_PREFIX = "ProfilerStep#"

#: Events decoded per chunk: big enough that per-chunk overhead vanishes, small enough that
#: one chunk's structs (a few MB) stay in cache while its columns are gathered; 8192 loaded
#: the 216k-event benchmark trace a little faster than 16384 or more, in less memory.
CHUNK = 8192
_GPU = ("kernels", "memcpy", "memset")


@dataclass
class _Acc:
    """Columns gathered chunk by chunk, concatenated at the end."""

    parts: dict[str, list[tb.Columns]] = field(default_factory=dict)
    first_ns: int | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    #: Per chunk, the file positions of its flow starts and ends.
    flows: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def any_missing_correlation(self) -> bool:
        return any(
            bool((p["correlation"] < 0).any())
            for t in (*_GPU, "runtime")
            for p in self.parts.get(t, [])
        )

    def add(self, table: str, cols: tb.Columns) -> None:
        self.parts.setdefault(table, []).append(cols)

    def get(self, table: str) -> tb.Columns:
        """The table's columns, its chunks' parts given up (so that the tables made from
        the columns do not sit beside them)."""
        return _concat(self.parts.pop(table, []))

    def absorb(self, other: _Acc, shift: int) -> None:
        """Add ``other``'s columns after these, its flow positions moved by ``shift``."""
        for table, cols in other.parts.items():
            self.parts.setdefault(table, []).extend(cols)
        if other.first_ns is not None:
            self.first_ns = (
                other.first_ns if self.first_ns is None else min(self.first_ns, other.first_ns)
            )
        for ph, k in other.skipped.items():
            self.skipped[ph] = self.skipped.get(ph, 0) + k
        self.flows.extend((shift + s, shift + e) for s, e in other.flows)


def _concat(parts: list[tb.Columns]) -> tb.Columns:
    """Chunks' columns joined into one set ({} for none; a single chunk is not copied)."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _abs_ns(ts: np.ndarray, base_ns: int | None, path: str) -> np.ndarray:
    if not base_ns:
        return ts
    has = ts != dec.NO_TS
    if has.any() and int(ts[has].max()) > np.iinfo(np.int64).max - base_ns:
        raise TraceError(path, "timestamps out of range (past year 2262 with baseTimeNanoseconds)")
    return np.where(has, ts + base_ns, dec.NO_TS)


def _chunk(
    acc: _Acc,
    events: tb.Events,
    abs_ns: np.ndarray,
    offset: int,
    ids: tb.Ids,
    path: str,
) -> None:
    s = tb.sort_events(events)
    usable = (abs_ns != dec.NO_TS) & ~s.is_meta
    if usable.any():
        m = int(abs_ns[usable].min())
        acc.first_ns = m if acc.first_ns is None else min(acc.first_ns, m)
    for ph, n in s.skipped_phases.items():
        acc.skipped[ph] = acc.skipped.get(ph, 0) + n

    def com(idx: np.ndarray) -> tb.Common:
        return tb.common(events, idx, abs_ns, ids, path, offset)

    k = s.by_kind
    kern = com(k[tb.KERNEL])
    acc.add("kernels", tb.kernels(kern, offset + k[tb.KERNEL], ids, path))
    acc.add("memcpy", tb.copies(com(k[tb.MEMCPY]), offset + k[tb.MEMCPY], ids, path, memcpy=True))
    acc.add("memset", tb.copies(com(k[tb.MEMSET]), offset + k[tb.MEMSET], ids, path, memcpy=False))
    ir = k[tb.RUNTIME]
    acc.add("runtime", tb.runtime(com(ir), offset + ir, s.runtime_cats(ir), path))

    # "ProfilerStep#N" written as an op (old Kineto) is an annotation, as in new ones.
    op_idx = k[tb.CPU_OP]
    op_names = _names(events, op_idx)
    # Newer traces write no such op: one substring search over all the names says so,
    # where a test per op would cost more than gathering the names.
    if _STEP_PREFIX in "\n".join(op_names):
        step_like = np.array([n.startswith(_STEP_PREFIX) for n in op_names], bool)
    else:
        step_like = np.zeros(len(op_names), bool)
    ops = op_idx[~step_like]
    op_com = com(ops)
    acc.add("cpu_ops", tb.cpu_ops(op_com, offset + ops, path))
    py = k[tb.PYTHON]
    fetches = py[tb.kept_frames(_names(events, py))] if len(py) else py
    ann_idx = np.concatenate(
        [k[tb.ANNOTATION], k[tb.GPU_ANNOTATION], op_idx[step_like], fetches.astype(np.int64)]
    )
    on_gpu = np.zeros(len(ann_idx), bool)
    n_cpu = len(k[tb.ANNOTATION])
    on_gpu[n_cpu : n_cpu + len(k[tb.GPU_ANNOTATION])] = True
    ann = com(ann_idx)
    acc.add("annotations", tb.annotation_columns(ann, on_gpu))
    acc.add("counters", tb.counters(com(k[tb.RANGE]), offset + k[tb.RANGE], path))
    # The CPU annotations come first among the annotations' rows.
    cpu_ann = ann.take(np.arange(n_cpu))
    _comms(acc, (kern, k[tb.KERNEL]), (op_com, ops), (cpu_ann, k[tb.ANNOTATION]), offset, path)

    # Flow events matter only where correlation ids are missing, which is known once every
    # chunk is read: remember where they are; their columns are built then, if needed.
    acc.flows.append((offset + s.flows_start, offset + s.flows_end))


def _names(events: tb.Events, idx: np.ndarray) -> list[str]:
    if isinstance(events, EventColumns):
        names: list[str] = events.name[idx].tolist()
        return names
    return [events[i].name for i in idx.tolist()]


def _comms(
    acc: _Acc,
    kernels: tuple[tb.Common, np.ndarray],
    ops: tuple[tb.Common, np.ndarray],
    annotations: tuple[tb.Common, np.ndarray],
    offset: int,
    path: str,
) -> None:
    """The chunk's collective-call records: candidates by name, then their args.

    Each source comes as its rows' shared columns (already built for its own table) and
    their chunk positions: candidates are picked from those columns, not gathered again.
    """
    for source, (c, idx), pattern in (
        ("kernel", kernels, tb.COMM_KERNEL),
        ("op", ops, tb.COMM_OP_NAMES),
        ("annotation", annotations, tb.COMM_ANNOTATION),
    ):
        pos = tb.comm_candidates(c.name, pattern)
        # Added even when empty: every chunk gives every table its columns.
        acc.add("comms", tb.comms(c.take(pos), offset + idx[pos], source, path))


#: A piece of a file's event array decoded at once holds about CHUNK events of this size (a
#: Kineto event, as written, is 150 to 400 bytes).
_EVENT_BYTES = 256


def _piece_bytes() -> int:
    """The size of the pieces a file's events are cut into (see ``dec.split_events``); 0
    would skim them instead."""
    return CHUNK * _EVENT_BYTES


#: Files of fewer bytes of JSON are decoded in this process alone; bigger ones with helper
#: processes (streamed, :func:`_stream_rank`; else shared out whole,
#: :func:`_decode_pieces_parallel`). A helper's columns cross back pickled, which a small
#: file's savings do not repay: when two processes shared whole files, they took 0.26-0.28 s
#: against one's 0.25-0.27 at 51 MiB, 0.43-0.48 against 0.46-0.48 at 85 MiB (load +
#: analysis, fresh processes taking turns).
PARALLEL_MIN_BYTES = 256 << 20
#: What sending a child's columns back costs, against what making them cost.
_SEND_COST = 0.1


def _decode_pieces(
    d: dec.Decoded, path: str, step: Callable[[str], None]
) -> tuple[_Acc, tb.Ids, int] | None:
    """``_decode_range`` over a file cut into pieces, and its event count; None when a
    piece is not a list of valid events, or its events are not valid tables: the skim then
    reads the file again, and words the error that the file holds, if any (a syntax error
    past this piece comes first there)."""
    return _pieces_part(d, d.pieces, path, step)


def _pieces_part(
    d: dec.Decoded,
    spans: Sequence[tuple[int, int]],
    path: str,
    step: Callable[[str], None] | None = None,
) -> tuple[_Acc, tb.Ids, int] | None:
    """The pieces ``spans`` of the file decoded and tabulated, their events numbered from 0
    (only error messages and flow positions depend on that number; see
    :func:`_decode_pieces_parallel`), and how many events they hold; None as in
    :func:`_decode_pieces`."""
    assert d.data is not None
    acc = _Acc()
    ids = tb.Ids()
    mode = dec.TsMode()
    offset = 0
    for span in spans:
        got = _piece_events(d.data, span, offset, path, mode, python=not d.scan_only)
        if got is None:
            return None
        events, ts = got
        # A whole file's one piece is tabulated a chunk at a time, as a skim's events are.
        size = CHUNK if d.whole and len(events) > CHUNK else max(len(events), 1)
        for at in range(0, len(events), size):
            abs_ns = _abs_ns(ts[at : at + size], d.base_ns, path)
            part = events[at : at + size] if size < len(events) else events
            try:
                _chunk(acc, part, abs_ns, offset + at, ids, path)
            except TraceError:
                return None
            del part  # the structs go with ``events`` below, not at the next piece
        offset += len(events)
        del events, got
        if step is not None:
            step("decoding")
    return acc, ids, offset


def _piece_events(
    data: dec.Buffer,
    span: tuple[int, int],
    offset: int,
    path: str,
    mode: dec.TsMode,
    *,
    python: bool = True,
) -> tuple[tb.Events, np.ndarray] | None:
    """The events of ``data[span]`` (the first of them event ``offset``) and their times:
    read by the scanner, else (with ``python``) by msgspec; None when neither reads them."""
    got: tuple[tb.Events, np.ndarray] | None = scan.scan_piece(
        data, span, tb.CAT_CODES, tb.PHASE_CODES
    )
    if got is None and python:
        got = dec.decode_piece(data, span, offset, path, mode)
    return got


def _decode_pieces_parallel(
    d: dec.Decoded, path: str, step: Callable[[str], None]
) -> tuple[_Acc, tb.Ids, int] | None:
    """:func:`_decode_pieces` with the pieces shared out among processes: each takes a
    contiguous run of them, the first run here, and their columns are joined in file order,
    which is where the one-process path puts every row. None when that does not apply
    (too small a file, one worker, no safe fork) or when any run failed or met text thread
    ids (their codes are given in order of first appearance across the whole file): the
    caller then decodes the whole file here, which gives exactly the one-process result
    or error."""
    assert d.data is not None
    spans = d.pieces
    workers = min(forked.workers_wanted(), len(spans))
    if workers < 2 or len(d.data) < PARALLEL_MIN_BYTES or not forked.can_fork():
        return None
    # Runs of about equal work, a piece's being about proportional to its bytes; a child
    # also pickles its columns, and this process unpickles them, which costs about a tenth
    # of making them (measured on the benchmark trace): its run is that much shorter.
    share = np.array([1.0 + _SEND_COST] + [1.0] * (workers - 1))
    ends = np.cumsum([b - a for a, b in spans])
    at = np.cumsum(share / share.sum())[:-1] * ends[-1]
    cuts = np.searchsorted(ends, at, "left")
    bounds = [0, *sorted({int(c) + 1 for c in cuts if 0 <= c < len(spans) - 1}), len(spans)]
    runs = [spans[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)]
    if len(runs) < 2:
        return None
    got = forked.map_forked(lambda r: _pieces_part(d, r, path), runs)
    if got is None or any(part is None for part in got):
        return None
    parts = [part for part in got if part is not None]
    if any(ids.codes for _, ids, _ in parts):
        logger.debug("%s: text thread ids; decoding in one process", plain_text(path))
        return None
    acc = _Acc()
    offset = 0
    for a, _, n in parts:
        # A run's flow positions count from its own first event: made the file's.
        acc.absorb(a, offset)
        offset += n
    for _ in spans:
        step("decoding")
    logger.debug("%s: decoded in %d processes", plain_text(path), len(runs))
    return acc, tb.Ids(), offset


#: Files with fewer events are decoded in this process alone: below this, starting and
#: feeding other processes costs more than it saves.
PARALLEL_MIN_EVENTS = 500_000


def _decode_range(
    d: dec.Decoded, start: int, stop: int, path: str, step: Callable[[str], None] | None = None
) -> tuple[_Acc, tb.Ids]:
    """Decode and tabulate the chunks of events ``start .. stop`` (multiples of CHUNK)."""
    acc = _Acc()
    ids = tb.Ids()
    mode = dec.TsMode()
    for offset in range(start, stop, CHUNK):
        events, ts = dec.decode_chunk(d.raw_events[offset : offset + CHUNK], offset, path, mode)
        _chunk(acc, events, _abs_ns(ts, d.base_ns, path), offset, ids, path)
        del events
        if step is not None:
            step("decoding")
    return acc, ids


def _decode_parallel(d: dec.Decoded, path: str) -> tuple[_Acc, tb.Ids] | None:
    """The same as ``_decode_range`` over the whole file, its chunks shared out among
    processes; None when that does not apply or cannot give exactly the same result."""
    n_events = len(d.raw_events)
    n_chunks = -(-n_events // CHUNK)
    # Opt-in only: events skimmed first and shared out repaid less than they cost here.
    workers = min(forked.workers_wanted(auto=False), n_chunks)
    if n_events < PARALLEL_MIN_EVENTS or workers < 2 or not forked.can_fork():
        return None
    # Contiguous runs of whole chunks: each chunk is cut where the one-process path cuts it,
    # so every row lands where it would there.
    bounds = [n_chunks * k // workers * CHUNK for k in range(workers)] + [n_events]
    parts = [(bounds[k], bounds[k + 1]) for k in range(workers)]
    got = forked.map_forked(lambda r: _decode_range(d, r[0], r[1], path), parts)
    if got is None:
        return None  # a part failed: the one-process path raises the same error, exactly
    if any(ids.codes for _, ids in got):
        # Text thread ids get codes in order of first appearance across the file; a part
        # cannot know the codes given out before it. Rare (old traces): decode in one go.
        logger.debug("%s: text thread ids; decoding in one process", plain_text(path))
        return None
    acc = _Acc()
    for a, _ in got:
        acc.absorb(a, 0)  # chunks of skimmed events are numbered in the file already
    logger.debug("%s: decoded in %d processes", plain_text(path), workers)
    return acc, tb.Ids()


#: Set to 0 to read every file whole, never as it is decompressed (see :func:`_streamed`).
STREAM_ENV = "NBPROF_STREAM"
#: How much of a file is read to see whether its layout allows streaming (the first piece
#: decompressed is larger: a trace's events start well within it).
_HEAD_BYTES = 1 << 16


def _streamed(f: Path, order: int, bar: _Progress) -> tuple[_Rank, int] | bytearray | None:
    """A trace's rank read as it is read (and decompressed: :mod:`nbprof.trace.stream`),
    and its bytes of JSON, where its layout allows; else the bytes of a gzip file
    decompressed so far and the rest (laid out otherwise: read whole after all); else
    None (to be read whole, by choice or to read it again, which also words any error as
    ever). A file that cannot be read at all raises the TraceError that says why.
    ``order`` is the rank a file that does not say its own gets."""
    if os.environ.get(STREAM_ENV, "").strip() == "0" or _piece_bytes() <= 0:
        return None
    src = io.open_source(f)
    try:
        return _streamed_from(src, str(f), order, bar)
    finally:
        src.close()


def _streamed_from(
    src: io.Source, path: str, order: int, bar: _Progress
) -> tuple[_Rank, int] | bytearray | None:
    first = bytearray()
    try:
        for piece in src.pieces:
            first += piece
            if len(first) >= _HEAD_BYTES:
                break
    except TraceError:
        return None
    piece = b""  # the first piece decompressed (2 MiB) is in the buffer now: not held twice
    h = dec.layout(first)
    if h is None:
        # Read whole: a gzip file's bytes decompressed so far are kept; a plain file, of
        # which only the start was read, is read again whole.
        return src.rest_into(first) if src.gzip else None
    bar.step("read")
    cut = stream.pieces(src.pieces, h, first, _piece_bytes())
    # The buffer is the stream's alone now: let go of once its last piece is read, before
    # the tables are made.
    del first
    got = _stream_rank(cut, order, path, bar, _helpers_for(src.size_hint))
    if got is None:
        logger.debug("%s: read whole after all", plain_text(path))
        bar.grow(1)  # the whole reading steps past "read" again
    return got


def _helpers_for(size_hint: int) -> int:
    """Helper processes to read a file of about this size with (see :func:`_stream_rank`):
    one less than the processes wanted, for a big file; else none."""
    if size_hint < PARALLEL_MIN_BYTES:
        return 0
    return forked.workers_wanted() - 1


def _stream_rank(
    cut: Generator[tuple[bytearray, tuple[int, int]], None, stream.End],
    order: int,
    path: str,
    bar: _Progress,
    helpers: int = 0,
) -> tuple[_Rank, int] | None:
    """:func:`_streamed`'s rank and bytes of JSON, from its pieces ``cut`` (see
    :func:`nbprof.trace.stream.pieces`): each piece tabulated as
    :func:`_pieces_part` does it, here or (with ``helpers``) by helper processes where
    they are free (:mod:`nbprof.trace.helpers`), the rank built from them once the
    top-level values (read at the end) are known. Times are gathered as written and moved
    by ``baseTimeNanoseconds`` at the end. None wherever the whole file's reading could
    differ: a piece neither reader takes, a rank whose flow events are needed (they are
    found in the whole file's bytes), an error, text thread ids met where helpers took
    pieces (their codes follow the order they are first met in the whole file)."""
    ids = tb.Ids()
    mode = dec.TsMode()
    # Each piece's result, in file order: a helper's stands as the helper's number until
    # the helpers' pieces come back.
    pieces: list[_Piece | int] = []
    team = _start_helpers(helpers, path)
    try:
        while True:
            try:
                data, span = next(cut)
            except StopIteration as stop:
                end: stream.End = stop.value
                break
            k = team.offer(data, span) if team is not None else None
            if k is None:
                piece = _read_piece(data, span, path, mode, ids)
                if piece is None:
                    return None
                pieces.append(piece)
                del piece
            else:
                pieces.append(k)
            del data
            bar.grow(1)
            bar.step("decoding")
        theirs = _their_pieces(team, ids, path) if team is not None and any(team.handed) else []
        if theirs is None:
            return None
        acc = _Acc()
        offset = 0
        latest: int | None = None
        for p in pieces:
            piece = next(theirs[p]) if isinstance(p, int) else p
            latest = _later(latest, piece.latest)
            acc.absorb(piece.acc, offset)
            offset += piece.events
        if theirs:
            _own_lone_parts(acc)
        del pieces, theirs
        if acc.any_missing_correlation():
            return None
        d = dec.top_values(end.top, end.repeated, path)
        base = d.base_ns or 0
        if base and latest is not None and latest > np.iinfo(np.int64).max - base:
            return None  # out of range: the whole file's reading says so
        bar.step("skimmed")
        rank = d.rank if d.rank is not None else order
        built = _finish_rank(d, acc, ids, offset, rank, path, bar.step, shift=base)
    except (stream.Unstreamable, TraceError) as e:
        logger.debug("%s: %s", plain_text(path), e)
        return None
    finally:
        cut.close()
        if team is not None:
            team.close()
    built.file_rank = d.rank
    return built, end.json_bytes


def _their_pieces(
    team: helpers_mod.Helpers, ids: tb.Ids, path: str
) -> list[Iterator[_Piece]] | None:
    """Each helper's pieces, in the order handed to it; None when a helper failed, or
    text thread ids were met here or there (their codes follow the order in which the
    whole file first meets them)."""
    got = team.results()
    if got is None:
        return None
    if ids.codes or any(codes for _, codes in got):
        logger.debug("%s: text thread ids; read in one process", plain_text(path))
        return None
    return [iter([p for b in batches for p in _unpacked(b)]) for batches, _ in got]


def _own_lone_parts(acc: _Acc) -> None:
    """Copy the columns of a table made of one part: joining several makes new arrays, but
    one part is taken as it is, and a helper's is a view of its memory file, all of which
    it would keep mapped (``comms`` rows, written only where collectives ran, can lie in
    one piece)."""
    for parts in acc.parts.values():
        if len(parts) == 1:
            parts[0] = {k: v.copy() if v.base is not None else v for k, v in parts[0].items()}


@dataclass
class _Piece:
    """What one piece of a stream made: its columns (its events numbered from 0, as
    :meth:`_Acc.absorb` expects), how many events it held, and its latest time."""

    acc: _Acc
    events: int
    latest: int | None


def _read_piece(
    data: dec.Buffer, span: tuple[int, int], path: str, mode: dec.TsMode, ids: tb.Ids
) -> _Piece | None:
    """The events of ``data[span]`` tabulated; None where neither reader takes them.
    Raises TraceError as :func:`_chunk` does."""
    got = _piece_events(data, span, 0, path, mode)
    if got is None:
        return None
    events, ts = got
    has = ts != dec.NO_TS
    acc = _Acc()
    _chunk(acc, events, ts, 0, ids, path)
    return _Piece(acc, len(events), int(ts[has].max()) if has.any() else None)


def _later(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else max(a, b)


class _HelperPieces:
    """A helper process's side of :func:`_stream_rank` (a :class:`helpers_mod.Work`): the
    pieces it is handed, read in the order handed and sent back in batches of
    ``_BATCH`` (packed, :func:`_pack`); at the end, whether text thread ids were met (their
    codes here would not be the file's)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.ids = tb.Ids()
        self.mode = dec.TsMode()
        self.pieces: list[_Piece] = []

    def take(self, data: mmap.mmap, span: tuple[int, int]) -> None:
        piece = _read_piece(data, span, self.path, self.mode, self.ids)
        if piece is None:
            raise TraceError(self.path, "a piece neither reader takes")
        self.pieces.append(piece)

    def batch(self, final: bool) -> _Packed | None:
        if len(self.pieces) < _BATCH and not (final and self.pieces):
            return None
        packed = _pack(self.pieces)
        self.pieces = []
        return packed

    def result(self) -> bool:
        return bool(self.ids.codes)


#: Pieces a helper sends back at a time: packing and pickling them (a few ms) is done while
#: the stream is still read, so that little is left to do when it ends.
_BATCH = 16


@dataclass
class _Packed:
    """A helper's pieces for the trip back: each table's columns joined across them (a
    few big arrays cross in a fraction of the time that thousands of small ones take:
    0.1 s against 0.4 s for the 2.16M-event trace's half, measured when they crossed a
    pipe all at the end), with the piece and the rows of each part they were joined
    from; a table whose parts differ in their columns' types stays in the pieces."""

    pieces: list[_Piece]
    tables: dict[str, tuple[tb.Columns, list[tuple[int, int]]]]


def _pack(pieces: list[_Piece]) -> _Packed:
    tables: dict[str, tuple[tb.Columns, list[tuple[int, int]]]] = {}
    names = dict.fromkeys(t for p in pieces for t in p.acc.parts)
    for t in names:
        parts = [(i, c) for i, p in enumerate(pieces) for c in p.acc.parts.get(t, [])]
        kinds = {k: v.dtype for k, v in parts[0][1].items()}
        if not kinds or any(
            c.keys() != kinds.keys() or any(v.dtype != kinds[k] for k, v in c.items())
            for _, c in parts
        ):
            continue
        joined = {k: np.concatenate([c[k] for _, c in parts]) for k in kinds}
        some = next(iter(kinds))
        tables[t] = joined, [(i, len(c[some])) for i, c in parts]
        for p in pieces:
            p.acc.parts.pop(t, None)
    return _Packed(pieces, tables)


def _unpacked(packed: _Packed) -> list[_Piece]:
    """The pieces :func:`_pack` packed, their tables' parts views of the joined columns."""
    for t, (joined, rows) in packed.tables.items():
        at = 0
        for i, n in rows:
            part = {k: v[at : at + n] for k, v in joined.items()}
            packed.pieces[i].acc.parts.setdefault(t, []).append(part)
            at += n
    return packed.pieces


#: A helper's slot holds a piece of up to this many times the pieces' size (they run past
#: it to the next event's end); a bigger one is read here.
_SLOT_PIECES = 2


def _start_helpers(n: int, path: str) -> helpers_mod.Helpers | None:
    if n < 1:
        return None
    team = helpers_mod.Helpers.start(n, _SLOT_PIECES * _piece_bytes() + 2, _HelperPieces(path))
    if team is not None:
        logger.debug("%s: read with %d helper processes", plain_text(path), n)
    return team


def _build_rank(d: dec.Decoded, rank: int, path: str, step: Callable[[str], None]) -> _Rank:
    by_pieces = None
    if d.pieces:
        by_pieces = _decode_pieces_parallel(d, path, step) or _decode_pieces(d, path, step)
    if by_pieces is not None:
        acc, ids, n_events = by_pieces
    else:
        if d.pieces:
            assert d.data is not None
            d = dec.decode_file(d.data, path)
        n_events = len(d.raw_events)
        done = _decode_parallel(d, path)
        if done is not None:
            acc, ids = done
            for _ in range(0, n_events, CHUNK):
                step("decoding")
        else:
            acc, ids = _decode_range(d, 0, n_events, path, step)
    return _finish_rank(d, acc, ids, n_events, rank, path, step)


def _finish_rank(
    d: dec.Decoded,
    acc: _Acc,
    ids: tb.Ids,
    n_events: int,
    rank: int,
    path: str,
    step: Callable[[str], None],
    shift: int = 0,
) -> _Rank:
    """The rank's tables from the columns its events were gathered into. ``shift``: what
    the gathered times lack of their absolute value (``baseTimeNanoseconds`` where they
    were gathered before it was known): only the first time is moved by it, the tables'
    times being relative to it."""
    flow_start: tb.Columns = {}
    flow_end: tb.Columns = {}
    if acc.any_missing_correlation():
        if d.data is not None and not d.raw_events:
            # Read by pieces: the flow events are found again by their slices (rare: a trace
            # without correlation ids).
            d.raw_events = dec.skim_events(d.data)
        flow_start, flow_end = _flow_columns(d, acc.flows, ids, path)
    # The raw slices keep the whole file's bytes alive: let them go before the tables grow.
    d.raw_events = []
    d.data = None
    if acc.first_ns is None:
        raise TraceError(path, "trace holds no timed events (only metadata)")
    first = acc.first_ns + shift
    wall = d.base_ns is not None or first >= _EPOCH_NS
    notes = list(d.notes)
    for ph, n in acc.skipped.items():
        if n:
            notes.append(f"{n} begin/end ('{ph}') events ignored: only complete events are read")

    cols = {
        t: acc.get(t) for t in (*_GPU, "runtime", "cpu_ops", "annotations", "counters", "comms")
    }
    filled = _correlate_by_flows(cols, flow_start, flow_end)
    if filled:
        notes.append(f"{filled} events linked to their launch by flow events (no correlation ids)")
    for c in cols.values():
        c["ts"] = tb.rel_us(c.pop("ts_ns"), first - shift)
        c.pop("_pid", None)
        c.pop("_tid", None)
        c["rank"] = np.full(len(c["ts"]), rank, np.int32)
    step("tables")
    _link(cols["kernels"], cols["memcpy"], cols["memset"], cols["runtime"], cols["cpu_ops"])
    step("links")

    for t in (*_GPU, "runtime", "annotations", "counters", "comms"):
        c = cols[t]
        ts = c["ts"]
        if len(ts) > 1 and not bool((ts[1:] >= ts[:-1]).all()):
            order = np.argsort(ts, kind="stable")
            cols[t] = {k: v[order] for k, v in c.items()}
    tables: dict[str, tb.Columns | pd.DataFrame] = dict(cols)
    tables["steps"] = tb.steps(cols["annotations"])
    seen: list[str] = []
    for t in _GPU:
        seen.extend(pd.unique(cols[t]["device"]).tolist())
    tables["devices"] = tb.devices(d.device_props, list(dict.fromkeys(seen)), rank)
    for p in d.device_props:
        if p.numSms is not None and p.numSms <= 0:
            notes.append(
                f"deviceProperties says device {plain_text(p.id)} has {p.numSms} SMs: its "
                "SM count is unknown, so SM efficiency is not computed"
            )
    step("frames")
    return _Rank(rank, first, wall, tables, n_events, dict(d.metadata), notes)


def _flow_columns(
    d: dec.Decoded, flows: list[tuple[np.ndarray, np.ndarray]], ids: tb.Ids, path: str
) -> tuple[tb.Columns, tb.Columns]:
    """Columns of the flow events (starts, ends), decoded again from their raw slices.

    Thread ids are looked up in the tables' ``ids`` without adding to it, so the tables'
    codes do not depend on the flows; text never seen in the tables matches nothing there.
    """
    flow_ids = tb.Ids()
    parts: dict[str, list[tb.Columns]] = {"start": [], "end": []}
    for chunk in flows:
        for name, idx in zip(("start", "end"), chunk, strict=True):
            if not len(idx):
                continue
            evs, ts = dec.decode_flows([d.raw_events[i] for i in idx.tolist()], path)
            parts[name].append(
                {
                    "pid": ids.known_column([e.pid for e in evs]),
                    "tid": ids.known_column([e.tid for e in evs]),
                    "ts_ns": _abs_ns(ts, d.base_ns, path),
                    "id": flow_ids.column([-1 if e.id is None else e.id for e in evs]),
                }
            )
    return _concat(parts["start"]), _concat(parts["end"])


def _correlate_by_flows(cols: dict[str, tb.Columns], starts: tb.Columns, ends: tb.Columns) -> int:
    # Flow columns are built only when some correlation id is missing (see _build_rank).
    if not starts and not ends:
        return 0
    empty = {k: np.zeros(0, np.int64) for k in ("pid", "tid", "ts_ns", "id")}
    starts, ends = starts or empty, ends or empty
    both = {k: np.concatenate([starts[k], ends[k]]) for k in empty}
    filled = 0
    for t in (*_GPU, "runtime"):
        c = cols[t]
        # GPU events are the flows' ends; runtime calls their starts.
        f = both if t == "runtime" else ends
        pid, tid = (c["pid"], c["tid"]) if t == "runtime" else (c["_pid"], c["_tid"])
        filled += links.fill_from_flows(
            c["correlation"], pid, tid, c["ts_ns"], f["pid"], f["tid"], f["ts_ns"], f["id"]
        )
    return filled


def _start_order(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, ts))``: by start, longest first at equal starts.

    Ops come out of a trace nearly in start order, which a stable sort of the starts alone
    runs through at once, while lexsort's sort by duration first is a full one; where no two
    ops start together (to the ns, as in most traces) that order is already the answer.
    """
    order = np.argsort(ts, kind="stable")
    starts = ts[order]
    if np.isnan(starts[-1:]).any():  # a NaN start: lexsort's own order
        return np.lexsort((-dur, ts))
    tie = starts[1:] == starts[:-1]
    if not tie.any():
        return order
    # Ops starting together: their durations decide, longest first, then their order. Only
    # those runs are sorted again, each where it lies (a full lexsort sorts every duration:
    # 0.08 ms for the 1633 ops of a 64-rank job's file, 91 of them tied, against 0.02).
    together = np.zeros(len(ts), bool)
    together[1:] = tie
    together[:-1] |= tie
    at = np.flatnonzero(together)
    run = np.cumsum(np.concatenate(([True], ~tie)))[at]
    rows = order[at]
    order[at] = rows[np.lexsort((-dur[rows], run))]
    return order


def _link(
    kern: dict[str, np.ndarray],
    mcpy: dict[str, np.ndarray],
    mset: dict[str, np.ndarray],
    rt: dict[str, np.ndarray],
    ops: dict[str, np.ndarray],
) -> None:
    # CPU ops sorted by start, longest first at equal starts, so a parent precedes its
    # children; op_index then points into this order, which is the frame's.
    order = _start_order(ops["ts"], ops["dur"])
    for k in list(ops):
        ops[k] = ops[k][order]
    op_end = ops["ts"] + ops["dur"]
    depth, parent = links.nest(ops["pid"], ops["tid"], ops["ts"], op_end)
    ops["depth"] = depth
    rt_op = links.innermost_ops(
        ops["pid"], ops["tid"], ops["ts"], op_end, parent, rt["pid"], rt["tid"], rt["ts"]
    )
    launcher = rt["cat"] != "cuda_sync"
    names = ops["name"]
    for cols in (kern, mcpy, mset):
        li = links.link_launches(cols["correlation"], rt["correlation"], launcher)
        hit = li >= 0
        n = len(li)
        cols["launch_ts"] = np.where(
            hit, rt["ts"][np.maximum(li, 0)] if len(rt["ts"]) else np.nan, np.nan
        )
        launch_name = np.full(n, "", dtype=object)
        launch_name[hit] = rt["name"][li[hit]]
        cols["launch_name"] = launch_name
        op_index = np.full(n, -1, np.int64)
        op_index[hit] = rt_op[li[hit]]
        cols["op_index"] = op_index
        op = np.full(n, "", dtype=object)
        has_op = op_index >= 0
        op[has_op] = names[op_index[has_op]]
        cols["op"] = op
