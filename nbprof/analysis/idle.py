"""Idle gaps per stream and their causes, after HolisticTraceAnalysis's idle breakdown.

A gap before a GPU event (kernel, memcpy or memset) on a stream is:

- ``host_wait`` when the runtime call that launched it started after the previous event
  on that stream ended: the CPU had not enqueued work in time;
- ``kernel_wait`` when the work was already queued and the gap is shorter than
  :data:`KERNEL_WAIT_US`: the normal delay between back-to-back launches;
- ``other`` otherwise (waiting on an event from another stream, a collective, ...).

HTA's default threshold is 30 ns, which on the µs-resolution timestamps most traces carry
classifies nothing; back-to-back queued kernels start 1-4 µs apart on current GPUs, so 5 µs
is used here.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from nbprof.analysis._text import matches
from nbprof.analysis.inputs import dataloader_ops
from nbprof.analysis.syncs import SYNC_OPS, SYNC_RUNTIME
from nbprof.analysis.utilization import union_length

logger = logging.getLogger(__name__)

#: Gaps shorter than this (µs) between already-queued events count as ``kernel_wait``.
KERNEL_WAIT_US = 5.0
#: How many of the largest gaps per device get their CPU work named.
NAMED_GAPS = 50

IDLE_COLUMNS = ("rank", "device", "stream", "start", "end", "dur", "cause", "cpu_work")
_OPTIMIZER = re.compile(r"Optimizer\.|optimizer|\.step#|zero_grad", re.IGNORECASE)


def gpu_events(kernels: pd.DataFrame, memcpy: pd.DataFrame, memset: pd.DataFrame) -> pd.DataFrame:
    """Kernels, memcpys and memsets of one device together: stream, ts, end, launch_ts."""
    cols = ["rank", "device", "stream", "ts", "dur", "launch_ts"]
    parts = [f[cols] for f in (kernels, memcpy, memset) if not f.empty]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in [*cols, "end"]})
    ev = pd.concat(parts, ignore_index=True)
    ev["end"] = ev["ts"] + ev["dur"]
    return ev


def stream_gaps(events: pd.DataFrame, threshold_us: float = KERNEL_WAIT_US) -> pd.DataFrame:
    """Every idle gap between consecutive GPU events of each stream, with its cause."""
    if events.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in IDLE_COLUMNS})
    ev = events.sort_values(["stream", "ts"], kind="stable")
    stream = ev["stream"].to_numpy()
    ts = ev["ts"].to_numpy(dtype="float64")
    end = ev["end"].to_numpy(dtype="float64")
    launch = ev["launch_ts"].to_numpy(dtype="float64")
    # Running max of ends within each stream: an event nested in a longer one ends nothing.
    run_end = ev.assign(end=end).groupby("stream", sort=False)["end"].cummax().to_numpy()
    same = np.concatenate(([False], stream[1:] == stream[:-1]))
    prev_end = np.concatenate(([np.nan], run_end[:-1]))
    gap = ts - prev_end
    keep = same & (gap > 0)
    idx = np.flatnonzero(keep)
    g_start, g_end, g_dur = prev_end[idx], ts[idx], gap[idx]
    host = launch[idx] > g_start  # NaN launch compares False: not provably host wait
    cause = np.where(host, "host_wait", np.where(g_dur < threshold_us, "kernel_wait", "other"))
    out = pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy()[idx],
            "device": ev["device"].to_numpy()[idx],
            "stream": stream[idx],
            "start": g_start,
            "end": g_end,
            "dur": g_dur,
            "cause": cause,
            "cpu_work": "",
        }
    )
    return out


def breakdown(gaps: pd.DataFrame) -> tuple[float, float, float, float]:
    """(host_wait %, kernel_wait %, other %, idle µs): shares of all idle time on streams."""
    if gaps.empty:
        return 0.0, 0.0, 0.0, 0.0
    tot = float(gaps["dur"].sum())
    if tot <= 0:
        return 0.0, 0.0, 0.0, 0.0
    by = gaps.groupby("cause")["dur"].sum()
    return (
        float(by.get("host_wait", 0.0)) / tot * 100.0,
        float(by.get("kernel_wait", 0.0)) / tot * 100.0,
        float(by.get("other", 0.0)) / tot * 100.0,
        tot,
    )


def _intervals(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    s = df["ts"].to_numpy(dtype="float64")
    return s, s + df["dur"].to_numpy(dtype="float64")


def name_cpu_work(
    gaps: pd.DataFrame, cpu_ops: pd.DataFrame, runtime: pd.DataFrame, top: int = NAMED_GAPS
) -> pd.DataFrame:
    """Fill ``cpu_work`` for the ``top`` largest gaps: what the host did meanwhile.

    Categories, by how much of the gap they cover: DataLoader ``__next__``, ``.item()``
    (``aten::item``/``_local_scalar_dense``), the synchronize calls, the optimizer; else
    the top-level op that covers most of it; else ``python`` (no op was recorded, so the
    time went to untraced Python). A gap that opens as a synchronize call returns is named
    after the sync: the CPU had waited for the GPU, and then had nothing queued.
    """
    if gaps.empty:
        return gaps
    out = gaps.copy()
    largest = out["dur"].nlargest(min(top, len(out))).index
    ops = cpu_ops
    cats: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if not ops.empty:
        names = ops["name"].astype(str)
        cats["DataLoader __next__"] = _intervals(dataloader_ops(ops))
        cats[".item() (aten::item)"] = _intervals(ops[names.isin(SYNC_OPS)])
        cats["optimizer"] = _intervals(ops[matches(names, _OPTIMIZER)])
        top_level = ops[ops["depth"] == 0]
        tl_s, tl_e = _intervals(top_level)
        tl_names = top_level["name"].astype(str).to_numpy()
    else:
        tl_s = tl_e = np.zeros(0)
        tl_names = np.zeros(0, dtype=object)
    sync = runtime[runtime["name"].isin(SYNC_RUNTIME)] if not runtime.empty else runtime
    sync_s, sync_e = _intervals(sync) if not sync.empty else (np.zeros(0), np.zeros(0))
    sync_names = sync["name"].astype(str).to_numpy() if not sync.empty else np.zeros(0, object)
    for i in largest:
        a, b = float(out.at[i, "start"]), float(out.at[i, "end"])
        length = b - a
        best, cover = "", 0.0
        for label, (s, e) in cats.items():
            m = (s < b) & (e > a)
            if m.any():
                c = union_length(np.clip(s[m], a, b), np.clip(e[m], a, b))
                if c > cover:
                    best, cover = label, c
        m = (sync_s < b) & (sync_e > a)
        if m.any():
            c = union_length(np.clip(sync_s[m], a, b), np.clip(sync_e[m], a, b))
            opened = bool(((sync_e[m] >= a) & (sync_e[m] <= a + 0.2 * length)).any())
            if c > cover or (opened and cover < 0.5 * length):
                best, cover = f"after {sync_names[m][0]}", max(c, cover)
        if cover < 0.25 * length and len(tl_s):
            m = (tl_s < b) & (tl_e > a)
            if m.any():
                ov = np.minimum(tl_e[m], b) - np.maximum(tl_s[m], a)
                j = int(np.argmax(ov))
                if ov[j] >= 0.25 * length:
                    best, cover = str(tl_names[m][j]), float(ov[j])
        if cover < 0.25 * length and not best:
            best = "python"
        out.at[i, "cpu_work"] = best
    return out
