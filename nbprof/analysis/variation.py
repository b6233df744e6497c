"""How much a run's metrics vary from one ProfilerStep to the next: what a comparison
measures a change against before it calls the change better or worse.

Each ProfilerStep repeats the same work, so the spread of a metric over a run's steps is
the run-to-run variation its value carries: a run's mean over ``n`` steps has a standard
error of ``sd / √n``, and two runs whose per-step means differ by less than two standard
errors of that difference (Welch's test, about 95% confidence) show no change. Steps are
a run's own replicates; a run with fewer than two gives no spread, and nothing is tested
against it.

Each step's values are the whole-run metrics' own definitions applied to the step: the
device's GPU time is cut at the first GPU event of each step (the GPU work from there to
the next step's first event is that step's), and the same accounting the analysis makes
(:func:`nbprof.analysis.stalls.account`) cuts each piece into kernels, copies and idle
time by cause. The last step's piece has no next step to close it: its kernels count, its
shares of time do not. Host-side shares (DataLoader, time before the first GPU event,
launch pace) are read over each step's own window.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, host, stalls
from nbprof.analysis import intervals as iv
from nbprof.analysis.device import Device
from nbprof.analysis.inputs import dataloader_set
from nbprof.analysis.model import DeviceMetrics, Diagnosis
from nbprof.analysis.utilization import SHORT_KERNEL_US, weighted_coverage
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)

#: Standard errors of the difference within which two runs' values are the same.
NOISE_SE = 2.0


def per_step(trace: Trace, diag: Diagnosis, dev: DeviceMetrics) -> dict[str, np.ndarray]:
    """One value per ProfilerStep of ``dev``'s rank for each metric of
    ``nbprof.compare/1`` that can be read per step (named as there); {} with fewer than two
    steps, or steps that overlap."""
    view = Device(trace, dev.rank, dev.device)
    st = view.steps
    if len(st) < 2:
        return {}
    s0 = _frames.column(st, "ts", "float64")
    order = np.argsort(s0, kind="stable")
    s0 = s0[order]
    s1 = s0 + _frames.column(st, "dur", "float64")[order]
    if not (s1 > s0).all() or not (s0[1:] >= s1[:-1]).all():
        return {}  # nested or overlapping steps: no partition of the run to compare
    n = len(s0)
    out: dict[str, np.ndarray] = {
        name: np.full(n, np.nan)
        for name in (
            "kernel_busy_pct", "gpu_busy_pct", "sm_efficiency_pct", "tensor_core_pct",
            "achieved_tflops", "comm_pct", "exposed_comm_pct", "comm_overlap_pct",
            "span_copy_only_pct", *(f"span_{c}_pct" for c in stalls.CAUSES), "sync_pct",
            "short_kernel_pct", "kernel_count", "gpu_span_us", "idle_queued_pct",
        )
    }  # fmt: skip
    if len(view.events):
        _gpu_pieces(view, diag, dev, s0, s1, out)
    _host_side(view, s0, s1, out)
    for direction, values in _copies(view, s0, s1).items():
        out.update({f"copy_{direction}_{what}": v for what, v in values.items()})
    return {name: v for name, v in out.items() if np.isfinite(v).sum() >= 2}


def within_noise(before: np.ndarray | None, after: np.ndarray | None) -> bool | None:
    """Whether the two runs' per-step values differ by less than :data:`NOISE_SE` standard
    errors of the difference of their means (Welch's test: each run's own spread); None
    where a run has fewer than two values."""
    if before is None or after is None:
        return None
    b, a = before[np.isfinite(before)], after[np.isfinite(after)]
    if len(b) < 2 or len(a) < 2:
        return None
    se = float(np.sqrt(b.var(ddof=1) / len(b) + a.var(ddof=1) / len(a)))
    return bool(abs(float(a.mean()) - float(b.mean())) < NOISE_SE * se)


def copy_value(copies: list[dict[str, Any]], direction: str, what: str) -> float | None:
    """Copies of one direction (every host-memory kind of it together): their time
    (``what="us"``), or the rate of those whose bytes are known (``"gbps"``)."""
    got = [c for c in copies if str(c.get("kind", "")).split(" ")[0] == direction]
    if not got:
        return None
    if what == "us":
        return float(sum(float(c.get("us") or 0.0) for c in got))
    # Each kind's rate is its known bytes over their own time: add bytes and times.
    known = [c for c in got if c.get("bytes") and c.get("gbps")]
    if not known:
        return None
    nbytes = sum(float(c["bytes"]) for c in known)
    return nbytes / sum(float(c["bytes"]) / (float(c["gbps"]) * 1e3) for c in known) / 1e3


def _pieces(ts: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each step's GPU events, as row ranges of the events sorted by start: from the first
    event at or after the step's start to the first at or after the next step's (the last
    step's end closes the last piece), and the row that closes each piece (-1: none)."""
    lo = np.searchsorted(ts, s0, side="left")
    hi = np.concatenate((lo[1:], [np.searchsorted(ts, s1[-1], side="left")]))
    closer = np.where(np.arange(len(s0)) < len(s0) - 1, hi, -1)
    closer = np.where((closer >= 0) & (closer < len(ts)), closer, -1)
    return np.stack((lo, hi), axis=1), closer


