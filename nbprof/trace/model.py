"""The in-memory trace: columnar tables, one per kind of event.

Every reader produces a :class:`Trace`; analysis and views only ever read one. Times are
microseconds (float64) *relative to* :attr:`Trace.origin_ns`, so nanosecond precision
survives even when the file holds epoch timestamps (1.7e15 µs loses sub-µs digits in a
float64).

Each table is declared once, below, as a :class:`Table` of :class:`Column` s (name, dtype,
the value that means "unknown", unit, meaning); text columns are categorical, their
categories the distinct values sorted. The column tuples (``KERNEL_COLUMNS``...),
``TABLES``, the dtypes, :func:`empty_table` and the column reference in
``docs/tables.md`` (:func:`tables_markdown`) are all derived from it. Every frame has at
least its table's columns, in that order; extra columns are allowed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
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
        return frame_from_arrays(self.empty_columns(), own=True)

    def empty_columns(self) -> dict[str, Any]:
        """This table's columns, empty, with their dtypes (text: an empty Categorical)."""
        from nbprof.trace import text

        return {
            c.name: text.empty() if c.dtype == TEXT else np.empty(0, c.dtype) for c in self.columns
        }

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


def frame_from_arrays(
    columns: Mapping[str, Any], *, own: bool = False, index: pd.Index | None = None
) -> pd.DataFrame:
    """A frame of these equal-length 1-D arrays (on ``index``, else a RangeIndex), each
    column keeping its array's dtype: text held as objects stays object (the public
    constructor would infer pandas' own text type for it), a ``Categorical`` stays
    categorical. ``own``: the caller hands the arrays over (nothing will change them in
    place), so they need not be copied.

    Made by pandas' own constructor from arrays (``DataFrame._from_arrays``, private): the
    public one checks and infers every column again (a Series per object column), twice
    the cost of a small frame, which a job's analysis pays for every one of its ranks'
    dozens of frames. Where a pandas lacks it, the public constructor makes the same frame.
    """
    n = len(next(iter(columns.values()))) if columns else 0
    if index is None:
        index = pd.RangeIndex(n)
    # A copy of the names' Index, made once: a frame's own (``df.columns.name = ...``
    # changes it); made anew, an Index costs more than a small frame's arrays.
    names = _names(tuple(columns)).copy()
    make = getattr(pd.DataFrame, "_from_arrays", None)
    if make is not None:
        # It gathers the numpy columns of a dtype into one new block (a copy): only the
        # others (Categoricals), kept as they are, need copying for the frame to own them.
        arrays = [a if own or isinstance(a, np.ndarray) else _copy(a) for a in columns.values()]
        try:
            out: pd.DataFrame = make(arrays, names, index, verify_integrity=False)
            return out
        except TypeError:  # pragma: no cover - a pandas whose private signature changed
            pass
    arrays = [a if own else _copy(a) for a in columns.values()]
    return pd.DataFrame(  # the same frame, the public way
        {
            c: pd.Series(a, dtype=object, index=index, copy=False)
            if isinstance(a, np.ndarray) and a.dtype == object
            else a
            for c, a in zip(names, arrays, strict=True)
        },
        index=index,
        copy=False,
    )


@functools.lru_cache(maxsize=256)
def _names(names: tuple[str, ...]) -> pd.Index:
    # As pandas' constructor makes a frame's column names (their dtype inferred).
    return pd.Index(list(names), tupleize_cols=False)


def _copy(a: Any) -> Any:
    return a.copy() if isinstance(a, (np.ndarray, pd.Categorical)) else a


def _dtype_word(dtype: str) -> str:
    if dtype == "category":
        return "text (categorical)"
    return "str" if dtype == "object" else dtype


def _missing_word(missing: Any) -> str:
    if missing is None:
        return "never"
    if isinstance(missing, float) and math.isnan(missing):
        return "NaN"
    return f'`"{missing}"`' if isinstance(missing, str) else f"`{missing}`"


NAN = math.nan
#: The dtype of the trace tables' text columns: dictionary-encoded as read
#: (:mod:`nbprof.trace.text`), categories sorted.
TEXT = "category"

# -- columns several tables share ------------------------------------------------------

RANK = Column("rank", "int32", "rank of the process that wrote the event (0 for one file)")
DEVICE = Column("device", TEXT, "GPU: `args.device` when present, else the event's pid")
STREAM = Column("stream", "int64", "GPU stream (the event's tid)")
NAME = Column("name", TEXT, "event name")
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
LAUNCH_NAME = Column("launch_name", TEXT, "that launch call's name", "")
OP = Column("op", TEXT, "innermost CPU op enclosing the launch", "")
OP_INDEX = Column("op_index", "int64", "that op's row in `cpu_ops`", -1)
INPUT_DIMS = Column("input_dims", TEXT, "the op's input shapes (raw JSON text)", "")
INPUT_TYPES = Column("input_types", TEXT, "the op's input dtypes (raw JSON text)", "")
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
        Column("kind", TEXT, 'direction: "HtoD", "DtoH", "DtoD", "HtoH" or "PtoP"', ""),
        Column("src", TEXT, 'source memory: "Pageable", "Pinned" or "Device"', ""),
        Column("dst", TEXT, 'destination memory: "Pageable", "Pinned" or "Device"', ""),
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
        Column("cat", TEXT, 'category: "cuda_runtime", "cuda_driver", "cuda_sync", ...'),
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
        Column("vendor", TEXT, '"nvidia", "amd" or "unknown"'),
        Column("sm_count", "int64", "streaming multiprocessors (CUs on AMD)", -1),
        Column("compute_capability", TEXT, 'e.g. "9.0"', ""),
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
        Column("metric", TEXT, "counter name"),
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
        Column("source", TEXT, 'record kind: "kernel", "op" or "annotation"'),
        replace(DEVICE, doc="GPU of a kernel record", missing=""),
        CORRELATION,
        Column("collective", TEXT, 'PyTorch\'s "Collective name"', ""),
        Column("pg", TEXT, '"Process Group Name" or "Process Group ID"', ""),
        Column("pg_ranks", TEXT, "the group's ranks (raw JSON text)", ""),
        Column("group_size", "int64", "ranks in the group", -1),
        Column("seq", "int64", "the call's sequence number in its group", -1),
        Column("in_nelems", "int64", "input elements", -1),
        Column("out_nelems", "int64", "output elements", -1),
        Column("dtype", TEXT, "element type", ""),
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
            if c.dtype not in ("object", TEXT):
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
