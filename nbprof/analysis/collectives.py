"""One rank's collectives: each collective kernel with what the trace says about its call.

A collective kernel (NCCL/RCCL; :func:`~nbprof.analysis.classes.is_collective`) is
described, in this order of preference, by

1. the metadata newer PyTorch writes on the kernel itself ("Collective name", "In msg
   nelems", "Process Group Name", "Seq", ...);
2. the host records enclosing its launch call on the launching thread:
   ``record_param_comms`` (its "Collective name", sizes and dtype in new releases) and the
   process group's ``nccl:all_reduce``-style annotation (its kind in the name, its tensors'
   shapes and dtypes in "Input Dims"/"Input type" in old releases);
3. the kernel's own name (``ncclKernel_AllReduce_RING_LL_Sum_float``): the kind only.

Sizes follow NCCL's performance notes (nccl-tests ``doc/PERFORMANCE.md``): *S* is the size
of the whole operation in bytes, which for every kind is the larger of the input and the
output (an all-gather's output is n inputs, a reduce-scatter's input n outputs). Algorithm
bandwidth is *S / t*; bus bandwidth multiplies it by the factor that makes it comparable
with the hardware's link bandwidth whatever the number of ranks *n*:
all-reduce 2(n-1)/n; reduce-scatter, all-gather and all-to-all (n-1)/n; broadcast, reduce
and point-to-point 1.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis import intervals as iv
from nbprof.analysis._text import as_text
from nbprof.analysis.model import Basis
from nbprof.analysis.peaks import lookup

logger = logging.getLogger(__name__)

#: Collective kinds, as nbprof names them.
KINDS: tuple[str, ...] = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
    "send_recv", "gather", "scatter", "barrier", "other",
)  # fmt: skip
#: Point-to-point kinds: PyTorch numbers their calls apart from the collectives' ("Seq"
#: of a send and of an all-reduce on one group are different counters).
P2P_KINDS = frozenset({"send_recv"})

# Checked in this order: "reduce_scatter" before "reduce", "all_gather" before "gather".
_KIND_WORDS: tuple[tuple[str, str], ...] = (
    ("allreduce", "all_reduce"),
    ("reducescatter", "reduce_scatter"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("bcast", "broadcast"),
    ("sendrecv", "send_recv"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)
_NOT_LETTERS = re.compile(r"[^a-z]")
_KERNEL_PREFIXES = frozenset({"ncclkernel", "nccldevkernel", "rcclkernel", "rccldevkernel"})


def kind_of(text: str) -> str:
    """The collective kind a name says (``allreduce``, ``nccl:_all_gather_base``,
    ``ncclDevKernel_ReduceScatter_Sum_f32_RING_LL``), ``""`` when it says none."""
    t = text.lower()
    if ":" in t:  # an annotation: "nccl:all_to_all"
        t = t.split(":", 1)[1]
    parts = re.split(r"[_(]", t)
    if len(parts) > 1 and parts[0] in _KERNEL_PREFIXES:
        # A kernel: its kind is the word after the library's prefix, not its template words.
        t = parts[1]
    t = _NOT_LETTERS.sub("", t)
    for word, kind in _KIND_WORDS:
        if word in t:
            return kind
    return ""


def bus_factor(kind: str, n: int) -> float | None:
    """NCCL's bus-bandwidth factor for ``kind`` over ``n`` ranks (None: it gives none)."""
    if n < 1:
        return None
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n
    if kind in ("broadcast", "reduce", "send_recv"):
        return 1.0
    return None


_DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2,
    "bfloat16": 2, "int": 4, "int32": 4, "longint": 8, "long": 8, "int64": 8, "shortint": 2,
    "short": 2, "int16": 2, "signedchar": 1, "char": 1, "int8": 1, "unsignedchar": 1,
    "byte": 1, "uint8": 1, "bool": 1, "complexfloat": 8, "complexdouble": 16,
    "complexhalf": 4, "uint16": 2, "uint32": 4, "uint64": 8,
}  # fmt: skip


