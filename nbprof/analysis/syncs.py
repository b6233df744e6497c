"""Blocking calls: where the host stopped to wait for the GPU.

A call blocks the host until GPU work finishes: the synchronize APIs, ``.item()`` (which
copies a scalar to the host and waits for it), and every copy call that returned only
after its copy had run on the GPU (``cudaMemcpy``, a device-to-host ``cudaMemcpyAsync``
into pageable memory, ``hipMemcpyWithStream``, ``.cpu()``/``.to("cpu")``). A copy call
counts as blocking on that physical evidence alone (its call ended at or after its copy
ended), whatever its name says: an asynchronous copy that returned before its copy ran
did not make the host wait.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis._text import equals, is_in, matches, name_column, name_pattern, text_codes
from nbprof.analysis.model import SYNCS_TABLE

logger = logging.getLogger(__name__)

SYNC_RUNTIME = (
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
)  # fmt: skip
#: CPU ops that force a device-to-host sync (``.item()``, ``.tolist()``, printing a tensor).
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
SYNC_COLUMNS: tuple[str, ...] = SYNCS_TABLE.names
_COPY_CALL = name_pattern(r"^(?:cuda|hip|cu)Memcpy")
_CALL_COLUMNS = ("rank", "pid", "tid", "name", "ts", "dur", "kind", "bytes")


def _empty() -> pd.DataFrame:
    return _frames.empty_typed(
        (("rank", "int32"), ("pid", "int64"), ("tid", "int64"), ("name", "object"),
         ("ts", "float64"), ("dur", "float64"), ("kind", "object"), ("bytes", "int64"))
    )  # fmt: skip


def blocking_copies(runtime: pd.DataFrame, memcpy: pd.DataFrame) -> pd.DataFrame:
    """Copy calls that returned only after their copy ran: ``name`` reads
    ``"cudaMemcpyAsync (DtoH)"``; ``kind`` and ``bytes`` are the copy's."""
    if runtime.empty or memcpy.empty:
        return _empty()
    hit = np.flatnonzero(matches(name_column(runtime, "name"), _COPY_CALL))
    if not len(hit):
        return _empty()
    call_names = _frames.column(runtime, "name")[hit]
    kinds = _frames.column(memcpy, "kind")
    if not _group.all_text(kinds) or not _group.all_text(call_names):
        return _blocking_copies_merged(runtime.iloc[hit], memcpy)
    # The join on (rank, correlation), as an inner merge orders it: each call in turn,
    # with its copies in their order.
    c_rank, c_corr = _frames.column(memcpy, "rank"), _frames.column(memcpy, "correlation")
    h_rank = _frames.column(runtime, "rank")[hit]
    h_corr = _frames.column(runtime, "correlation")[hit]
    pairs = _joined_by_number(c_rank, c_corr, h_rank, h_corr)
    if pairs is None:
        pairs = _joined_by_dict(c_rank, c_corr, h_rank, h_corr)
    li, ri = pairs
    if not len(li):
        return _empty()
    rows = hit[li]
    ts = _frames.column(runtime, "ts", "float64")[rows]
    dur = _frames.column(runtime, "dur", "float64")[rows]
    c_ts = _frames.column(memcpy, "ts", "float64")[ri]
    waited = ts + dur >= c_ts + _frames.column(memcpy, "dur", "float64")[ri]
    if not waited.any():
        return _empty()
    li, ri, rows = li[waited], ri[waited], rows[waited]
    kind = np.array([k or "copy" for k in kinds[ri].tolist()], dtype=object)
    names = call_names[li]
    return _frames.frame(
        {
            "rank": _frames.column(runtime, "rank", "int32")[rows],
            "pid": _frames.column(runtime, "pid", "int64")[rows],
            "tid": _frames.column(runtime, "tid", "int64")[rows],
            "name": np.array(
                [f"{n} ({k})" for n, k in zip(names, kind, strict=True)], dtype=object
            ),
            "ts": ts[waited],
            "dur": dur[waited],
            "kind": kind,
            "bytes": _frames.column(memcpy, "bytes", "int64")[ri],
        }
    )


