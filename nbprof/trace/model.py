"""The in-memory trace: columnar tables, one per kind of event.

Every reader produces a :class:`Trace`; analysis and views only ever read one. Times are
microseconds (float64) *relative to* :attr:`Trace.origin_ns`, so nanosecond precision
survives even when the file holds epoch timestamps (1.7e15 µs loses sub-µs digits in a
float64).

Each table is declared once, below, as a :class:`Table` of :class:`Column` s (name, dtype,
the value that means "unknown", unit, meaning); the column tuples (``KERNEL_COLUMNS``...),
``TABLES``, the dtypes, :func:`empty_table` and the column reference in
``docs/tables.md`` (:func:`tables_markdown`) are all derived from it. Every frame has at
least its table's columns, in that order; extra columns are allowed.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd


@dataclass(frozen=True)
class Column:
    """One column of a table's contract.

    ``missing`` is the value the column holds where the trace does not say (``-1``,
    ``NaN``, ``""``), or ``None`` when every row has a real value.
    """

    name: str
    dtype: str
    doc: str
    missing: Any = None
    unit: str = ""


@dataclass(frozen=True)
class Table:
    """A table's contract: its columns, in order, and what one row is."""

    name: str
    doc: str
    columns: tuple[Column, ...]

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def dtypes(self) -> dict[str, str]:
        return {c.name: c.dtype for c in self.columns}

    def empty(self) -> pd.DataFrame:
        """An empty frame with this table's columns and dtypes."""
        # A copy of one made once: a quarter of the cost of making one, and every file
        # read has a few empty tables.
        return self._empty_frame.copy()

    @cached_property
    def _empty_frame(self) -> pd.DataFrame:
        return frame_from_arrays(self.empty_columns())

    def empty_columns(self) -> dict[str, np.ndarray]:
        """This table's columns, empty, with their dtypes."""
        return {c.name: np.empty(0, c.dtype) for c in self.columns}

    def markdown(self) -> str:
        """This table's reference: one row per column."""
        rows = [
            f"### `{self.name}`",
            "",
            self.doc,
            "",
            "| column | dtype | unknown | unit | meaning |",
            "|---|---|---|---|---|",
        ]
        rows += [
            f"| `{c.name}` | {_dtype_word(c.dtype)} | {_missing_word(c.missing)} | "
            f"{c.unit or ''} | {c.doc} |"
            for c in self.columns
        ]
        return "\n".join(rows)


def frame_from_arrays(columns: Mapping[str, Any], *, own: bool = False) -> pd.DataFrame:
    """A frame of these equal-length 1-D arrays, each column keeping its array's dtype
    (object text stays object: no string dtype inferred), on a RangeIndex.

    ``own``: the caller hands the arrays over (nothing will change them in place). From
    :data:`SPLIT_ROWS` rows the frame then holds each array as it is, one block per
    column (:func:`_split_blocks`), instead of copying them into a block per dtype.

    The public constructor checks, infers and aligns every column (a Series per object
    column, their indexes unioned): three times the cost of the arrays themselves for a
    small trace's tables, which a job of many ranks pays per rank. The arrays here are
    already what the frame holds, so the frame is made from them directly: from its
    blocks (:func:`_from_blocks`) where pandas' internals are as expected, else through
    pandas' own private path from arrays, else the public one.
    """
    made = _split_blocks(columns) if own else None
    if made is None:
        made = _from_blocks(columns)
    if made is not None:
        return made
    n = len(next(iter(columns.values()))) if columns else 0
    index = pd.RangeIndex(n)
    make = getattr(pd.DataFrame, "_from_arrays", None)
    if make is not None:
        # A copy of the names' Index: a frame's own (``df.columns.name = ...`` changes it).
        names = _column_index(tuple(columns)).copy()
        try:
            return make(list(columns.values()), names, index, verify_integrity=False)
        except TypeError:  # pragma: no cover - a pandas whose private signature changed
            pass
    return pd.DataFrame(  # the same frame, the public way
        {
            c: pd.Series(a, dtype=object, index=index, copy=False) if a.dtype == object else a
            for c, a in columns.items()
        },
        index=index,
        copy=False,
    )


@dataclass(frozen=True)
class _Internals:
    """pandas' block internals (private), to make a frame of arrays from its blocks."""

    from_mgr: Any
    placement: Any
    block_type: Any
    manager: Any