def dtype_bytes(text: str) -> int | None:
    """Bytes per element of a dtype as PyTorch writes it ("Float", "c10::BFloat16",
    "long int"); None when unknown."""
    t = text.strip().lower().removeprefix("c10::").replace(" ", "").replace("_", "")
    if t.startswith("float8"):
        return 1
    if t.startswith("complex<"):
        inner = dtype_bytes(t[len("complex<") : -1])
        return 2 * inner if inner else None
    return _DTYPE_BYTES.get(t)


def _shapes(dims: str, types: str) -> list[int]:
    """Bytes of each tensor listed in raw "Input Dims" / "Input type" text ([] unknown)."""
    # A job's collectives repeat a few shapes every step and on every rank, and parsing
    # them was a fifth of a DLRM rank's collectives table: remembered per text (bounded).
    if len(dims) + len(types) <= _SHAPES_TEXT:
        return list(_shapes_memo(dims, types))
    return _parse_shapes(dims, types)


#: Most characters of shape text a remembered answer of :func:`_shapes` covers (with at
#: most 1024 answers, a few MB whatever the trace).
_SHAPES_TEXT = 4096


@functools.lru_cache(maxsize=1024)
def _shapes_memo(dims: str, types: str) -> tuple[int, ...]:
    return tuple(_parse_shapes(dims, types))


def _parse_shapes(dims: str, types: str) -> list[int]:
    import orjson

    try:
        d = orjson.loads(dims) if dims else None
        t = orjson.loads(types) if types else None
    except orjson.JSONDecodeError:
        return []
    if not isinstance(d, list) or not isinstance(t, list):
        return []
    out: list[int] = []
    for shape, typ in zip(d, t, strict=False):
        size = dtype_bytes(typ) if isinstance(typ, str) else None
        if size is None or not isinstance(shape, list) or not shape:
            continue
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape):
            continue
        out.append(int(np.prod(shape, dtype=np.float64)) * size)
    return out


def _ranks(text: str) -> tuple[int, ...]:
    """A "Process Group Ranks" value (a list, or its text) as a tuple; () unknown."""
    if not text:
        return ()
    nums = re.findall(r"-?\d+", text)
    return tuple(int(n) for n in nums) if nums else ()


#: Columns of a rank's collectives table.
COLUMNS: tuple[str, ...] = (
    "kind", "pg", "seq", "order", "name", "device", "stream", "ts", "dur", "bytes", "dtype",
    "group_size", "group_ranks", "size_from", "exposed_us", "covered",
)  # fmt: skip


@dataclass(frozen=True)
class _Host:
    """One thread's host records of collective calls, sorted by start."""

    ts: np.ndarray
    end: np.ndarray
    rows: np.ndarray  # row positions in the comms table