def _gpu_pieces(
    view: Device,
    diag: Diagnosis,
    dev: DeviceMetrics,
    s0: np.ndarray,
    s1: np.ndarray,
    out: dict[str, np.ndarray],
) -> None:
    ev = view.events
    ts_all = _frames.column(ev, "ts", "float64")
    order = np.argsort(ts_all, kind="stable")
    ts = ts_all[order]
    ranges, closer = _pieces(ts, s0, s1)
    k_n = len(view.k)
    is_kernel = order < k_n  # the events frame holds the kernels first
    comm_all = np.concatenate((view.collective, np.zeros(len(ev) - k_n, dtype=bool)))[order]
    dur = np.nan_to_num(_frames.column(ev, "dur", "float64")[order])
    tc = _tensor_core(diag, view.k)
    grid = _frames.column(view.k, "grid", "float64") if k_n else np.zeros(0)
    flops = _flops(view)
    blocking = view.blocking
    b_set = (
        iv.merge(
            _frames.column(blocking, "ts", "float64"),
            _frames.column(blocking, "ts", "float64") + _frames.column(blocking, "dur", "float64"),
        )
        if not blocking.empty
        else iv.EMPTY
    )
    for i, (lo, hi) in enumerate(ranges.tolist()):
        if hi - lo < 1:
            continue
        rows = order[lo:hi]
        part = ev.iloc[rows]
        comm = comm_all[lo:hi]
        if closer[i] >= 0:
            # The next piece's first event closes this one's last gap: at its start, with
            # no length (so what the gap waited for is its launch's).
            c = ev.iloc[order[closer[i] : closer[i] + 1]].assign(dur=0.0)
            c["end"] = c["ts"]
            part = pd.concat([part, c], ignore_index=True)
            comm = np.concatenate((comm, [False]))
        kern = is_kernel[lo:hi]
        krows = rows[kern]  # rows of view.k (kernels come first in the events)
        kd = dur[lo:hi][kern]
        ktime = float(kd.sum())
        out["kernel_count"][i] = float(len(krows))
        if len(krows):
            out["short_kernel_pct"][i] = float((kd < SHORT_KERNEL_US).mean() * 100.0)
        if ktime > 0:
            out["comm_pct"][i] = float(kd[comm_all[lo:hi][kern]].sum() / ktime * 100.0)
            if tc is not None:
                out["tensor_core_pct"][i] = float(kd[tc[krows]].sum() / ktime * 100.0)
        if closer[i] < 0:
            # A piece no next step closes ends at its own last event, not a step later:
            # its shares of time are not those of a whole step.
            continue
        acc = stalls.account(part, comm, view.activity, view.rank, view.device)
        span = acc.span_us
        if span <= 0:
            continue
        kernels = acc.compute_us + acc.exposed_comm_us
        out["kernel_busy_pct"][i] = kernels / span * 100.0
        out["gpu_busy_pct"][i] = (kernels + acc.copy_only_us) / span * 100.0
        out["span_copy_only_pct"][i] = acc.copy_only_us / span * 100.0
        for c_name, us in acc.causes.items():
            out[f"span_{c_name}_pct"][i] = us / span * 100.0
        out["idle_queued_pct"][i] = acc.queued_idle_us / span * 100.0
        out["exposed_comm_pct"][i] = acc.exposed_comm_us / span * 100.0
        if acc.comm_us > 0:
            out["comm_overlap_pct"][i] = (acc.comm_us - acc.exposed_comm_us) / acc.comm_us * 100
        out["gpu_span_us"][i] = span
        t0, t1 = ts[lo], float(np.max(ts[lo:hi] + dur[lo:hi]))
        if len(b_set[0]):
            within = iv.intersect(b_set, (np.array([t0]), np.array([t1])))
            out["sync_pct"][i] = iv.total(within) / span * 100.0
        else:
            out["sync_pct"][i] = 0.0
        if dev.sm_count and len(krows):
            g = grid[krows]
            ok = g > 0
            if ok.any():
                ks = ts[lo:hi][kern][ok]
                w = np.minimum(g[ok] / float(dev.sm_count), 1.0)
                out["sm_efficiency_pct"][i] = weighted_coverage(ks, ks + kd[ok], w) / span * 100
        if flops is not None:
            f_ts, f_flops = flops
            inside = (f_ts >= s0[i]) & (f_ts < s1[i])
            out["achieved_tflops"][i] = float(f_flops[inside].sum()) / span / 1e6