def _joined_by_dict(
    c_rank: np.ndarray, c_corr: np.ndarray, h_rank: np.ndarray, h_corr: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(call, copy) positions of every call and copy of one (rank, correlation), calls in
    turn, each one's copies in their order (a copy of correlation < 0 matches none)."""
    by_key: dict[tuple[int, int], list[int]] = {}
    for i, (r, c) in enumerate(zip(c_rank.tolist(), c_corr.tolist(), strict=True)):
        if c >= 0:
            by_key.setdefault((r, c), []).append(i)
    left: list[int] = []
    right: list[int] = []
    for i, key in enumerate(zip(h_rank.tolist(), h_corr.tolist(), strict=True)):
        for k in by_key.get(key, ()):
            left.append(i)
            right.append(k)
    return np.array(left, dtype="int64"), np.array(right, dtype="int64")


def _joined_by_number(
    c_rank: np.ndarray, c_corr: np.ndarray, h_rank: np.ndarray, h_corr: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_joined_by_dict`'s pairs, each (rank, correlation) made one number and the
    copies' numbers sorted (stable) and searched, for the thousands of copies of a large
    trace (a dict entry per copy and a lookup per call were most of the join); None for
    a few rows, or keys that are not integers or whose numbers would not fit in 62 bits."""
    if len(c_rank) + len(h_rank) < 1024 or not len(c_rank) or not len(h_rank):
        return None
    if any(a.dtype.kind not in "iu" for a in (c_rank, c_corr, h_rank, h_corr)):
        return None
    mine = np.flatnonzero(c_corr >= 0)
    if not len(mine):
        return np.zeros(0, dtype="int64"), np.zeros(0, dtype="int64")
    r, c = c_rank[mine].astype(np.int64), c_corr[mine].astype(np.int64)
    r_lo, r_hi, c_hi = int(r.min()), int(r.max()), int(c.max())
    if (r_hi - r_lo + 1) * (c_hi + 1) >= 1 << 62:
        return None
    number = (r - r_lo) * (c_hi + 1) + c
    order = np.argsort(number, kind="stable")  # a key's copies in their order
    number, mine = number[order], mine[order]
    hr, hc = h_rank.astype(np.int64), h_corr.astype(np.int64)
    ok = (hr >= r_lo) & (hr <= r_hi) & (hc >= 0) & (hc <= c_hi)
    h_number = np.where(ok, (hr - r_lo) * (c_hi + 1) + hc, -1)
    lo = np.searchsorted(number, h_number, side="left")
    n = np.searchsorted(number, h_number, side="right") - lo
    count = int(n.sum())
    left = np.repeat(np.arange(len(h_number), dtype="int64"), n)
    # Each pair's place in the sorted copies: its call's first, plus its place in the run.
    first = np.cumsum(n) - n
    at = np.arange(count) - np.repeat(first, n) + np.repeat(lo, n)
    return left, mine[at].astype("int64")


def _blocking_copies_merged(calls: pd.DataFrame, memcpy: pd.DataFrame) -> pd.DataFrame:
    """:func:`blocking_copies` by pandas' merge, for names or kinds with missing values."""
    copies = memcpy[_frames.column(memcpy, "correlation") >= 0][
        ["rank", "correlation", "ts", "dur", "kind", "bytes"]
    ]
    j = calls.merge(copies, on=["rank", "correlation"], suffixes=("", "_copy"))
    if j.empty:
        return _empty()
    waited = (j["ts"] + j["dur"]).to_numpy() >= (j["ts_copy"] + j["dur_copy"]).to_numpy()
    j = j[waited]
    kind = j["kind"].astype(str).replace("", "copy")
    # Text as object, as blocking_copies holds it.
    return _frames.frame(
        {
            "rank": _frames.column(j, "rank", "int32"),
            "pid": _frames.column(j, "pid", "int64"),
            "tid": _frames.column(j, "tid", "int64"),
            "name": (j["name"].astype(str) + " (" + kind + ")").to_numpy(dtype=object),
            "ts": _frames.column(j, "ts", "float64"),
            "dur": _frames.column(j, "dur", "float64"),
            "kind": kind.to_numpy(dtype=object),
            "bytes": _frames.column(j, "bytes", "int64"),
        }
    )


def sync_calls(
    runtime: pd.DataFrame, cpu_ops: pd.DataFrame, memcpy: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every blocking call: the synchronize APIs (runtime, or ``cuda_sync`` activity on the
    CPU side when the trace has no runtime ones), ``.item()``, and blocking copies.

    ``cuda_sync`` events Kineto places on a GPU stream row (pid = device) describe the
    same waits as the runtime calls; only the CPU-side ones are counted.
    """
    # Row numbers of each source frame, in the order their rows are listed.
    picked: list[tuple[pd.DataFrame, np.ndarray]] = []
    if not runtime.empty:
        gpu_side = equals(name_column(runtime, "cat"), "cuda_sync")
        sync = is_in(name_column(runtime, "name"), _SYNC_RUNTIME_SET)
        rt = np.flatnonzero(sync & ~gpu_side)
        picked.append((runtime, rt))
        if not len(rt):
            # A "Stream Wait Event" is a stream waiting on another on the GPU, never the
            # host: the other cuda_sync kinds (stream, event, context syncs) block it.
            waits = equals(name_column(runtime, "name"), "Stream Wait Event")
            picked.append((runtime, np.flatnonzero(gpu_side & ~waits)))
    if not cpu_ops.empty:
        names = name_column(cpu_ops, "name")
        ops = np.flatnonzero(is_in(names, _SYNC_OPS_SET))
        # aten::item encloses aten::_local_scalar_dense: count the outer one only.
        item = ops[np.asarray(names[ops] == "aten::item", dtype=bool)]
        picked.append((cpu_ops, item if len(item) else ops))
    picked = [(f, rows) for f, rows in picked if len(rows)]
    copies = blocking_copies(runtime, memcpy) if memcpy is not None else _empty()
    if not picked:
        return copies[list(_CALL_COLUMNS)].reset_index(drop=True) if not copies.empty else _empty()
    return _assemble(picked, copies)


_SYNC_RUNTIME_SET = frozenset(SYNC_RUNTIME)
_SYNC_OPS_SET = frozenset(SYNC_OPS)
_KEY_DTYPES = {"rank": "int32", "pid": "int64", "tid": "int64", "ts": "float64", "dur": "float64"}


def _assemble(picked: list[tuple[pd.DataFrame, np.ndarray]], copies: pd.DataFrame) -> pd.DataFrame:
    """The picked rows (``kind`` "", ``bytes`` -1) and then the blocking copies, as one
    frame: what concatenating their frames gives, built once from the columns."""
    cols = ["rank", "pid", "tid", "name", "ts", "dur"]
    got = [f for f, _ in picked]
    if not copies.empty:
        got.append(copies)
    if any(_frames.dtype_of(g, c) != _KEY_DTYPES[c] for g in got for c in _KEY_DTYPES) or any(
        _frames.dtype_of(g, "name") != np.dtype(object) for g in got[: len(picked)]
    ):  # other column types: pandas' concatenation decides the common ones
        parts = [f.iloc[rows][cols].assign(kind="", bytes=-1) for f, rows in picked]
        if not copies.empty:
            parts.append(copies)
        return pd.concat(parts, ignore_index=True)[list(_CALL_COLUMNS)]
    rows_of = [rows for _, rows in picked] + [slice(None)] * (not copies.empty)
    out: dict[str, Any] = {
        c: np.concatenate([_frames.column(g, c)[r] for g, r in zip(got, rows_of, strict=True)])
        for c in cols
    }
    n = len(out["ts"])
    n_copies = len(copies)
    kind = np.full(n, "", dtype=object)
    nbytes = np.full(n, -1, dtype="int64")
    if n_copies:
        kind[n - n_copies :] = _frames.column(copies, "kind", object)
        nbytes[n - n_copies :] = _frames.column(copies, "bytes", "int64")
    out["name"] = np.asarray(out["name"], dtype=object)  # object, as the trace's names are
    out["kind"] = kind
    out["bytes"] = nbytes
    return _frames.frame(out)


def syncs_table(calls: pd.DataFrame, span_us: float) -> pd.DataFrame:
    if calls.empty:
        return _frames.empty(SYNC_COLUMNS)
    names = _frames.column(calls, "name")
    if not _group.all_text(names):  # pandas drops missing names from the groups
        g = calls.groupby("name", sort=False).agg(count=("dur", "size"), total_us=("dur", "sum"))
        g = g.reset_index().sort_values("total_us", ascending=False, kind="stable")
        tot = _frames.column(g, "total_us", "float64")
        g["pct"] = tot / span_us * 100.0 if span_us > 0 else np.nan
        return g.reset_index(drop=True)[list(SYNC_COLUMNS)]
    uniq, code = text_codes(names)
    total_us = _group.sums(code, _frames.column(calls, "dur", "float64"), len(uniq))
    order = np.argsort(-total_us, kind="stable")
    tot = total_us[order]
    return _frames.frame(
        {
            "name": np.array(uniq, dtype=object)[order],
            "count": _group.counts(code, len(uniq))[order],
            "total_us": tot,
            "pct": tot / span_us * 100.0 if span_us > 0 else np.full(len(tot), np.nan),
        }
    )