def rank_collectives(
    kernels: pd.DataFrame,
    collective: np.ndarray,
    compute: iv.Set,
    runtime: pd.DataFrame,
    comms: pd.DataFrame,
) -> pd.DataFrame:
    """The rank's collective kernels, one row each (:data:`COLUMNS`).

    ``kernels`` are one device's kernels and ``collective`` marks the collectives among
    them; ``compute`` is the set of time a non-collective kernel ran on that device (what
    hides a collective); ``runtime`` and ``comms`` are the rank's launch calls and
    collective records. ``covered`` lists, per kernel, the parts of it that compute hid
    (so a job can tell how much of a rank's wait was exposed); ``exposed_us`` is the rest.
    """
    sel = np.flatnonzero(np.asarray(collective, dtype=bool))
    if not len(sel):
        return _frames.empty(COLUMNS)
    # Columns of the collective rows only: filtering the whole kernels frame copies every
    # column, most of which nothing here reads.
    ts = _frames.column(kernels, "ts", "float64")[sel]
    dur = _frames.column(kernels, "dur", "float64")[sel]
    corr = _frames.column(kernels, "correlation", "int64")[sel]
    names = _text_at(kernels, "name", sel)
    cm = comms if comms is not None else pd.DataFrame()
    on_kernel = _kernel_meta(cm, corr)
    host_meta = _host_meta(cm, runtime, corr)
    metas: list[tuple[int | None, list[int]]] = [
        (
            on_kernel.get(int(c)) if c >= 0 else None,
            host_meta.get(int(c), []) if c >= 0 else [],
        )
        for c in corr
    ]
    # The records these kernels name, as plain dicts once: a row of a DataFrame read
    # field by field costs a Series each time.
    wanted = sorted({r for m, h in metas for r in ([m] if m is not None else []) + h})
    records = _records(cm, wanted)
    rows = [_describe(names[i], m, h, records) for i, (m, h) in enumerate(metas)]
    covered = [_clip(compute, a, b) for a, b in zip(ts, ts + dur, strict=True)]
    # k-th call of its kind on its group, in launch order: what matches calls across ranks
    # when the trace records no sequence numbers.
    seen: dict[tuple[object, object], int] = {}
    order = []
    for r in rows:
        key = (r["pg"], r["kind"])
        order.append(seen.get(key, 0))
        seen[key] = order[-1] + 1
    # One frame, built from its columns: the described fields are text and integers, as
    # the records give them, and the lists (group ranks, covered parts) are cells. Text
    # takes the type the public constructor gives it, as it always has here.
    col: dict[str, Any] = {
        c: np.array([r[c] for r in rows], dtype=object)
        for c in ("kind", "pg", "dtype", "size_from")
    }
    col.update({c: np.array([r[c] for r in rows], dtype="int64") for c in _INT_FIELDS})
    col["group_ranks"] = _cells([r["group_ranks"] for r in rows])
    col["order"] = np.array(order, dtype="int64")
    col["name"] = names
    col["device"] = _text_at(kernels, "device", sel)
    col["stream"] = _frames.column(kernels, "stream", "int64")[sel]
    col["ts"] = ts
    col["dur"] = dur
    col["exposed_us"] = dur - np.array([float(np.sum(e - s)) for s, e in covered])
    col["covered"] = _cells(covered)
    return _frames.constructed({c: col[c] for c in COLUMNS})


def as_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of a collectives table (:func:`rank_collectives`), each a dict of Python
    values: what a job matches calls across ranks with. Made where the rank is analysed, so
    that a worker sends back small rows (a frame costs more to send than its few calls) and
    the job reads each call's fields from a dict (a frame's row lookup costs tens of µs)."""
    if table.empty:
        return []
    names = [str(c) for c in table.columns]
    values = [_frames.column(table, c).tolist() for c in table.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def _text_at(df: pd.DataFrame, name: str, rows: np.ndarray) -> np.ndarray:
    """``as_text(df[name]).to_numpy()[rows]``: the values at the rows when they are text
    (asking the few collective rows, not every kernel of the device), else the column's
    text at them."""
    values = _frames.column(df, name)[rows]
    if values.dtype == object and _group.all_text(values):
        return values
    return np.asarray(as_text(df[name]).to_numpy()[rows])


_INT_FIELDS = ("seq", "bytes", "group_size")
#: The comms table's fields that describe a collective (what :func:`_describe` reads).
_FIELDS = (
    "collective", "source", "name", "pg", "pg_ranks", "seq", "group_size", "dtype",
    "in_nelems", "out_nelems", "input_dims", "input_types",
)  # fmt: skip


def _cells(values: list[Any]) -> np.ndarray:
    """An object column holding each value (a tuple or list) as one cell."""
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def _clip(s: iv.Set, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    w = iv.window(s, a, b)
    return np.clip(w[0], a, b), np.clip(w[1], a, b)


def _records(cm: pd.DataFrame, rows: list[int]) -> dict[int, dict[str, Any]]:
    """The rows of ``cm`` at these positions, as plain dicts by position (what
    ``cm.iloc[rows][_FIELDS].to_dict("index")`` gives by label, without building the
    frame; positions, not labels: looking labels up cost a fifth of the table)."""
    if not rows:
        return {}
    at = np.asarray(rows, dtype=np.intp)
    cols = {c: _frames.column(cm, c)[at].tolist() for c in _FIELDS if c in cm.columns}
    return {r: {c: v[i] for c, v in cols.items()} for i, r in enumerate(rows)}


def _kernel_meta(cm: pd.DataFrame, corr: np.ndarray) -> dict[int, int]:
    """Correlation id -> position of the row of the kernel's own metadata in ``comms``."""
    if cm.empty:
        return {}
    c = _frames.column(cm, "correlation", "int64")
    mine = (_frames.column(cm, "source") == "kernel") & (c >= 0) & np.isin(c, corr)
    rows = np.flatnonzero(mine)
    return {int(x): int(r) for r, x in zip(rows.tolist(), c[mine].tolist(), strict=True)}


