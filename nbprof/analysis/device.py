"""All the numbers for one device (rank, device), each with its basis.

:class:`Device` holds what one device's metrics read (its events, its rank's host calls,
the intermediate results several metrics share), each computed once on first use.
:data:`METRICS` lists one small function per :class:`DeviceMetrics` field; each returns
the value and the :class:`Basis` saying where it came from. :func:`analyze_device` runs
the list.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import (
    _frames,
    _group,
    host,
    idle,
    inputs,
    peaks,
    roofline,
    stalls,
    syncs,
    tensorcores,
    transfers,
)
from nbprof.analysis import (
    intervals as iv,
)
from nbprof.analysis._text import equals, matches, name_column, name_pattern, text_column
from nbprof.analysis.classes import (
    class_shares,
    is_collective,
    kernel_classes,
    possible_comm,
    roofline_bounds,
)
from nbprof.analysis.model import (
    Basis,
    BasisKind,
    DeviceMetrics,
    IdleBreakdown,
    compute_units,
    utilization_tool,
)
from nbprof.analysis.samples import Measured, measured_for, nvml_gpu
from nbprof.analysis.utilization import (
    SHORT_KERNEL_US,
    busy_pct,
    occupancy_pct,
    short_kernel_pct,
    sm_efficiency_pct,
    weighted_coverage,
)
from nbprof.telemetry.model import Samples
from nbprof.trace.model import Trace, frame_from_arrays
from nbprof.trace.tables import vendor_of
from nbprof.units import duration as _duration

logger = logging.getLogger(__name__)

Measure = tuple[Any, Basis]
_NO_PROPS = "the trace's device properties do not give it"
_GEMM_LIKE = name_pattern(r"gemm|gemv|xmma", re.IGNORECASE)


def _sel(df: pd.DataFrame, rank: int, device: str) -> pd.DataFrame:
    if df.empty:
        return df
    mask = _frames.column(df, "rank") == rank
    dev = name_column(df, "device")
    if (isinstance(dev, pd.Categorical) or dev.dtype == object) and _group.all_text(dev):
        mask &= equals(dev, device)
    else:
        mask &= df["device"].astype(str).to_numpy() == device
    return _frames.rows(df, mask)


@dataclass
class Device:
    """One device's events and its rank's host activity; shared results, computed once."""

    trace: Trace
    rank: int
    device: str
    samples: Samples | None = None
    k: pd.DataFrame = field(init=False)
    mc: pd.DataFrame = field(init=False)
    ms: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        self.k = _sel(self.trace.kernels, self.rank, self.device)
        self.mc = _sel(self.trace.memcpy, self.rank, self.device)
        self.ms = _sel(self.trace.memset, self.rank, self.device)

    # -- the device and its rank ------------------------------------------------------

    @cached_property
    def runtime(self) -> pd.DataFrame:
        return _frames.rank_rows(self.trace.runtime, self.rank)

    @cached_property
    def cpu(self) -> pd.DataFrame:
        return _frames.rank_rows(self.trace.cpu_ops, self.rank)

    @cached_property
    def annotations(self) -> pd.DataFrame:
        return _frames.rank_rows(self.trace.annotations, self.rank)

    @cached_property
    def steps(self) -> pd.DataFrame:
        return _frames.rank_rows(self.trace.steps, self.rank)

    @cached_property
    def props(self) -> dict[str, Any]:  # one row of the devices table
        d = self.trace.devices
        if d.empty:
            return {}
        dev = _frames.column(d, "device")
        if dev.dtype == object and _group.all_text(dev):  # as text already: no astype copy
            dev = dev == self.device
        else:
            dev = d["device"].astype(str).to_numpy() == self.device
        at = np.flatnonzero((_frames.column(d, "rank") == self.rank) & dev)
        if not len(at):
            at = np.flatnonzero(dev)
        if not len(at):
            return {}
        return _frames.row_dict(d, int(at[0]))

    @cached_property
    def vendor(self) -> tuple[str, Basis]:
        """The vendor and its basis: from the properties or name, else from the launch API
        the trace used (``cuda*``/``cu*`` calls vs ``hip*``), else unknown."""
        v = str(self.props.get("vendor") or "")
        if v not in ("nvidia", "amd"):
            v = vendor_of(str(self.props.get("name") or ""))
        if v != "unknown":
            return v, Basis("trace", "the device name in the trace's device properties")
        rt = self.runtime
        if not rt.empty:
            names = text_column(rt, "name")
            if matches(names, r"^hip").any():
                return "amd", Basis("estimated", "the trace's launch calls are HIP (hip*)")
            if matches(names, r"^cu(?:da)?[A-Z]").any():
                return "nvidia", Basis("estimated", "the trace's launch calls are CUDA (cu*)")
        return "unknown", Basis("unknown", "no known device name and no CUDA or HIP calls")

    @property
    def vendor_name(self) -> str:
        return self.vendor[0]

    @property
    def name(self) -> str:
        return str(self.props.get("name") or "")

    @property
    def sm_count(self) -> int | None:
        sm = int(self.props.get("sm_count", -1) or -1) if self.props else -1
        return sm if sm > 0 else None

    @property
    def cc(self) -> str | None:
        return str(self.props.get("compute_capability") or "") or None

    # -- GPU time -------------------------------------------------------------------

    @cached_property
    def events(self) -> pd.DataFrame:
        """Kernels, copies and memsets together (``table`` names which), with
        ``launch_end``: when the launch call returned, i.e. when the work was queued
        (the call's start when its duration is unknown)."""
        tables = np.repeat(
            np.array(["kernel", "memcpy", "memset"], dtype=object),
            [len(self.k), len(self.mc), len(self.ms)],
        )
        parts = [f for f in (self.k, self.mc, self.ms) if not f.empty]
        corr = (
            np.concatenate([_frames.column(f, "correlation", "int64") for f in parts])
            if parts
            else np.zeros(0, dtype="int64")
        )
        launch = (
            np.concatenate([_frames.column(f, "launch_ts", "float64") for f in parts])
            if parts
            else np.zeros(0, dtype="float64")
        )
        rt = self.runtime
        call_dur = np.zeros(len(launch))
        if not rt.empty and len(launch):
            r_corr = _frames.column(rt, "correlation", "int64")
            calls = (_frames.column(rt, "cat") != "cuda_sync") & (r_corr >= 0)
            # Each correlation's first launch call (what drop_duplicates keeps); an unknown
            # or missing duration counts as 0.
            c_corr = r_corr[calls]
            c_dur = _frames.column(rt, "dur", "float64")[calls]
            uniq, first = np.unique(c_corr, return_index=True)
            if len(uniq):
                at = np.minimum(np.searchsorted(uniq, corr), len(uniq) - 1)
                found = uniq[at] == corr
                call_dur = np.where(found, c_dur[first][at], 0.0)
                call_dur[np.isnan(call_dur)] = 0.0
        names = (
            np.concatenate([_frames.column(f, c, object) for f in parts])
            if parts
            else np.zeros(0, dtype=object)
            for c in ("name", "launch_name")
        )
        name, launch_name = names
        return idle.gpu_events(
            self.k, self.mc, self.ms,
            {"table": tables, "correlation": corr,
             "launch_end": launch + call_dur, "name": name, "launch_name": launch_name},
        )  # fmt: skip

    @cached_property
    def span(self) -> tuple[float, float]:
        ev = self.events
        if ev.empty:
            return 0.0, 0.0
        ts, end = _frames.column(ev, "ts"), _frames.column(ev, "end")
        if ts.dtype == end.dtype == "float64" and not (np.isnan(ts).any() or np.isnan(end).any()):
            return float(ts.min()), float(end.max())
        return float(ev["ts"].min()), float(ev["end"].max())  # pandas skips missing times

    @property
    def span_us(self) -> float:
        return self.span[1] - self.span[0]

    @cached_property
    def kdur(self) -> np.ndarray:
        return _frames.column(self.k, "dur", "float64")

    @cached_property
    def collective(self) -> np.ndarray:
        """Collective kernels among this device's kernels."""
        return is_collective(text_column(self.k, "name")) if not self.k.empty else np.zeros(0, bool)

    # -- the host -------------------------------------------------------------------

    @cached_property
    def capture(self) -> host.Capture:
        return host.capture_windows(self.runtime)

    @cached_property
    def launches(self) -> host.Launches:
        return host.device_launches(self.runtime, self.events, self.capture.windows)

    @cached_property
    def blocking(self) -> pd.DataFrame:
        """Blocking calls of the rank outside graph capture (every one, not clipped)."""
        calls = syncs.sync_calls(
            self.runtime, self.cpu, _frames.rank_rows(self.trace.memcpy, self.rank)
        )
        if calls.empty:
            return calls
        return _frames.rows(
            calls, ~host.inside(_frames.column(calls, "ts", "float64"), self.capture.windows)
        )

    @cached_property
    def fetches(self) -> pd.DataFrame:
        return inputs.dataloader_ops(self.cpu, self.annotations)

    @cached_property
    def input_work(self) -> pd.DataFrame:
        """The input pipeline's host calls: the fetches and CPU preprocessing."""
        return inputs.input_ops(self.cpu, self.annotations, self.fetches)

    @cached_property
    def waits(self) -> pd.DataFrame:
        """This device's "Stream Wait Event" records: stream (the waiting one), ts,
        wait_on_stream."""
        return host.stream_waits(self.runtime, self.device)

    @cached_property
    def setup(self) -> pd.DataFrame:
        return host.setup_calls(self.runtime, self.capture.windows)

    @cached_property
    def window(self) -> tuple[float, float]:
        cpu_side = ~_frames.column(self.annotations, "on_gpu", bool)
        return host.window_of(
            [
                (_frames.column(f, "ts", "float64")[m], _frames.column(f, "dur", "float64")[m])
                for f, m in (
                    (self.runtime, slice(None)),
                    (self.cpu, slice(None)),
                    (self.annotations, cpu_side),
                    (self.events, slice(None)),
                )
            ]
        )

    @cached_property
    def activity(self) -> stalls.HostActivity:
        return stalls.host_activity(
            self.blocking,
            inputs.dataloader_set(self.input_work),
            self.setup,
            self.cpu,
            self.capture.windows,
            self.input_work,
        )

    @cached_property
    def accounting(self) -> stalls.Accounting:
        comm = np.concatenate(
            (self.collective, np.zeros(len(self.events) - len(self.k), dtype=bool))
        )
        maybe = np.concatenate(
            (self.possible_comm, np.zeros(len(self.events) - len(self.k), dtype=bool))
        )
        return stalls.account(
            self.events, comm, self.activity, self.rank, self.device, self.waits, maybe
        )

    # -- kernels: Tensor Cores, classes, roofline -------------------------------------

    @cached_property
    def measured(self) -> Measured | None:
        t0, t1 = self.span
        return measured_for(self.samples, self.device, self.trace.origin_ns, t0, t1)

    @cached_property
    def tensor_cores(self) -> tuple[tensorcores.TensorCoreResult, str]:
        """Per-kernel Tensor Core flags and how they were decided (with the NVML override)."""
        counters = self.trace.counters
        tc = tensorcores.classify(
            self.k, self.trace.cpu_ops, vendor=self.vendor_name, compute_capability=self.cc,
            counters=_sel(counters, self.rank, self.device) if not counters.empty else None,
        )  # fmt: skip
        meas = self.measured
        if meas is not None and meas.tensor_util is not None and meas.tensor_util < 0.5:
            # The hardware saw no Tensor Core activity at all: that outranks any name.
            how = f"NVML GPM tensor activity {meas.tensor_util:.1f}% over {meas.count} samples"
            return tensorcores.TensorCoreResult(np.zeros(len(self.k), bool), "measured", how), how
        how = tc.how
        if meas is not None and meas.tensor_util is not None and not tc.flags.any():
            # Counters saw tensor work that no name or op explains: the evidence is stale.
            how += (
                f"; but NVML GPM measured {meas.tensor_util:.1f}% tensor activity, so "
                "kernels these rules do not recognise used Tensor Cores"
            )
        return tc, how

    @cached_property
    def peak(self) -> peaks.Peak | None:
        if self.vendor_name != "nvidia":
            return None
        total = int(self.props.get("total_memory", -1) or -1) if self.props else -1
        return peaks.lookup(self.name, total if total > 0 else None, self.vendor_name)

    @cached_property
    def flop_ops(self) -> tuple[pd.DataFrame, bool]:
        """The rank's outermost FLOP-counted ops (the roofline's and the bounds' input)."""
        return roofline.flop_ops(self.cpu)

    @cached_property
    def roof(self) -> pd.DataFrame:
        return roofline.roofline(
            self.cpu, self.k, self.trace.cpu_ops, self.peak, self.tensor_cores[0].flags,
            flops=self.flop_ops,
        )  # fmt: skip

    @cached_property
    def roof_bounds(self) -> np.ndarray:
        """Per kernel, the roofline bound of the FLOP-counted op that launched it ("")."""
        return roofline_bounds(
            self.k, self.cpu, self.trace.cpu_ops, self.roof, flop_ops=self.flop_ops[0]
        )

    @cached_property
    def roof_rates(self) -> tuple[Measure, Measure]:
        """(achieved TFLOP/s, achieved GB/s) with their bases: read from the roofline once
        for both metrics."""
        return _roof_rates(self)

    @cached_property
    def classes(self) -> pd.DataFrame:
        # After the roofline: a kernel launched inside a memory-bound op is memory
        # evidence its name may not give.
        evidence = self.roof_bounds == "memory"
        return kernel_classes(
            text_column(self.k, "name"), self.tensor_cores[0].flags, evidence, index=self.k.index
        )

    @cached_property
    def class_pct(self) -> dict[str, float]:
        return class_shares(self.kdur, _frames.column(self.classes, "cls"))

    @cached_property
    def possible_comm(self) -> np.ndarray:
        """Kernels no name rule knows that behave as communication kernels do
        (:func:`~nbprof.analysis.classes.possible_comm`)."""
        k = self.k
        if k.empty:
            return np.zeros(0, bool)
        return possible_comm(
            _frames.column(k, "stream"),
            self.kdur,
            _frames.column(k, "grid", "float64"),
            _frames.column(self.classes, "cls"),
            self.sm_count,
        )

    @property
    def ktime(self) -> float:
        return float(self.kdur.sum())


# -- one function per metric: (value, basis) -------------------------------------------


def _vendor(d: Device) -> Measure:
    return d.vendor


def _sm_count(d: Device) -> Measure:
    if d.sm_count is None:
        return None, Basis("unknown", _NO_PROPS)
    return d.sm_count, Basis("trace", "the trace's device properties (numSms)")


def _compute_capability(d: Device) -> Measure:
    if d.cc is None:
        return None, Basis("unknown", _NO_PROPS)
    return d.cc, Basis("trace", "the trace's device properties")


def _counts(what: str, frame: str) -> Callable[[Device], Measure]:
    def count(d: Device) -> Measure:
        return len(getattr(d, frame)), Basis("trace", f"{what} events on this device")

    return count


def _gpu_span(d: Device) -> Measure:
    return d.span_us, Basis("trace", "last GPU event end − first GPU event start")


def _kernel_busy(d: Device) -> Measure:
    s = _frames.column(d.k, "ts", "float64")
    how = (
        f"union of kernel intervals ÷ GPU span: what {utilization_tool(d.vendor_name)}'s "
        "utilization averages to"
    )
    return busy_pct(s, s + d.kdur, d.span_us), Basis("trace", how)


def _gpu_busy(d: Device) -> Measure:
    ev = d.events
    s, e = _frames.column(ev, "ts", "float64"), _frames.column(ev, "end", "float64")
    how = "union of kernel, memcpy and memset intervals ÷ span"
    return busy_pct(s, e, d.span_us), Basis("trace", how)


def _sm_efficiency(d: Device) -> Measure:
    units = compute_units(d.vendor_name)
    eff, left_out = sm_efficiency_pct(d.k, d.sm_count, d.span_us)
    if eff is None:
        why = (
            f"{units[:-1]} count unknown (no deviceProperties)"
            if d.sm_count is None
            else "no kernel grid sizes"
        )
        return None, Basis("unknown", why if not d.k.empty else "no kernels")
    how = f"min(grid ÷ {d.sm_count} {units}, 1) per kernel, overlaps add (≤1), ÷ span"
    if left_out:
        how += f"; {left_out} kernels without a grid size left out"
    return eff, Basis("trace", how)


def _occupancy(d: Device) -> Measure:
    occ = occupancy_pct(d.k)
    if occ is None:
        return None, Basis("unknown", "the trace has no est. achieved occupancy")
    return occ, Basis("trace", "kernel-time-weighted mean of Kineto's est. achieved occupancy")


def _tensor_core_pct(d: Device) -> Measure:
    tc, how = d.tensor_cores
    flags = _frames.column(d.classes, "tensor_core", bool)
    if tc.basis == "unknown":
        value = None
    else:
        value = float(d.kdur[flags].sum() / d.ktime * 100.0) if d.ktime > 0 else None
    kind: BasisKind
    if tc.basis == "measured" or tc.basis == "unknown":
        kind = tc.basis
    elif "compute capability" in how:
        kind = "trace"  # the device properties rule Tensor Cores out
    else:
        kind = "estimated"  # names and ops are evidence, not counters
    return value, Basis(kind, f"{tc.basis}: {how}")


def _tensor_core_basis(d: Device) -> Measure:
    return d.tensor_cores[0].basis, Basis("trace", "which evidence decided tensor_core_pct")


def _memcpy_bytes(d: Device) -> Measure:
    if d.mc.empty:
        return 0, Basis("trace", "no memcpy events")
    b = _frames.column(d.mc, "bytes", "int64")
    known = b >= 0
    if not known.any():
        return None, Basis("unknown", "no memcpy event carries a byte count")
    how = "sum of memcpy bytes args"
    if not known.all():
        how += f"; {int((~known).sum())} copies without a byte count left out"
    return int(b[known].sum()), Basis("trace", how)


def _pageable(d: Device) -> Measure:
    p = transfers.pageable_mask(d.mc)
    how = "memcpy names/kinds with Pageable host memory"
    return (int(p.sum()) if len(p) else 0), Basis("trace", how)


def _short(d: Device) -> Measure:
    how = f"kernels shorter than {SHORT_KERNEL_US:g} µs, by count"
    return short_kernel_pct(d.k), Basis("trace", how)


def _idle(d: Device) -> Measure:
    a = d.accounting
    if a.idle_us <= 0:
        value = IdleBreakdown()
    else:
        kernel_wait = a.causes["kernel_wait"]
        queued_long = a.queued_idle_us - kernel_wait
        host_wait = a.idle_us - a.queued_idle_us - a.causes["unknown"]
        value = IdleBreakdown(
            host_wait_pct=max(host_wait, 0.0) / a.idle_us * 100.0,
            kernel_wait_pct=kernel_wait / a.idle_us * 100.0,
            other_pct=max(queued_long + a.causes["unknown"], 0.0) / a.idle_us * 100.0,
            idle_us=a.idle_us,
        )
    how = (
        "idle gaps of the whole device (union over streams), each cut where its earliest "
        "waiting work was launched: host_wait before (nothing queued), kernel_wait after "
        f"when that part is shorter than {stalls.KERNEL_WAIT_US:g} µs, else other; "
        "shares of idle time"
    )
    return value, Basis("trace", how)


def _idle_queued(d: Device) -> Measure:
    a = d.accounting
    if a.idle_us <= 0:
        return None, Basis("trace", "the device was never idle inside its span")
    how = (
        "idle time during which launched work had not started, over the whole of each gap "
        "(launch call returns and start times)"
    )
    return a.queued_idle_us / a.idle_us * 100.0, Basis("trace", how)


def _span_breakdown(d: Device) -> Measure:
    a = d.accounting
    parts = {
        "compute": a.compute_us,
        "exposed_comm": a.exposed_comm_us,
        "possible_comm": a.possible_comm_us,
        "copy_only": a.copy_only_us,
        **a.causes,
    }
    how = (
        "the GPU span cut into disjoint time: kernels, collectives alone, copies alone, then "
        "each idle gap charged to what was queued and what the host was doing"
    )
    return {k: a.pct(v) for k, v in parts.items()}, Basis("trace", how)


def _comm_pct(d: Device) -> Measure:
    if d.ktime <= 0:
        return None, Basis("unknown", "no kernel time")
    how = (
        "communication kernels' time ÷ kernel time, by the words of their names (NCCL/RCCL/"
        "MSCCL, NVSHMEM, DeepEP, pplx, symmetric-memory and custom all-reduce)"
    )
    return float(d.kdur[d.collective].sum() / d.ktime * 100.0), Basis("trace", how)


def _possible_comm(d: Device) -> Measure:
    if d.ktime <= 0:
        return None, Basis("unknown", "no kernel time")
    if d.sm_count is None:
        return None, Basis("unknown", "SM count unknown: a grid's size says nothing")
    mask = d.possible_comm
    value = float(d.kdur[mask].sum() / d.ktime * 100.0)
    how = (
        "estimated from behaviour, not names: kernels no name rule knows, on a stream of "
        "their own beside the compute streams, with fewer blocks than SMs, running longer "
        "than the other streams' median kernel"
    )
    if mask.any():
        streams = sorted({int(x) for x in _frames.column(d.k, "stream")[mask]})
        grid = _frames.column(d.k, "grid")[mask]
        how += (
            f" (streams {', '.join(map(str, streams))}; grids of {int(grid.min())}-"
            f"{int(grid.max())} blocks on {d.sm_count} SMs; "
            f"{_span_of(d.kdur[mask])} each)"
        )
    return value, Basis("estimated", how)


def _span_of(dur: np.ndarray) -> str:
    lo, hi = float(dur.min()), float(dur.max())
    if hi > lo:
        return f"{_duration(lo)} to {_duration(hi)}"
    return _duration(lo)


def _exposed_comm(d: Device) -> Measure:
    a = d.accounting
    if a.span_us <= 0:
        return None, Basis("unknown", "empty GPU span")
    how = "time a collective runs while no compute kernel does ÷ GPU span"
    return a.pct(a.exposed_comm_us), Basis("trace", how)


def _comm_overlap(d: Device) -> Measure:
    a = d.accounting
    if a.comm_us <= 0:
        return None, Basis("trace", "no collective kernels")
    how = "collective time with a compute kernel running beside it ÷ collective time"
    return (a.comm_us - a.exposed_comm_us) / a.comm_us * 100.0, Basis("trace", how)


def _window(d: Device) -> Measure:
    lo, hi = d.window
    how = "first to last event of any kind (host calls, ops, annotations, GPU) on this rank"
    return hi - lo, Basis("trace", how)


def _step_frame(d: Device) -> pd.DataFrame:
    """Each ProfilerStep of the rank: ts, dur, and the time from its start to its first GPU
    event on this device (NaN when none started inside it)."""
    if d.steps.empty:
        return pd.DataFrame({"ts": [], "dur": [], "pre_gpu_us": []})
    s, dur, pre = _step_arrays(d)
    return frame_from_arrays({"ts": s, "dur": dur, "pre_gpu_us": pre})  # three float columns


def _step_arrays(d: Device) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_step_frame`'s columns (the rank has steps)."""
    st = d.steps
    ev = np.sort(_frames.column(d.events, "ts", "float64"))
    s = _frames.column(st, "ts", "float64")
    e = s + _frames.column(st, "dur", "float64")
    if not len(ev):  # nothing ran on the device: no step has a first GPU event
        return s, e - s, np.full(len(s), np.nan)
    j = np.searchsorted(ev, s, side="left")
    first = np.where(j < len(ev), ev[np.clip(j, 0, len(ev) - 1)], np.nan)
    pre = np.where(first < e, first - s, np.nan)
    return s, e - s, pre


def _step(d: Device) -> Measure:
    st = d.steps
    if st.empty:
        return None, Basis("unknown", "no ProfilerStep annotations in the trace")
    how = f"median of {len(st)} ProfilerStep durations"
    return float(np.median(_frames.column(st, "dur", "float64"))), Basis("trace", how)


def _pre_gpu_step(d: Device) -> Measure:
    if d.steps.empty:
        frac = np.zeros(0)
    else:
        _, dur, pre = _step_arrays(d)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = pre / dur
        frac = frac[~np.isnan(frac)]  # what dropna leaves
    if not len(frac):
        return None, Basis("unknown", "no ProfilerStep with GPU work on this device")
    how = (
        f"median over {len(frac)} ProfilerSteps of (first GPU event's start − step start) ÷ "
        "step duration"
    )
    return float(np.median(frac) * 100.0), Basis("trace", how)


def _host_per_kernel(d: Device) -> Measure:
    v = host.host_us_per_kernel(d.launches)
    if v is None:
        return None, Basis("unknown", "fewer than two launch calls linked to this device")
    how = "median interval between consecutive launch calls on the launching thread"
    return v, Basis("trace", how)


def _launch_per_kernel(d: Device) -> Measure:
    v = host.launch_us_per_kernel(d.launches)
    if v is None:
        return None, Basis("unknown", "no kernel launch calls linked to this device")
    return v, Basis("trace", "median duration of the kernel launch calls")


def _launch_to_start(d: Device) -> Measure:
    v = host.launch_to_start_us(d.k, d.capture.windows)
    if v is None:
        return None, Basis("unknown", "kernels not linked to their launch calls")
    return v, Basis("trace", "median of kernel start − launch call start")


def _copies(d: Device) -> Measure:
    how = "per direction and host memory: bytes ÷ time of the copies with a byte count"
    return transfers.copies_by_kind(d.mc), Basis("trace", how)


def _dataloader(d: Device) -> Measure:
    t0, t1 = d.window
    pct, how = inputs.dataloader_pct(d.fetches, d.steps, (t0, t1) if t1 > t0 else None)
    return pct, Basis("trace" if pct is not None else "unknown", how)


def _sync_pct(d: Device) -> Measure:
    t0, t1 = d.span
    calls = d.blocking
    how = (
        "host time in blocking calls (synchronize, .item(), copies that waited for their "
        "copy; union, within the span) ÷ GPU span"
    )
    if d.span_us <= 0 or calls.empty:
        return 0.0, Basis("trace", how)
    s = _frames.column(calls, "ts", "float64")
    blocked = iv.intersect(
        iv.merge(s, s + _frames.column(calls, "dur", "float64")), (np.array([t0]), np.array([t1]))
    )
    return iv.total(blocked) / d.span_us * 100.0, Basis("trace", how)


def _roof_rates(d: Device) -> tuple[Measure, Measure]:
    roof = d.roof
    why = "no ops with FLOP counts (profile with with_flops=True, record_shapes=True)"
    if roof.empty or d.span_us <= 0:
        return (None, Basis("unknown", why)), (None, Basis("unknown", why))
    shapes = "2mkn" in str(_frames.column(roof, "basis")[0])
    n_ops = int(_sum(roof, "count"))
    tf = (
        _sum(roof, "flops") / d.span_us / 1e6,
        Basis(
            "estimated" if shapes else "trace",
            f"{'matmul FLOPs from input shapes' if shapes else 'with_flops FLOPs'} of "
            f"{n_ops} ops ÷ GPU span",
        ),
    )
    gb = (
        _sum(roof, "bytes") / d.span_us / 1e3,
        Basis(
            "estimated",
            f"bytes of the {n_ops} FLOP-counted ops (from input shapes) ÷ GPU span; other "
            "kernels' traffic is not counted",
        ),
    )
    return tf, gb


def _sum(df: pd.DataFrame, name: str) -> float:
    """``float(df[name].sum())``: the array's own sum where pandas' is that (numbers with
    nothing missing), else pandas'."""
    v = _frames.column(df, name)
    if v.dtype.kind in "iu" or (v.dtype == "float64" and not np.isnan(v).any()):
        return float(v.sum())
    return float(df[name].sum())


def _achieved_tflops(d: Device) -> Measure:
    return d.roof_rates[0]


def _achieved_gbps(d: Device) -> Measure:
    return d.roof_rates[1]


def _no_peak(d: Device) -> str:
    if d.vendor_name == "nvidia":
        return f"device {d.name!r} is not in the peak table"
    return f"no peak table for vendor {d.vendor_name!r}"


def _peak_tflops(d: Device) -> Measure:
    p, roof = d.peak, d.roof
    if p is None:
        return None, Basis("unknown", _no_peak(d))
    if roof.empty or d.span_us <= 0:
        why = "no ops with FLOP counts (profile with with_flops=True, record_shapes=True)"
        return None, Basis("unknown", why)
    key = _busiest_dtype(roof)
    value = peaks.peak_tflops(p, key) if key else None
    if value is not None:
        return value, Basis(
            "trace", f"device name {d.name!r} matched to the {p.source}: {key} dense peak"
        )
    why = (
        f"the {p.source} has no {key} peak for {d.name!r}"
        if key
        else "the dtype of the FLOP-counted ops is unknown"
    )
    return None, Basis("unknown", why)


def _busiest_dtype(roof: pd.DataFrame) -> str:
    """The dtype whose ops took the most GPU time (the first in sorted order on a tie):
    ``groupby("dtype")["total_us"].sum().idxmax()``, grouped in plain Python."""
    dtypes = _frames.column(roof, "dtype")
    total = _group.sums_or_none(dtypes, _frames.column(roof, "total_us", "float64"))
    if total is None:
        return str(roof.groupby("dtype")["total_us"].sum().idxmax())
    uniq, sums = total
    return str(uniq[int(np.argmax(sums))])


def _peak_gbps(d: Device) -> Measure:
    p = d.peak
    if p is None:
        return None, Basis("unknown", _no_peak(d))
    how = f"device name {d.name!r} matched to the {p.source}: memory bandwidth"
    return p.mem_gbps, Basis("trace", how)


def _unsampled_why(d: Device) -> str:
    """Why a device has no NVML numbers: no samples, no matching GPU, or no overlap."""
    if d.samples is None or len(d.samples) == 0:
        return "no NVML samples"
    gpu, how = nvml_gpu(d.samples, d.device)
    if gpu is None:
        return f"NVML samples not used: {how}"
    return f"no samples of NVML GPU {gpu} overlap this trace"


def _sampled(attr: str, label: str) -> Callable[[Device], Measure]:
    def sampled(d: Device) -> Measure:
        m = d.measured
        if m is None:
            return None, Basis("unknown", _unsampled_why(d))
        v = getattr(m, attr)
        if v is None:
            return None, Basis("unknown", f"{label} not sampled on this GPU")
        return v, Basis(
            "measured", f"{label}, mean of NVML samples inside the GPU span ({m.count})"
        )

    return sampled


#: Every DeviceMetrics field but the identity ones, and the function that measures it.
METRICS: tuple[tuple[str, Callable[[Device], Measure]], ...] = (
    ("vendor", _vendor),
    ("sm_count", _sm_count),
    ("compute_capability", _compute_capability),
    ("gpu_span_us", _gpu_span),
    ("kernel_count", _counts("kernel", "k")),
    ("memcpy_count", _counts("memcpy", "mc")),
    ("memset_count", _counts("memset", "ms")),
    ("kernel_busy_pct", _kernel_busy),
    ("gpu_busy_pct", _gpu_busy),
    ("sm_efficiency_pct", _sm_efficiency),
    ("occupancy_pct", _occupancy),
    ("tensor_core_pct", _tensor_core_pct),
    ("tensor_core_basis", _tensor_core_basis),
    ("memcpy_bytes", _memcpy_bytes),
    ("pageable_memcpy_count", _pageable),
    ("short_kernel_pct", _short),
    ("idle", _idle),
    ("comm_pct", _comm_pct),
    ("possible_comm_pct", _possible_comm),
    ("exposed_comm_pct", _exposed_comm),
    ("comm_overlap_pct", _comm_overlap),
    ("window_us", _window),
    ("step_us", _step),
    ("pre_gpu_step_pct", _pre_gpu_step),
    ("host_us_per_kernel", _host_per_kernel),
    ("launch_us_per_kernel", _launch_per_kernel),
    ("launch_to_start_us", _launch_to_start),
    ("idle_queued_pct", _idle_queued),
    ("copies", _copies),
    ("span_breakdown", _span_breakdown),
    ("achieved_tflops", _achieved_tflops),
    ("peak_tflops", _peak_tflops),
    ("achieved_gbps", _achieved_gbps),
    ("peak_gbps", _peak_gbps),
    ("dataloader_pct", _dataloader),
    ("sync_pct", _sync_pct),
    ("nvml_util_pct", _sampled("util_gpu", "utilization.gpu")),
    ("sm_active_pct", _sampled("sm_util", "GPM SM activity")),
    ("tensor_active_pct", _sampled("tensor_util", "GPM tensor activity")),
    ("dram_bw_pct", _sampled("dram_bw_util", "GPM DRAM bandwidth")),
)


@dataclass
class Signals:
    """What the verdict and findings need beyond DeviceMetrics, for one device."""

    metrics: DeviceMetrics
    view: Device

    @property
    def start_us(self) -> float:
        return self.view.span[0]

    @property
    def end_us(self) -> float:
        return self.view.span[1]

    @property
    def class_pct(self) -> dict[str, float]:
        """Share of kernel time per class."""
        return self.view.class_pct

    @property
    def accounting(self) -> stalls.Accounting:
        return self.view.accounting

    @cached_property
    def roofline(self) -> pd.DataFrame:
        r = self.view.roof
        if r.empty:
            return r
        return _with_device(r, self.view.rank, self.view.device)

    @property
    def peak(self) -> peaks.Peak | None:
        return self.view.peak

    @property
    def measured(self) -> Measured | None:
        return self.view.measured

    @property
    def tc_how(self) -> str:
        return self.view.tensor_cores[1]

    @property
    def capture(self) -> host.Capture:
        return self.view.capture

    @cached_property
    def blocking(self) -> pd.DataFrame:
        """Blocking calls that overlap the GPU span."""
        c = self.view.blocking
        if c.empty:
            return c
        t0, t1 = self.view.span
        ts = _frames.column(c, "ts")
        return _frames.rows(c, (ts < t1) & (ts + _frames.column(c, "dur") > t0))

    @property
    def mean_kernel_us(self) -> float | None:
        k = self.view.kdur
        return float(k.mean()) if len(k) else None

    @property
    def median_kernel_us(self) -> float | None:
        k = self.view.kdur
        return float(np.median(k)) if len(k) else None

    @property
    def gpu_busy_us(self) -> float:
        """Time at least one kernel, copy or memset ran."""
        a = self.accounting
        return a.compute_us + a.exposed_comm_us + a.possible_comm_us + a.copy_only_us

    @property
    def tc_capable(self) -> bool:
        ccv = tensorcores.cc_value(self.metrics.compute_capability)
        return self.metrics.vendor == "nvidia" and ccv is not None and ccv >= 7.0

    @cached_property
    def simt_gemm_pct(self) -> float:
        """Share of kernel time in FP32/SIMT GEMMs (no Tensor Cores)."""
        v = self.view
        if v.vendor_name != "nvidia" or v.ktime <= 0:
            return 0.0
        names = text_column(v.k, "name")
        simt = tensorcores.name_evidence(names, "nvidia") < 0
        return float(v.kdur[simt & matches(names, _GEMM_LIKE)].sum() / v.ktime * 100.0)

    @cached_property
    def compute_sm_efficiency(self) -> tuple[float, float] | None:
        """(SM-weighted coverage, busy) of non-collective kernels, % of the span: collectives
        never fill the SMs by design, so they say nothing about the model's kernels."""
        v = self.view
        mine = ~v.collective
        if not mine.any() or v.sm_count is None or v.span_us <= 0:
            return None
        grid = _frames.column(v.k, "grid", "float64")
        ok = mine & (grid > 0)
        if not ok.any():
            return None
        s = _frames.column(v.k, "ts", "float64")[ok]
        e = s + v.kdur[ok]
        w = np.minimum(grid[ok] / float(v.sm_count), 1.0)
        eff = weighted_coverage(s, e, w) / v.span_us * 100.0
        return eff, iv.total(iv.merge(s, e)) / v.span_us * 100.0

    @cached_property
    def bound_evidence(self) -> dict[str, float]:
        """Shares of non-collective kernel time (%) that are compute- and memory-bound by
        each kernel's own best evidence: the roofline bound of the FLOP-counted op that
        launched it, else its kernel class. ``roof_*`` are the parts the roofline decided."""
        v = self.view
        # Collectives, and kernels that are possibly communication, are neither side.
        keep = ~v.collective & ~v.possible_comm
        dur = v.kdur[keep]
        total = float(dur.sum())
        zero = {"compute": 0.0, "memory": 0.0, "roof_compute": 0.0, "roof_memory": 0.0}
        if total <= 0:
            return zero
        rb = v.roof_bounds[keep]
        cls = _frames.column(v.classes, "cls")[keep]
        by_class = rb == ""
        comp_cls = by_class & np.isin(cls, ["tensor_core", "compute"])
        mem_cls = by_class & (cls == "memory")

        def pct(mask: np.ndarray) -> float:
            return float(dur[mask].sum() / total * 100.0)

        rc, rm = pct(rb == "compute"), pct(rb == "memory")
        return {
            "compute": rc + pct(comp_cls),
            "memory": rm + pct(mem_cls),
            "roof_compute": rc,
            "roof_memory": rm,
        }

    @cached_property
    def pageable_bytes(self) -> int:
        mc = self.view.mc
        p = transfers.pageable_mask(mc)
        if not len(p):
            return 0
        b = _frames.column(mc, "bytes")
        if b.dtype.kind == "i":
            return int(np.clip(b[p], 0, None).sum())
        return int(mc.loc[p, "bytes"].clip(lower=0).sum())

    @property
    def copy_us(self) -> float:
        mc = self.view.mc
        return float(mc["dur"].sum()) if not mc.empty else 0.0

    @cached_property
    def steps(self) -> pd.DataFrame:
        """Each ProfilerStep of the rank: ts, dur, pre_gpu_us (to its first GPU event)."""
        return _step_frame(self.view)

    @cached_property
    def pre_gpu(self) -> tuple[float, float]:
        """(µs from the window's start to the first GPU event, µs of set-up calls in it)."""
        lo, _ = self.view.window
        t0 = self.view.span[0]
        if t0 <= lo:
            return 0.0, 0.0
        st = self.view.setup
        s = _frames.column(st, "ts", "float64")
        setup = iv.intersect(
            iv.merge(s, s + _frames.column(st, "dur", "float64")), (np.array([lo]), np.array([t0]))
        )
        return t0 - lo, iv.total(setup)


def _with_device(roof: pd.DataFrame, rank: int, device: str) -> pd.DataFrame:
    """``roof.assign(rank=rank, device=device)``: the same frame (its columns, then an int64
    rank and the device as the text type pandas gives a str), built from its arrays; the
    assignment copies and checks the frame twice over (about 150 µs for three rows)."""
    arrays = _frames.stored_arrays(roof)
    names = list(roof.columns)
    if (
        arrays is None
        or not _frames.numbered(roof)
        or len(set(names)) != len(names)
        or {"rank", "device"} & set(names)
        or not all(type(a) is np.ndarray for a in arrays)
    ):
        return roof.assign(rank=rank, device=device)
    n = len(roof)
    cols: dict[str, Any] = dict(zip(names, arrays, strict=True))
    cols["rank"] = np.full(n, rank, dtype="int64")
    cols["device"] = _frames.inferred_text(np.full(n, device, dtype=object))
    return frame_from_arrays(cols)


def analyze_device(
    trace: Trace, rank: int, device: str, samples: Samples | None
) -> tuple[Signals, pd.DataFrame, pd.DataFrame]:
    """(signals, kernel classes for this device's kernels, per-stream idle gaps)."""
    d = Device(trace, rank, device, samples)
    values: dict[str, Any] = {}
    basis: dict[str, Basis] = {}
    for name, measure in METRICS:
        values[name], basis[name] = measure(d)
    basis.pop("tensor_core_basis")  # itself a basis
    m = DeviceMetrics(rank=rank, device=device, name=d.name, basis=basis, **values)
    gaps = idle.stream_gaps(d.events, largest_first=True, host=d.activity)
    return Signals(m, d), d.classes, gaps