@lru_cache(maxsize=1)
def _internals() -> _Internals | None:
    """pandas' block internals; None in a pandas that moved them (frames are then made
    through pandas' path from arrays). Looked up at the first frame, not on import: a
    reader's helper process never makes one, and never imports pandas."""
    from_mgr = getattr(pd.DataFrame, "_from_mgr", None)
    try:
        placement = importlib.import_module("pandas._libs.internals").BlockPlacement
        block_type = importlib.import_module("pandas.core.internals.blocks").get_block_type
        manager = importlib.import_module("pandas.core.internals.managers").BlockManager
    except (ImportError, AttributeError):  # pragma: no cover - a pandas that moved them
        return None
    return None if from_mgr is None else _Internals(from_mgr, placement, block_type, manager)


def blocks_made() -> bool:
    """Whether frames are made from their blocks here (:func:`blocks_frame`)."""
    return _internals() is not None


def _from_blocks(columns: Mapping[str, Any]) -> pd.DataFrame | None:
    """The frame pandas' path from arrays makes (the same blocks: one per NumPy type,
    stacked in first-appearance order, one per extension array), its blocks made here.

    pandas' path checks and wraps each array and asks again whether the blocks are
    consolidated: about 10 µs of the 25-45 µs a frame of a few columns takes, and a
    trace's reading and analysis make fifty of them. None for anything it does not
    cover (no columns, lengths that differ, dates, fixed-width text, arrays of more
    dimensions): the caller takes pandas' path then.
    """
    arrays = list(columns.values())
    pandas_blocks = _internals()
    if pandas_blocks is None or not arrays:
        return None
    n = len(arrays[0])
    groups: dict[Any, list[int]] = {}
    for i, a in enumerate(arrays):
        if not _blockable(a, n):
            return None
        # Each extension array its own block, as pandas keys them.
        key: Any = a.dtype if type(a) is np.ndarray else id(a.dtype)
        groups.setdefault(key, []).append(i)
    blocks = []
    place = pandas_blocks.placement
    for at in groups.values():
        first = arrays[at[0]]
        kind = pandas_blocks.block_type(first.dtype)
        if type(first) is np.ndarray:
            values = np.empty((len(at), n), dtype=first.dtype)
            for j, i in enumerate(at):
                values[j] = arrays[i]
            # The positions as the writable intp array BlockPlacement would make of them
            # (through np.require, a few µs a block).
            blocks.append(kind(values, placement=place(np.array(at, np.intp)), ndim=2))
        else:
            blocks.extend(kind(arrays[i], placement=place(i), ndim=2) for i in at)
    # One block per NumPy type and one per extension array is what consolidating leaves:
    # known so, not checked block by block again.
    return _frame_of_blocks(blocks, columns, n, consolidated=True)


def _blockable(a: Any, n: int) -> bool:
    """Whether ``a`` can be a column of ``n`` rows made straight into a block: a 1-D NumPy
    array of anything but dates and fixed-width text or bytes, or a 1-D extension array."""
    if type(a) is np.ndarray:
        return a.ndim == 1 and a.shape[0] == n and a.dtype.kind not in "mMUSV"
    return isinstance(a, pd.api.extensions.ExtensionArray) and a.ndim == 1 and len(a) == n


def _frame_of_blocks(
    blocks: list[Any], columns: Mapping[str, Any], n: int, *, consolidated: bool
) -> pd.DataFrame:
    """The frame of these blocks, named as ``columns``, on a RangeIndex of ``n`` rows."""
    # A view of the names' Index (its own name, its values shared, as a copy's are): a
    # frame's own (``df.columns.name = ...`` changes it), without a copy's checks.
    names = _column_index(tuple(columns))
    view = getattr(names, "_view", None)
    axes = [view() if view is not None else names.copy(), _range_index(n)]
    return blocks_frame(blocks, axes, consolidated=consolidated)


def blocks_frame(blocks: Sequence[Any], axes: list[Any], *, consolidated: bool) -> pd.DataFrame:
    """The frame of these pandas blocks on ``axes`` (its column Index, then its row
    index), through pandas' block manager without its checks: only where
    :func:`blocks_made`. ``consolidated``: the blocks are one per NumPy type (pandas need
    not check)."""
    pandas_blocks = _internals()
    assert pandas_blocks is not None
    mgr = pandas_blocks.manager(tuple(blocks), axes, verify_integrity=False)
    if consolidated:
        mgr._is_consolidated = mgr._known_consolidated = True
    out: pd.DataFrame = pandas_blocks.from_mgr(mgr, axes=mgr.axes)
    return out