def _host_meta(cm: pd.DataFrame, runtime: pd.DataFrame, corr: np.ndarray) -> dict[int, list[int]]:
    """Correlation id -> positions of the host records enclosing the kernel's launch call on
    its thread, innermost first."""
    if cm.empty or runtime.empty:
        return {}
    on_host = _frames.column(cm, "source") != "kernel"
    if not on_host.any():
        return {}
    r_corr = _frames.column(runtime, "correlation", "int64")
    calls = np.flatnonzero((_frames.column(runtime, "cat") != "cuda_sync") & np.isin(r_corr, corr))
    # Each correlation's first call, in the calls' order (drop_duplicates' rows).
    _, first = np.unique(r_corr[calls], return_index=True)
    calls = calls[np.sort(first)]
    threads: dict[tuple[int, int], _Host] = {}
    h_ts = _frames.column(cm, "ts", "float64")[on_host]
    h_end = h_ts + _frames.column(cm, "dur", "float64")[on_host]
    labels = np.flatnonzero(on_host)
    pairs = list(
        zip(
            _frames.column(cm, "pid")[on_host].tolist(),
            _frames.column(cm, "tid")[on_host].tolist(),
            strict=True,
        )
    )
    uniq, code = _group.codes(pairs)
    for i, (pid, tid) in enumerate(uniq):
        at = np.flatnonzero(code == i)
        at = at[np.argsort(h_ts[at], kind="stable")]
        threads[(int(pid), int(tid))] = _Host(h_ts[at], h_end[at], labels[at])
    out: dict[int, list[int]] = {}
    for c, pid, tid, lts in zip(
        r_corr[calls],
        _frames.column(runtime, "pid", "int64")[calls],
        _frames.column(runtime, "tid", "int64")[calls],
        _frames.column(runtime, "ts", "float64")[calls],
        strict=True,
    ):
        h = threads.get((int(pid), int(tid)))
        if h is None:
            continue
        j = int(np.searchsorted(h.ts, lts, side="right"))
        found: list[int] = []
        # Host records of one call nest (record_param_comms around the annotation) and
        # calls follow one another, so the enclosing ones are among the last few starts.
        for p in range(j - 1, max(j - 9, -1), -1):
            if h.end[p] >= lts:
                found.append(int(h.rows[p]))
        if found:
            out[int(c)] = found
    return out


