"""The host side of one device's work: how fast it issued work, what it recorded instead of
running (graph capture), what was one-time set-up, and the window the profile covers.

A GPU can only run what the host has queued. These numbers say how the host kept up:

- *host time per kernel*: the median interval between consecutive launch calls on the
  thread that made them: what the host spends, per GPU operation, on everything (Python,
  the framework, the launch call itself);
- *launch-call time per kernel*: the median duration of the kernel launch calls alone;
- *launch-to-start delay*: the median time from a launch call to its kernel's start. By
  Little's law the queue holds about delay ÷ host-time-per-kernel operations: a delay
  near the launch latency means the queue is empty and the GPU waits for every launch;
  milliseconds mean the host runs far ahead.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis import intervals as iv
from nbprof.analysis._text import matches, name_column, name_pattern, text_column

logger = logging.getLogger(__name__)

#: Runtime/driver calls that launch a kernel (not copies or memsets).
KERNEL_LAUNCH = name_pattern(
    r"LaunchKernel|LaunchCooperativeKernel|hipLaunch|hipExtLaunch|hipModuleLaunch|"
    r"cuLaunch|GraphLaunch"
)
#: Calls that put any GPU work on a stream (kernels, copies, memsets, graphs).
WORK_LAUNCH = name_pattern(KERNEL_LAUNCH.pattern + r"|Memcpy|Memset")
_BEGIN_CAPTURE = name_pattern(r"StreamBeginCapture")
_END_CAPTURE = name_pattern(r"StreamEndCapture")
#: One-time (or allocation) set-up: context and stream creation, device queries, memory
#: allocation and release, module loading, graph instantiation. cudaFree(0) is the classic
#: way to create the context; the caching allocator calls cudaMalloc/cudaFree when it grows.
SETUP = name_pattern(
    r"^(?:cuda|hip|cu)(?:Malloc|Free|HostAlloc|MallocHost|FreeHost|HostRegister|"
    r"HostUnregister|StreamCreate|StreamDestroy|EventCreate|EventDestroy|GetDeviceProperties|"
    r"DeviceGetStreamPriorityRange|SetDevice|DeviceReset|ModuleLoad|ModuleUnload|"
    r"LibraryLoad|GraphInstantiate|GraphExecDestroy|GraphDestroy|CtxCreate|DevicePrimaryCtx|"
    r"Init\b|MemPool|MemCreate|MemMap|MemAddressReserve)",
)
#: A launch this many times slower than the trace's median launch call is loading the
#: kernel's code on its first launch (CUDA lazy module loading, HIP code-object loading), not
#: launching: a launch is a few µs, loading takes from a hundred µs to seconds.
LAZY_LOAD_FACTOR = 10.0


@dataclass(frozen=True)
class Launches:
    """The launch calls of one device's GPU work, each joined to what it launched."""

    #: runtime rows (ts, dur, tid, name) of calls that put work on this device, outside
    #: graph capture, sorted by ts; ``kernel`` marks kernel launches.
    calls: pd.DataFrame

    @property
    def kernel_calls(self) -> pd.DataFrame:
        return self.calls[_frames.column(self.calls, "kernel", bool)]


def device_launches(runtime: pd.DataFrame, events: pd.DataFrame, captured: iv.Set) -> Launches:
    """The runtime calls whose correlation id matches one of ``events`` (this device's
    kernels, copies and memsets), outside the capture windows ``captured``."""
    cols = ["ts", "dur", "tid", "name", "kernel"]
    if runtime.empty or events.empty:
        return Launches(_frames.empty(cols))
    corr = _frames.column(events, "correlation", "int64")
    corr = corr[corr >= 0]
    # Row numbers, not filtered frames; the name patterns are matched on the whole column
    # (factorized once per analysis), then read at the rows.
    ok = np.isin(_frames.column(runtime, "correlation"), corr) & (
        _frames.column(runtime, "cat") != "cuda_sync"
    )
    rows = np.flatnonzero(ok & matches(name_column(runtime, "name"), WORK_LAUNCH))
    ts = _frames.column(runtime, "ts", "float64")[rows]
    keep = ~inside(ts, captured)
    rows, ts = rows[keep], ts[keep]
    order = np.argsort(ts, kind="stable")  # by start, ties and missing ones (last) in order
    rows, ts = rows[order], ts[order]
    return Launches(
        _frames.frame(
            {
                "ts": ts,
                "dur": _frames.column(runtime, "dur", "float64")[rows],
                "tid": _frames.column(runtime, "tid")[rows],
                "name": _text(runtime, rows),
                "kernel": matches(name_column(runtime, "name"), KERNEL_LAUNCH)[rows],
            }
        )
    )