#: Rows from which a frame of arrays handed over keeps them as they are (see
#: :func:`_split_blocks`). The copy into one block per dtype costs in proportion to the
#: rows (fresh pages filled, the arrays held twice meanwhile); a frame of one block per
#: column costs a little in every later operation on it instead. For the 2.16M-event
#: trace, splitting its tables took its load from 1.76 to 1.58 s and its peak from 437 to
#: 417 MiB; a 1633-op rank of a job, whose tables are small, was 0.4-1.6 ms slower split.
SPLIT_ROWS = 1 << 14


def _split_blocks(columns: Mapping[str, Any]) -> pd.DataFrame | None:
    """A frame holding each NumPy array of ``columns`` as its own block, not copied (an
    array that is a view of other memory is copied, so that the frame keeps nothing else
    alive). None below :data:`SPLIT_ROWS` rows and for anything :func:`_from_blocks`
    leaves to pandas."""
    arrays = list(columns.values())
    pandas_blocks = _internals()
    if pandas_blocks is None or not arrays or len(arrays[0]) < SPLIT_ROWS:
        return None
    n = len(arrays[0])
    blocks = []
    kind, place = pandas_blocks.block_type, pandas_blocks.placement
    for i, a in enumerate(arrays):
        if not _blockable(a, n):
            return None
        if type(a) is np.ndarray:
            if not (a.flags.owndata and a.flags.c_contiguous):
                a = a.copy()
            at = place(slice(i, i + 1))
            blocks.append(kind(a.dtype)(a.reshape(1, n), placement=at, ndim=2))
        else:
            blocks.append(kind(a.dtype)(a, placement=place(i), ndim=2))
    return _frame_of_blocks(blocks, columns, n, consolidated=False)


@lru_cache(maxsize=64)
def _column_index(names: tuple[str, ...]) -> pd.Index:
    """The Index of these column names, made once: from a list, pandas infers the names'
    dtype each time, which costs as much as the rest of a small frame."""
    return pd.Index(list(names), tupleize_cols=False)


def _range_index(n: int) -> pd.Index:
    """``pd.RangeIndex(n)``, made without the constructor's checks of its arguments."""
    make = getattr(pd.RangeIndex, "_simple_new", None)
    return make(range(n)) if make is not None else pd.RangeIndex(n)


def _dtype_word(dtype: str) -> str:
    return "str" if dtype == "object" else dtype


def _missing_word(missing: Any) -> str:
    if missing is None:
        return "never"
    if isinstance(missing, float) and math.isnan(missing):
        return "NaN"
    return f'`"{missing}"`' if isinstance(missing, str) else f"`{missing}`"


NAN = math.nan

# -- columns several tables share ------------------------------------------------------

RANK = Column("rank", "int32", "rank of the process that wrote the event (0 for one file)")
DEVICE = Column("device", "object", "GPU: `args.device` when present, else the event's pid")
STREAM = Column("stream", "int64", "GPU stream (the event's tid)")
NAME = Column("name", "object", "event name")
TS = Column("ts", "float64", "start, relative to `Trace.origin_ns`", unit="µs")
DUR = Column("dur", "float64", "duration", unit="µs")
CORRELATION = Column(
    "correlation", "int64", "links a GPU event to the runtime call that launched it", -1
)
PID = Column("pid", "int64", "process id")
TID = Column("tid", "int64", "thread id")
BYTES = Column("bytes", "int64", "bytes moved or set", -1, "bytes")
LAUNCH_TS = Column(
    "launch_ts", "float64", "start of the runtime/driver call that launched it", NAN, "µs"
)
LAUNCH_NAME = Column("launch_name", "object", "that launch call's name", "")
OP = Column("op", "object", "innermost CPU op enclosing the launch", "")
OP_INDEX = Column("op_index", "int64", "that op's row in `cpu_ops`", -1)
INPUT_DIMS = Column("input_dims", "object", "the op's input shapes (raw JSON text)", "")
INPUT_TYPES = Column("input_types", "object", "the op's input dtypes (raw JSON text)", "")
_LAUNCH = (LAUNCH_TS, LAUNCH_NAME, OP, OP_INDEX)
_GPU_EVENT = (RANK, DEVICE, STREAM, NAME, TS, DUR, CORRELATION)
_HOST_EVENT = (RANK, PID, TID, NAME, TS, DUR)

# -- the tables ------------------------------------------------------------------------