def _describe(
    name: str, meta: int | None, host: list[int], cm: dict[Any, dict[str, Any]]
) -> dict[str, object]:
    """Kind, group, sequence number and size of one collective kernel (see the module);
    ``cm`` holds the comms table's rows by position."""
    records = ([meta] if meta is not None else []) + host
    kind = pg = dtype = ranks_text = size_from = ""
    seq = group_size = -1
    nbytes = -1
    for r in records:
        row = cm[r]
        if not kind:
            kind = kind_of(str(row["collective"])) if row["collective"] else ""
            if not kind and row["source"] == "annotation":
                kind = kind_of(str(row["name"]))
        pg = pg or str(row["pg"])
        ranks_text = ranks_text or str(row["pg_ranks"])
        if seq < 0 and int(row["seq"]) >= 0:
            seq = int(row["seq"])
        if group_size < 0 and int(row["group_size"]) > 0:
            group_size = int(row["group_size"])
        if nbytes < 0:
            size = dtype_bytes(str(row["dtype"])) if row["dtype"] else None
            n = max(int(row["in_nelems"]), int(row["out_nelems"]))
            if size is not None and n >= 0:
                nbytes, dtype = n * size, str(row["dtype"])
                size_from = (
                    "the kernel's collective metadata"
                    if row["source"] == "kernel"
                    else "record_param_comms' message sizes"
                )
    if nbytes < 0:
        # Old releases: the tensors' shapes on the annotation (or the op). An all-reduce
        # of several tensors reduces them all; every other kind moves its largest buffer.
        for r in sorted(records, key=lambda r: cm[r]["source"] != "annotation"):
            row = cm[r]
            sizes = _shapes(str(row["input_dims"]), str(row["input_types"]))
            if sizes:
                the_kind = kind or kind_of(name)
                nbytes = sum(sizes) if the_kind == "all_reduce" else max(sizes)
                dtype = _first_type(str(row["input_types"]))
                size_from = f"the input shapes of {row['name']}"
                break
    if not kind:
        kind = kind_of(name) or "other"
    return {
        "kind": kind,
        "pg": pg,
        "seq": seq,
        "bytes": nbytes,
        "dtype": dtype,
        "group_size": group_size,
        "group_ranks": _ranks(ranks_text),
        "size_from": size_from,
    }


def _first_type(types: str) -> str:
    m = re.search(r'"([^"]+)"', types)
    return m.group(1) if m else ""


# -- the interconnect --------------------------------------------------------------------

#: NVLink bandwidth per direction (GB/s) of the GPU models of the peak table, from their
#: datasheets' total (both directions) NVLink figure halved: bus bandwidth is one-way.
_NVLINK_GBPS: dict[str, tuple[float, str]] = {
    "V100 SXM2": (150.0, "NVLink 2, 300 GB/s total (V100 datasheet)"),
    "A100 80GB SXM": (300.0, "NVLink 3, 600 GB/s total (A100 datasheet)"),
    "H100 SXM": (450.0, "NVLink 4, 900 GB/s total (H100 datasheet)"),
    "H200 SXM": (450.0, "NVLink 4, 900 GB/s total (H200 datasheet)"),
    "B200": (900.0, "NVLink 5, 1.8 TB/s total (HGX B200 datasheet)"),
}
#: GPUs one NVLink board connects (HGX/DGX): a group larger than this crosses the network.
BOARD_GPUS = 8


def link_peak(device_name: str, total_memory: int | None, ranks: int) -> tuple[float | None, Basis]:
    """The link bandwidth a collective over ``ranks`` GPUs named ``device_name`` could reach
    per direction, and its basis (unknown when the trace cannot say which link it used)."""
    peak = lookup(device_name, total_memory, "nvidia")
    model = peak.model if peak is not None else ""
    if model == "A100 40GB" and "SXM" in device_name.upper():
        model = "A100 80GB SXM"  # both SXM A100s have the same NVLink
    got = _NVLINK_GBPS.get(model)
    if got is None:
        why = f"no NVLink figure for {device_name!r}" if device_name else "the GPU is not named"
        return None, Basis("unknown", f"{why}; PCIe and network links are not in the trace")
    if ranks > BOARD_GPUS:
        return None, Basis(
            "unknown",
            f"the group spans {ranks} GPUs, more than one {BOARD_GPUS}-GPU NVLink board: its "
            "slowest link is the network, which the trace does not name",
        )
    gbps, src = got
    return gbps, Basis(
        "estimated",
        f"{model} NVLink per direction ({src}), assuming the ranks share one NVLink board: "
        "the trace does not say which link carried the data",
    )