def _text(runtime: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The names at ``rows`` as text (what ``astype(str)`` gives)."""
    names = _frames.column(runtime, "name")[rows]
    if _group.all_text(names):
        return names
    return pd.Series(names, dtype=object).astype(str).to_numpy()


def host_us_per_kernel(launches: Launches) -> float | None:
    """Median interval between consecutive launch calls of one thread (µs)."""
    c = launches.calls
    if len(c) < 2:
        return None
    tid = _frames.column(c, "tid")
    if tid.dtype.kind in "iu":
        # Each thread's calls together, in their order: the intervals within a thread
        # (the median does not depend on the threads' order).
        order = np.argsort(tid, kind="stable")
        t, ts = tid[order], _frames.column(c, "ts", "float64")[order]
        d = np.diff(ts)[t[1:] == t[:-1]]
        return float(np.median(d)) if len(d) else None
    steps = [np.diff(_frames.column(g, "ts", "float64")) for _, g in c.groupby("tid", sort=False)]
    d = np.concatenate([s for s in steps if len(s)]) if any(len(s) for s in steps) else np.empty(0)
    return float(np.median(d)) if len(d) else None


def launch_us_per_kernel(launches: Launches) -> float | None:
    """Median duration of the kernel launch calls (µs)."""
    c = launches.calls
    if c.empty:
        return None
    # The kernel calls' durations from the columns (not a filtered copy of the calls).
    dur = _frames.column(c, "dur", "float64")[_frames.column(c, "kernel", bool)]
    return float(np.median(dur)) if len(dur) else None


def launch_to_start_us(kernels: pd.DataFrame, captured: iv.Set) -> float | None:
    """Median kernel start minus the start of its launch call (µs), for kernels whose
    launch is known and was not recorded into a graph."""
    if kernels.empty:
        return None
    launch = _frames.column(kernels, "launch_ts", "float64")
    ok = ~np.isnan(launch)
    ok &= ~inside(np.nan_to_num(launch), captured)
    if not ok.any():
        return None
    return float(np.median(_frames.column(kernels, "ts", "float64")[ok] - launch[ok]))


def inside(ts: np.ndarray, windows: iv.Set) -> np.ndarray:
    """Which times fall inside one of ``windows``."""
    if not len(windows[0]) or not len(ts):
        return np.zeros(len(ts), dtype=bool)
    j = np.searchsorted(windows[0], ts, side="right") - 1
    ok = j >= 0
    out = np.zeros(len(ts), dtype=bool)
    out[ok] = ts[ok] < windows[1][j[ok]]
    return out


@dataclass(frozen=True)
class Capture:
    """Stream-capture windows (CUDA/HIP graph capture): launches inside are recorded into
    a graph, not executed, so they are neither launch overhead nor idle GPU time."""

    windows: iv.Set
    recorded: int  # launch calls made inside the windows

    @property
    def us(self) -> float:
        return iv.total(self.windows)


def capture_windows(runtime: pd.DataFrame) -> Capture:
    """Each ``*StreamBeginCapture`` to the next ``*StreamEndCapture`` on its thread."""
    if runtime.empty:
        return Capture(iv.EMPTY, 0)
    text = text_column(runtime, "name")
    begin = matches(text, _BEGIN_CAPTURE)
    end = matches(text, _END_CAPTURE)
    if not begin.any():
        return Capture(iv.EMPTY, 0)
    starts: list[float] = []
    ends: list[float] = []
    marks = runtime[begin | end].sort_values("ts", kind="stable")
    for _, g in marks.groupby("tid", sort=False):
        open_at: float | None = None
        for name, ts, dur in zip(g["name"].astype(str), g["ts"], g["dur"], strict=True):
            if _BEGIN_CAPTURE.search(name):
                open_at = float(ts) if open_at is None else open_at
            elif open_at is not None:
                starts.append(open_at)
                ends.append(float(ts) + float(dur))
                open_at = None
        if open_at is not None:  # capture still open when the trace ends
            starts.append(open_at)
            ends.append(float((runtime["ts"] + runtime["dur"]).max()))
    windows = iv.merge(np.array(starts), np.array(ends))
    launch = matches(text, KERNEL_LAUNCH) | matches(text, re.compile(r"Memcpy|Memset"))
    recorded = int(inside(_frames.column(runtime, "ts", "float64")[launch], windows).sum())
    return Capture(windows, recorded)


def setup_calls(runtime: pd.DataFrame, captured: iv.Set) -> pd.DataFrame:
    """Set-up runtime calls (allocation, context/stream creation, module loading) and
    launches that took ``LAZY_LOAD_FACTOR`` × the median launch or more (loading the
    kernel's code on its first launch): ts, dur, name."""
    cols = ["ts", "dur", "name"]
    if runtime.empty:
        return _frames.empty(cols)
    rows = np.flatnonzero(_frames.column(runtime, "cat") != "cuda_sync")
    text = name_column(runtime, "name")
    setup = matches(text, SETUP)[rows]
    launch = matches(text, KERNEL_LAUNCH)[rows]
    durs = _frames.column(runtime, "dur", "float64")[rows]
    if launch.any():
        med = float(np.median(durs[launch]))
        # A slow launch also happens when the launch queue is full, but then the GPU has
        # work queued and no idle time is charged to it: only idle time is attributed.
        setup = setup | (launch & (durs >= LAZY_LOAD_FACTOR * max(med, 1.0)))
    rows = rows[setup]
    ts = _frames.column(runtime, "ts", "float64")[rows]
    keep = ~inside(ts, captured)
    rows = rows[keep]
    return _frames.frame(
        {
            "ts": ts[keep],
            "dur": _frames.column(runtime, "dur", "float64")[rows],
            "name": _text(runtime, rows),
        }
    )


def stream_waits(runtime: pd.DataFrame, device: str) -> pd.DataFrame:
    """The "Stream Wait Event" records Kineto writes for ``cudaStreamWaitEvent`` calls (on
    the device's row: pid = device, tid = the waiting stream): stream, ts, wait_on_stream
    (the stream whose event it waits on); empty when the trace has none."""
    cols = ("stream", "ts", "wait_on_stream")
    if runtime.empty or "wait_on_stream" not in runtime.columns:
        return _frames.empty(list(cols))
    target = _frames.column(runtime, "wait_on_stream")
    ok = (target >= 0) & (_frames.column(runtime, "cat") == "cuda_sync")
    if device.lstrip("-").isdigit():
        ok &= _frames.column(runtime, "pid") == int(device)
    rows = np.flatnonzero(ok)
    rows = rows[_frames.column(runtime, "name")[rows] == "Stream Wait Event"]
    return _frames.frame(
        {
            "stream": _frames.column(runtime, "tid", "int64")[rows],
            "ts": _frames.column(runtime, "ts", "float64")[rows],
            "wait_on_stream": target[rows].astype("int64"),
        }
    )


def window(frames: list[pd.DataFrame]) -> tuple[float, float]:
    """(first start, last end) over events of any kind; (0, 0) without events."""
    return window_of(
        [(_frames.column(f, "ts", "float64"), _frames.column(f, "dur", "float64")) for f in frames]
    )


def window_of(events: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """:func:`window` of (starts, durations) arrays."""
    lo, hi = np.inf, -np.inf
    for s, dur in events:
        if not len(s):
            continue
        e = s + dur
        lo, hi = min(lo, float(np.nanmin(s))), max(hi, float(np.nanmax(e)))
    return (lo, hi) if hi >= lo else (0.0, 0.0)
