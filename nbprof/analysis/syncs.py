"""Synchronization points: where the CPU stopped to wait for the GPU."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

SYNC_RUNTIME = (
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
)  # fmt: skip
#: CPU ops that force a device-to-host sync (``.item()``, ``.tolist()``, printing a tensor).
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
SYNC_COLUMNS = ("name", "count", "total_us", "pct")


def sync_calls(runtime: pd.DataFrame, cpu_ops: pd.DataFrame) -> pd.DataFrame:
    """Every sync call (runtime API, ``cuda_sync`` activity on the CPU side, ``.item()``).

    ``cuda_sync`` events Kineto places on a GPU stream row (pid = device) describe the
    same waits as the runtime calls; only the CPU-side ones are counted.
    """
    parts = []
    if not runtime.empty:
        rt = runtime[runtime["name"].isin(SYNC_RUNTIME) & (runtime["cat"] != "cuda_sync")]
        parts.append(rt[["rank", "pid", "tid", "name", "ts", "dur"]])
        cs = runtime[runtime["cat"] == "cuda_sync"]
        if not cs.empty and rt.empty:
            parts.append(cs[["rank", "pid", "tid", "name", "ts", "dur"]])
    if not cpu_ops.empty:
        ops = cpu_ops[cpu_ops["name"].isin(SYNC_OPS)]
        # aten::item encloses aten::_local_scalar_dense: count the outer one only.
        item = ops[ops["name"] == "aten::item"]
        ops = item if not item.empty else ops
        parts.append(ops[["rank", "pid", "tid", "name", "ts", "dur"]])
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(
            {"rank": pd.Series(dtype="int32"), "pid": pd.Series(dtype="int64"),
             "tid": pd.Series(dtype="int64"), "name": pd.Series(dtype="object"),
             "ts": pd.Series(dtype="float64"), "dur": pd.Series(dtype="float64")}
        )  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def syncs_table(calls: pd.DataFrame, span_us: float) -> pd.DataFrame:
    if calls.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in SYNC_COLUMNS})
    g = calls.groupby("name", sort=False).agg(count=("dur", "size"), total_us=("dur", "sum"))
    g = g.reset_index().sort_values("total_us", ascending=False, kind="stable")
    tot = g["total_us"].to_numpy(dtype="float64")
    g["pct"] = tot / span_us * 100.0 if span_us > 0 else np.nan
    return g.reset_index(drop=True)[list(SYNC_COLUMNS)]
