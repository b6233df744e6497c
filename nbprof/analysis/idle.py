"""Idle gaps per stream and their causes, after HolisticTraceAnalysis's idle breakdown.

These are the gaps the timeline shades on each stream's lane. A gap before a GPU event
(kernel, memcpy or memset) on a stream is:

- ``host_wait`` when the runtime call that launched it started after the previous event
  on that stream ended: the CPU had not enqueued work in time;
- ``kernel_wait`` when the work was already queued and the gap is shorter than
  :data:`~nbprof.analysis.stalls.KERNEL_WAIT_US`: the normal delay between back-to-back
  launches;
- ``other`` otherwise (waiting on an event from another stream, a collective, ...).

Streams overlap, so these gaps are no measure of the device's idle time: that is the
union over streams, in :mod:`nbprof.analysis.stalls`, which also decides the verdict.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis.model import IDLE_GAPS_TABLE
from nbprof.analysis.stalls import KERNEL_WAIT_US, NAMED_GAPS, HostActivity

logger = logging.getLogger(__name__)

IDLE_COLUMNS: tuple[str, ...] = IDLE_GAPS_TABLE.names


def gpu_events(
    kernels: pd.DataFrame,
    memcpy: pd.DataFrame,
    memset: pd.DataFrame,
    extra: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Kernels, memcpys and memsets of one device together: stream, ts, end, launch_ts,
    and the ``extra`` columns (one value per event, in that order) after them."""
    cols = ["rank", "device", "stream", "ts", "dur", "launch_ts"]
    frames = [f for f in (kernels, memcpy, memset) if not f.empty]
    if not frames:
        ev = _frames.empty([*cols, "end"], "float64")
        return ev.assign(**extra) if extra else ev
    if any(_frames.dtype_of(g, c) != _frames.dtype_of(frames[0], c) for g in frames for c in cols):
        # Columns of different types: pandas' concatenation decides the common ones.
        ev = pd.concat([f[cols] for f in frames], ignore_index=True)
        ev["end"] = ev["ts"] + ev["dur"]
        return ev.assign(**extra) if extra else ev
    # Built once from the concatenated columns (each keeps its type, text stays object).
    out: dict[str, object] = {}
    for c in cols:
        v = np.concatenate([_frames.column(g, c) for g in frames])
        out[c] = v
    ts = np.concatenate([_frames.column(g, "ts") for g in frames])
    out["end"] = ts + np.concatenate([_frames.column(g, "dur") for g in frames])
    out.update(extra or {})
    return _frames.frame(out)


_CAUSE_WORDS = np.array(["other", "kernel_wait", "host_wait"], dtype=object)