def _host_side(view: Device, s0: np.ndarray, s1: np.ndarray, out: dict[str, np.ndarray]) -> None:
    """The metrics read over each step's own window: the time before its first GPU event,
    its DataLoader share, its launch pace."""
    length = s1 - s0
    ev = view.events
    if len(ev):
        starts = np.sort(_frames.column(ev, "ts", "float64"))
        j = np.searchsorted(starts, s0, side="left")
        first = np.where(j < len(starts), starts[np.clip(j, 0, len(starts) - 1)], np.nan)
        out["pre_gpu_step_pct"] = np.where(first < s1, first - s0, np.nan) / length * 100.0
    if not view.fetches.empty:
        windows: iv.Set = (s0, s1)
        fetched = iv.per_interval(iv.intersect(dataloader_set(view.fetches), windows), windows)
        out["dataloader_pct"] = fetched / length * 100.0
    calls = view.launches.calls
    if calls.empty:
        return
    c_ts = _frames.column(calls, "ts", "float64")
    pace, launch = np.full(len(s0), np.nan), np.full(len(s0), np.nan)
    for i in range(len(s0)):
        mine = replace(view.launches, calls=_frames.rows(calls, (c_ts >= s0[i]) & (c_ts < s1[i])))
        p, d = host.host_us_per_kernel(mine), host.launch_us_per_kernel(mine)
        pace[i] = np.nan if p is None else p
        launch[i] = np.nan if d is None else d
    out["host_us_per_kernel"] = pace
    out["launch_us_per_kernel"] = launch


def _copies(view: Device, s0: np.ndarray, s1: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Per direction, each step's copy time and rate (copies starting in its window)."""
    from nbprof.analysis.transfers import copies_by_kind

    mc = view.mc
    if mc.empty:
        return {}
    ts = _frames.column(mc, "ts", "float64")
    per = [
        copies_by_kind(_frames.rows(mc, (ts >= a) & (ts < b))) for a, b in zip(s0, s1, strict=True)
    ]
    out: dict[str, dict[str, np.ndarray]] = {}
    for d in ("HtoD", "DtoH", "DtoD", "PtoP"):
        for what in ("us", "gbps"):
            v = [copy_value(p, d, what) for p in per]
            out.setdefault(d, {})[what] = np.array([np.nan if x is None else x for x in v])
    return out


def _tensor_core(diag: Diagnosis, k: pd.DataFrame) -> np.ndarray | None:
    """The diagnosis' Tensor Core flag of each of the device's kernels (its rows of the
    trace's kernel table)."""
    cls = diag.kernel_class
    if cls.empty or "tensor_core" not in cls or k.empty:
        return None
    flags = cls["tensor_core"].reindex(k.index)
    if flags.isna().any():
        return None
    return flags.to_numpy(dtype=bool)


def _flops(view: Device) -> tuple[np.ndarray, np.ndarray] | None:
    """The FLOP-counted ops' starts and FLOPs (None without any)."""
    ops = view.flop_ops[0]
    if ops.empty:
        return None
    f = _frames.column(ops, "flops", "float64")
    ok = f > 0
    if not ok.any():
        return None
    return _frames.column(ops, "ts", "float64")[ok], f[ok]