KERNELS = Table(
    "kernels",
    "One row per GPU kernel.",
    (
        *_GPU_EVENT,
        Column("grid", "int64", "total blocks in the grid", -1, "blocks"),
        Column("block", "int64", "threads per block", -1, "threads"),
        Column("registers", "int64", "registers per thread", -1),
        Column("shared_mem", "int64", "shared memory per block", -1, "bytes"),
        Column("occupancy", "float64", 'Kineto\'s "est. achieved occupancy %"', NAN, "%"),
        Column("blocks_per_sm", "float64", "blocks per SM, as Kineto reports it", NAN),
        *_LAUNCH,
    ),
)
MEMCPY = Table(
    "memcpy",
    "One row per GPU memory copy.",
    (
        *_GPU_EVENT,
        BYTES,
        Column("kind", "object", 'direction: "HtoD", "DtoH", "DtoD", "HtoH" or "PtoP"', ""),
        Column("src", "object", 'source memory: "Pageable", "Pinned" or "Device"', ""),
        Column("dst", "object", 'destination memory: "Pageable", "Pinned" or "Device"', ""),
        *_LAUNCH,
    ),
)
MEMSET = Table("memset", "One row per GPU memset.", (*_GPU_EVENT, BYTES, *_LAUNCH))
RUNTIME = Table(
    "runtime",
    "One row per CUDA/HIP runtime or driver call on the host.",
    (
        *_HOST_EVENT,
        replace(CORRELATION, doc="links the call to the GPU event it launched"),
        Column("cat", "object", 'category: "cuda_runtime", "cuda_driver", "cuda_sync", ...'),
        Column(
            "wait_on_stream",
            "int64",
            'a `cuda_sync` "Stream Wait Event" (its `tid` is the waiting stream): the stream '
            "whose recorded event it waits on",
            -1,
        ),
    ),
)
CPU_OPS = Table(
    "cpu_ops",
    "One row per CPU op (`cpu_op` events: aten ops, the user's own).",
    (
        *_HOST_EVENT,
        Column("external_id", "int64", "links the op to the launches inside it", -1),
        Column("flops", "float64", "FLOPs torch computed for the op", NAN, "FLOP"),
        INPUT_DIMS,
        INPUT_TYPES,
        Column("depth", "int32", "nesting depth on its thread (0 = top level)"),
    ),
)
ANNOTATIONS = Table(
    "annotations",
    "One row per user annotation (`record_function`, NVTX-style ranges), and the "
    "DataLoader's `python_function` frame (`dataloader.py(N): __next__`).",
    (*_HOST_EVENT, Column("on_gpu", "bool", "a `gpu_user_annotation` (on the GPU's timeline)")),
)
STEPS = Table(
    "steps",
    "One row per `ProfilerStep#N` (none: an empty table).",
    (RANK, Column("step", "int64", "N of ProfilerStep#N"), NAME, TS, DUR),
)
DEVICES = Table(
    "devices",
    "One row per GPU the trace describes (`deviceProperties`).",
    (
        RANK,
        replace(DEVICE, doc="GPU index, as GPU events name it"),
        replace(NAME, doc="GPU name"),
        Column("vendor", "object", '"nvidia", "amd" or "unknown"'),
        Column("sm_count", "int64", "streaming multiprocessors (CUs on AMD)", -1),
        Column("compute_capability", "object", 'e.g. "9.0"', ""),
        Column("total_memory", "int64", "device memory", -1, "bytes"),
        Column("max_threads_per_sm", "int64", "threads one SM can hold", -1),
    ),
)
COUNTERS = Table(
    "counters",
    "Per-kernel hardware counters (e.g. CUPTI range-profiler args; empty when absent).",
    (
        RANK,
        DEVICE,
        replace(NAME, doc="the kernel's name"),
        TS,
        Column("metric", "object", "counter name"),
        Column("value", "float64", "counter value"),
    ),
)
COMMS = Table(
    "comms",
    "What the trace says about each collective call: its host records "
    "(`record_param_comms` ops, `nccl:all_reduce`-style annotations) and the metadata "
    "newer PyTorch writes on collective kernels.",
    (
        *_HOST_EVENT,
        Column("source", "object", 'record kind: "kernel", "op" or "annotation"'),
        replace(DEVICE, doc="GPU of a kernel record", missing=""),
        CORRELATION,
        Column("collective", "object", 'PyTorch\'s "Collective name"', ""),
        Column("pg", "object", '"Process Group Name" or "Process Group ID"', ""),
        Column("pg_ranks", "object", "the group's ranks (raw JSON text)", ""),
        Column("group_size", "int64", "ranks in the group", -1),
        Column("seq", "int64", "the call's sequence number in its group", -1),
        Column("in_nelems", "int64", "input elements", -1),
        Column("out_nelems", "int64", "output elements", -1),
        Column("dtype", "object", "element type", ""),
        INPUT_DIMS,
        INPUT_TYPES,
    ),
)