def stream_gaps(
    events: pd.DataFrame,
    threshold_us: float = KERNEL_WAIT_US,
    *,
    largest_first: bool = False,
    host: HostActivity | None = None,
) -> pd.DataFrame:
    """Every idle gap between consecutive GPU events of each stream, with its cause: by
    stream and time, or ``largest_first`` (ties in that order, as the idle-gaps table
    lists them). With ``host``, the ``cpu_work`` of the largest gaps is filled as
    :func:`name_cpu_work` fills it, in the one frame built (not a second copy of it)."""
    if events.empty:
        return _frames.empty(IDLE_COLUMNS)
    # By stream, then start (stable; NaN starts last, as sort_values puts them).
    all_ts = _frames.column(events, "ts", "float64")
    all_stream = _frames.column(events, "stream")
    order = np.lexsort((all_ts, all_stream))
    stream = all_stream[order]
    ts = all_ts[order]
    end = _frames.column(events, "end", "float64")[order]
    launch = _frames.column(events, "launch_ts", "float64")[order]
    same = np.concatenate(([False], stream[1:] == stream[:-1]))
    # Running max of ends within each stream: an event nested in a longer one ends nothing
    # (a missing end stays missing, as pandas' cummax leaves it).
    run_end = end.copy()
    starts = np.flatnonzero(~same)
    for a, b in zip(starts, np.concatenate((starts[1:], [len(end)])), strict=True):
        run_end[a:b] = np.fmax.accumulate(end[a:b])
    run_end[np.isnan(end)] = np.nan
    prev_end = np.concatenate(([np.nan], run_end[:-1]))
    gap = ts - prev_end
    keep = same & (gap > 0)
    idx = np.flatnonzero(keep)
    g_start, g_end, g_dur = prev_end[idx], ts[idx], gap[idx]
    late = launch[idx] > g_start  # NaN launch compares False: not provably host wait
    # Picked from the three words as objects: np.where over the words makes fixed-width
    # text, and the frame would then make a str object of every gap's.
    cause = _CAUSE_WORDS[np.where(late, 2, np.where(g_dur < threshold_us, 1, 0))]
    # The gaps' rows among the events; the event-sized arrays go before the frame is
    # made (a device's analysis is at its largest here).
    rows = order[idx]
    del all_ts, order, stream, ts, end, launch, same, run_end, starts, prev_end, gap, keep, idx
    del late
    by = np.arange(len(rows))
    work: str | list[str] = ""
    sorted_here = largest_first and not np.isnan(g_dur).any()
    if sorted_here:
        by = _group.largest_first(g_dur)  # pandas' stable descending sort
        if host is not None and len(rows):
            # Largest first already: name_cpu_work's choice is the first rows.
            work = [""] * len(rows)
            for p in range(min(NAMED_GAPS, len(rows))):
                work[p] = host.describe(float(g_start[by[p]]), float(g_end[by[p]]))
    rows = rows[by]
    out = _frames.frame(
        {
            "rank": _frames.column(events, "rank")[rows],
            "device": _frames.column(events, "device")[rows],
            "stream": all_stream[rows],
            "start": g_start[by],
            "end": g_end[by],
            "dur": g_dur[by],
            "cause": cause[by],
            "cpu_work": np.array(work, dtype=object)
            if isinstance(work, list)
            else np.full(len(rows), work, dtype=object),
        },
        own=True,  # every column made here
    )
    if largest_first and np.isnan(g_dur).any():
        out = out.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
    if host is not None and not sorted_here:
        return name_cpu_work(out, host)
    return out


def name_cpu_work(gaps: pd.DataFrame, host: HostActivity, top: int = NAMED_GAPS) -> pd.DataFrame:
    """Fill ``cpu_work`` for the ``top`` largest gaps: what the host did meanwhile
    (:meth:`~nbprof.analysis.stalls.HostActivity.describe`)."""
    if gaps.empty:
        return gaps
    dur = _frames.column(gaps, "dur")
    if dur.dtype == "float64" and not np.isnan(dur).any():
        # nlargest's choice (the largest, the first of equal ones), from the array.
        start = _frames.column(gaps, "start", "float64")
        end = _frames.column(gaps, "end", "float64")
        work = list(_frames.column(gaps, "cpu_work", object))
        for p in np.argsort(-dur, kind="stable")[: min(top, len(dur))].tolist():
            work[p] = host.describe(float(start[p]), float(end[p]))
        # Text as object, as stream_gaps holds it.
        return gaps.assign(cpu_work=pd.Series(work, index=gaps.index, dtype=object))
    out = gaps.copy()
    chosen = out["dur"].nlargest(min(top, len(out))).index
    if not out.index.is_unique:
        for i in chosen:
            out.at[i, "cpu_work"] = host.describe(
                float(out.at[i, "start"]), float(out.at[i, "end"])
            )
        return out
    # Read and written as arrays: a cell at a time through .at costs more than the describing.
    start = _frames.column(out, "start", "float64")
    end = _frames.column(out, "end", "float64")
    work = list(_frames.column(out, "cpu_work", object))
    for p in out.index.get_indexer(chosen):
        work[p] = host.describe(float(start[p]), float(end[p]))
    out["cpu_work"] = pd.Series(work, index=out.index, dtype=object)
    return out
