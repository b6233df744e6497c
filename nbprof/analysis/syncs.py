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
import re

import numpy as np
import pandas as pd

from nbprof.analysis import _group
from nbprof.analysis._text import matches
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
_COPY_CALL = re.compile(r"^(?:cuda|hip|cu)Memcpy")
_CALL_COLUMNS = ("rank", "pid", "tid", "name", "ts", "dur", "kind", "bytes")


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {"rank": pd.Series(dtype="int32"), "pid": pd.Series(dtype="int64"),
         "tid": pd.Series(dtype="int64"), "name": pd.Series(dtype="object"),
         "ts": pd.Series(dtype="float64"), "dur": pd.Series(dtype="float64"),
         "kind": pd.Series(dtype="object"), "bytes": pd.Series(dtype="int64")}
    )  # fmt: skip


def blocking_copies(runtime: pd.DataFrame, memcpy: pd.DataFrame) -> pd.DataFrame:
    """Copy calls that returned only after their copy ran: ``name`` reads
    ``"cudaMemcpyAsync (DtoH)"``; ``kind`` and ``bytes`` are the copy's."""
    if runtime.empty or memcpy.empty:
        return _empty()
    calls = runtime[matches(runtime["name"], _COPY_CALL)]
    if calls.empty:
        return _empty()
    kinds = memcpy["kind"].to_numpy()
    if not _group.all_text(kinds) or not _group.all_text(calls["name"].to_numpy()):
        return _blocking_copies_merged(calls, memcpy)
    # The join on (rank, correlation), as an inner merge orders it: each call in turn,
    # with its copies in their order.
    c_rank, c_corr = memcpy["rank"].to_numpy(), memcpy["correlation"].to_numpy()
    by_key: dict[tuple[int, int], list[int]] = {}
    for i, (r, c) in enumerate(zip(c_rank.tolist(), c_corr.tolist(), strict=True)):
        if c >= 0:
            by_key.setdefault((r, c), []).append(i)
    left: list[int] = []
    right: list[int] = []
    keys = zip(
        calls["rank"].to_numpy().tolist(), calls["correlation"].to_numpy().tolist(), strict=True
    )
    for i, key in enumerate(keys):
        for k in by_key.get(key, ()):
            left.append(i)
            right.append(k)
    if not left:
        return _empty()
    li, ri = np.array(left, dtype="int64"), np.array(right, dtype="int64")
    ts = calls["ts"].to_numpy(dtype="float64")[li]
    dur = calls["dur"].to_numpy(dtype="float64")[li]
    c_ts = memcpy["ts"].to_numpy(dtype="float64")[ri]
    waited = ts + dur >= c_ts + memcpy["dur"].to_numpy(dtype="float64")[ri]
    if not waited.any():
        return _empty()
    li, ri = li[waited], ri[waited]
    kind = np.array([k or "copy" for k in kinds[ri].tolist()], dtype=object)
    names = calls["name"].to_numpy()[li]
    return pd.DataFrame(
        {
            "rank": calls["rank"].to_numpy(dtype="int32")[li],
            "pid": calls["pid"].to_numpy(dtype="int64")[li],
            "tid": calls["tid"].to_numpy(dtype="int64")[li],
            "name": np.array(
                [f"{n} ({k})" for n, k in zip(names, kind, strict=True)], dtype=object
            ),
            "ts": ts[waited],
            "dur": dur[waited],
            "kind": kind,
            "bytes": memcpy["bytes"].to_numpy(dtype="int64")[ri],
        }
    )


def _blocking_copies_merged(calls: pd.DataFrame, memcpy: pd.DataFrame) -> pd.DataFrame:
    """:func:`blocking_copies` by pandas' merge, for names or kinds with missing values."""
    copies = memcpy[memcpy["correlation"].to_numpy() >= 0][
        ["rank", "correlation", "ts", "dur", "kind", "bytes"]
    ]
    j = calls.merge(copies, on=["rank", "correlation"], suffixes=("", "_copy"))
    if j.empty:
        return _empty()
    waited = (j["ts"] + j["dur"]).to_numpy() >= (j["ts_copy"] + j["dur_copy"]).to_numpy()
    j = j[waited]
    kind = j["kind"].astype(str).replace("", "copy")
    return pd.DataFrame(
        {
            "rank": j["rank"].to_numpy(dtype="int32"),
            "pid": j["pid"].to_numpy(dtype="int64"),
            "tid": j["tid"].to_numpy(dtype="int64"),
            "name": (j["name"].astype(str) + " (" + kind + ")").to_numpy(),
            "ts": j["ts"].to_numpy(dtype="float64"),
            "dur": j["dur"].to_numpy(dtype="float64"),
            "kind": kind.to_numpy(),
            "bytes": j["bytes"].to_numpy(dtype="int64"),
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
    parts = []
    cols = ["rank", "pid", "tid", "name", "ts", "dur"]
    if not runtime.empty:
        rt = runtime[runtime["name"].isin(SYNC_RUNTIME) & (runtime["cat"] != "cuda_sync")]
        parts.append(rt[cols])
        cs = runtime[runtime["cat"] == "cuda_sync"]
        if not cs.empty and rt.empty:
            parts.append(cs[cols])
    if not cpu_ops.empty:
        ops = cpu_ops[cpu_ops["name"].isin(SYNC_OPS)]
        # aten::item encloses aten::_local_scalar_dense: count the outer one only.
        item = ops[ops["name"] == "aten::item"]
        ops = item if not item.empty else ops
        parts.append(ops[cols])
    parts = [p.assign(kind="", bytes=-1) for p in parts if not p.empty]
    if memcpy is not None:
        parts.append(blocking_copies(runtime, memcpy))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return _empty()
    return pd.concat(parts, ignore_index=True)[list(_CALL_COLUMNS)]


def syncs_table(calls: pd.DataFrame, span_us: float) -> pd.DataFrame:
    if calls.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in SYNC_COLUMNS})
    names = calls["name"].to_numpy()
    if not _group.all_text(names):  # pandas drops missing names from the groups
        g = calls.groupby("name", sort=False).agg(count=("dur", "size"), total_us=("dur", "sum"))
        g = g.reset_index().sort_values("total_us", ascending=False, kind="stable")
        tot = g["total_us"].to_numpy(dtype="float64")
        g["pct"] = tot / span_us * 100.0 if span_us > 0 else np.nan
        return g.reset_index(drop=True)[list(SYNC_COLUMNS)]
    uniq, code = _group.codes(names.tolist())
    total_us = _group.sums(code, calls["dur"].to_numpy(dtype="float64"), len(uniq))
    order = np.argsort(-total_us, kind="stable")
    tot = total_us[order]
    return pd.DataFrame(
        {
            "name": np.array(uniq, dtype=object)[order],
            "count": _group.counts(code, len(uniq))[order],
            "total_us": tot,
            "pct": tot / span_us * 100.0 if span_us > 0 else np.full(len(tot), np.nan),
        }
    )