#: Every trace table, in the order a Trace holds them.
SCHEMA: tuple[Table, ...] = (
    KERNELS, MEMCPY, MEMSET, RUNTIME, CPU_OPS, ANNOTATIONS, STEPS, DEVICES, COUNTERS, COMMS,
)  # fmt: skip

KERNEL_COLUMNS: tuple[str, ...] = KERNELS.names
MEMCPY_COLUMNS: tuple[str, ...] = MEMCPY.names
MEMSET_COLUMNS: tuple[str, ...] = MEMSET.names
RUNTIME_COLUMNS: tuple[str, ...] = RUNTIME.names
CPU_OP_COLUMNS: tuple[str, ...] = CPU_OPS.names
ANNOTATION_COLUMNS: tuple[str, ...] = ANNOTATIONS.names
STEP_COLUMNS: tuple[str, ...] = STEPS.names
DEVICE_COLUMNS: tuple[str, ...] = DEVICES.names
COUNTER_COLUMNS: tuple[str, ...] = COUNTERS.names
COMM_COLUMNS: tuple[str, ...] = COMMS.names

TABLES: dict[str, tuple[str, ...]] = {t.name: t.names for t in SCHEMA}


def _shared_dtypes(tables: Iterable[Table]) -> dict[str, str]:
    """Column name -> dtype for every column that is not text; a name means one dtype in
    every table that has it (so a frame's dtypes can be set by column name alone)."""
    out: dict[str, str] = {}
    for t in tables:
        for c in t.columns:
            if out.get(c.name, c.dtype) != c.dtype:
                raise TypeError(f"column {c.name!r} has two dtypes: {out[c.name]}, {c.dtype}")
            if c.dtype != "object":
                out.setdefault(c.name, c.dtype)
    return out


_DTYPES: dict[str, str] = _shared_dtypes(SCHEMA)
_BY_NAME: dict[str, Table] = {t.name: t for t in SCHEMA}


def empty_table(name: str) -> pd.DataFrame:
    """An empty frame with the contract's columns for table ``name``."""
    return _BY_NAME[name].empty()


def empty_columns(name: str) -> dict[str, np.ndarray]:
    """The contract's columns for table ``name``, empty."""
    return _BY_NAME[name].empty_columns()


def tables_markdown(tables: Iterable[Table] = SCHEMA) -> str:
    """The column reference of ``tables``, as docs/tables.md holds it."""
    return "\n\n".join(t.markdown() for t in tables) + "\n"


@dataclass
class Trace:
    """A loaded profiler trace (one file, or a folder of per-rank files).

    ``origin_ns`` is the wall-clock time (ns since the Unix epoch, the clock Kineto writes)
    of ``ts == 0``; ``None`` when the file gives no way to know it. Each table is a
    DataFrame whose columns :data:`SCHEMA` declares (see docs/tables.md).
    """

    source: str
    event_count: int
    origin_ns: int | None
    kernels: pd.DataFrame = field(default_factory=KERNELS.empty)
    memcpy: pd.DataFrame = field(default_factory=MEMCPY.empty)
    memset: pd.DataFrame = field(default_factory=MEMSET.empty)
    runtime: pd.DataFrame = field(default_factory=RUNTIME.empty)
    cpu_ops: pd.DataFrame = field(default_factory=CPU_OPS.empty)
    annotations: pd.DataFrame = field(default_factory=ANNOTATIONS.empty)
    steps: pd.DataFrame = field(default_factory=STEPS.empty)
    devices: pd.DataFrame = field(default_factory=DEVICES.empty)
    counters: pd.DataFrame = field(default_factory=COUNTERS.empty)
    comms: pd.DataFrame = field(default_factory=COMMS.empty)
    #: Top-level keys of the file other than ``traceEvents`` (per rank for a folder).
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Plain-language notes the reader made (e.g. "no kernel events: CPU-only trace").
    notes: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> list[int]:
        frames = (self.kernels, self.devices, self.cpu_ops)
        found: set[int] = set()
        for f in frames:
            found.update(int(r) for r in f["rank"].unique())
        return sorted(found) or [0]

    def __repr__(self) -> str:
        return (
            f"Trace({self.source!r}, events={self.event_count}, kernels={len(self.kernels)}, "
            f"memcpy={len(self.memcpy)}, memset={len(self.memset)}, "
            f"cpu_ops={len(self.cpu_ops)}, ranks={len(self.ranks)})"
        )
