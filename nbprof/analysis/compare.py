"""Before and after: what changed between two analysed runs, as numbers and one sentence.

Pure: two (trace, diagnosis) pairs in, a :class:`Diff` out (schema ``nbprof.compare/1``).
Each run is represented by its primary device (the one with the most kernel time, as the
verdict uses); its metrics are read through :data:`METRICS`, one declaration per metric.

Times, counts and bytes are compared *per iteration*: per ``ProfilerStep`` when both runs
have steps (so runs of 6 and 10 steps compare), else per run. The step time is the mean
step (total step time ÷ steps: what a training run's throughput follows; the median is
given beside it), or the GPU span when a run has no steps. Percentages compare as they are.

A change counts only when it shows at the precision nbprof prints the number with: a
0.01-point move of a percentage is no change. Step times are also tested against the
variation between steps: a difference of the means below two standard errors of that
difference (about 95% confidence) is reported as within the step-to-step variation.

Two runs on different GPUs, with different step counts or different batch sizes are said
so in :attr:`Diff.warnings`, and the summary never credits a hardware change to the code.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from nbprof import units, vocab
from nbprof.analysis.model import Basis, DeviceMetrics, Diagnosis, Verdict
from nbprof.analysis.names import groups, kernel_group, op_group
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)

SCHEMA = "nbprof.compare/1"

Better = Literal["higher", "lower"]
Per = Literal["step", "run"]
StepChange = Literal["faster", "slower", "same", "within_noise"]


@dataclass(frozen=True)
class Metric:
    """One compared metric: which way is better, and how to read it from a device's metrics.

    ``read`` defaults to the ``DeviceMetrics`` attribute called ``name``. ``per_iteration``:
    an amount (µs, bytes, a count) divided by the iterations compared; percentages and
    rates are not. ``basis``: the key of ``DeviceMetrics.basis`` that says where the number
    came from (default: ``name``).
    """

    name: str
    label: str
    unit: str  # "%", "µs", "count", "bytes", "GB/s", "TFLOP/s"
    better: Better | None
    per_iteration: bool = False
    read: Callable[[DeviceMetrics], float | None] | None = None
    basis: str = ""

    def value(self, dev: DeviceMetrics) -> float | None:
        return self.read(dev) if self.read is not None else getattr(dev, self.name, None)


def _span(part: str, label: str, better: Better | None = "lower") -> Metric:
    """A share (%) of the GPU span from ``span_breakdown``: what ran, and each idle cause."""

    def read(m: DeviceMetrics) -> float | None:
        return m.span_breakdown.get(part) if m.span_breakdown else None

    return Metric(f"span_{part}_pct", label, "%", better, False, read, "span_breakdown")


def _copy(direction: str, what: str) -> Metric:
    """Copies of one direction (every host-memory kind of it together): their time per
    iteration (``us``), or the rate of those whose bytes are known (``gbps``)."""

    def read(m: DeviceMetrics) -> float | None:
        got = [c for c in m.copies if str(c.get("kind", "")).split(" ")[0] == direction]
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

    if what == "us":
        return Metric(f"copy_{direction}_us", f"copies {direction}: time", "µs", "lower",
                      True, read, "copies")  # fmt: skip
    return Metric(f"copy_{direction}_gbps", f"copies {direction}: rate", "GB/s", "higher",
                  False, read, "copies")  # fmt: skip


#: Every metric the comparison shows, in display order: one declaration each.
METRICS: tuple[Metric, ...] = (
    Metric("kernel_busy_pct", "kernels busy (nvidia-smi)", "%", "higher"),
    Metric("gpu_busy_pct", "GPU busy incl. copies, memsets", "%", "higher"),
    Metric("sm_efficiency_pct", "SM efficiency", "%", "higher"),
    Metric("tensor_core_pct", "Tensor Cores (% kernel time)", "%", "higher"),
    Metric("occupancy_pct", "achieved occupancy", "%", None),
    Metric("achieved_tflops", "achieved TFLOP/s", "TFLOP/s", "higher"),
    Metric("comm_pct", "collectives (% kernel time)", "%", None),
    Metric("exposed_comm_pct", "exposed communication", "%", "lower"),
    Metric("comm_overlap_pct", "collectives overlapped", "%", "higher"),
    _span("copy_only", "span: only copies ran"),
    _span("sync", "idle: synchronizations"),
    _span("dependency", "idle: waiting on a dependency"),
    _span("kernel_wait", "idle: kernel-to-kernel gaps"),
    _span("capture", "idle: graph capture"),
    _span("input", "idle: input pipeline"),
    _span("setup", "idle: set-up calls"),
    _span("host", "idle: host (Python, launches)"),
    _span("unknown", "idle: cause unknown"),
    Metric("idle_queued_pct", "idle with work queued", "%", None),
    Metric("dataloader_pct", "DataLoader share of step time", "%", "lower"),
    Metric("sync_pct", "host time in blocking calls", "%", "lower"),
    Metric("pre_gpu_step_pct", "step before its first GPU work", "%", "lower"),
    Metric("short_kernel_pct", "kernels shorter than 10 µs", "%", "lower"),
    Metric("host_us_per_kernel", "host time per kernel", "µs", "lower"),
    Metric("launch_us_per_kernel", "launch call per kernel", "µs", "lower"),
    Metric("launch_to_start_us", "launch-to-start delay", "µs", None),
    Metric("kernel_count", "kernels", "count", None, True),
    Metric("memcpy_bytes", "bytes copied", "bytes", None, True),
    _copy("HtoD", "us"),
    _copy("HtoD", "gbps"),
    _copy("DtoH", "us"),
    _copy("DtoH", "gbps"),
    _copy("DtoD", "us"),
    _copy("DtoD", "gbps"),
    _copy("PtoP", "us"),
    _copy("PtoP", "gbps"),
    Metric("pageable_memcpy_count", "pageable memcpys", "count", "lower", True),
    Metric("gpu_span_us", "GPU span", "µs", "lower", True),
    Metric("nvml_util_pct", "NVML utilization (sampled)", "%", "higher"),
    Metric("sm_active_pct", "SM activity (sampled)", "%", "higher"),
    Metric("tensor_active_pct", "Tensor Core activity (sampled)", "%", "higher"),
    Metric("dram_bw_pct", "DRAM bandwidth (sampled)", "%", None),
)  # fmt: skip

#: Smallest change that shows at the precision the views print each unit with.
_RESOLUTION: dict[str, float] = {
    "%": 0.05, "µs": 0.05, "count": 0.05, "bytes": 0.5, "GB/s": 0.0, "TFLOP/s": 0.0,
}  # fmt: skip
#: Three significant digits: the precision of the rates and large amounts shown.
_RELATIVE = 5e-4

#: Ops whose first input's leading dimension is the batch (N of NCHW, B of [B, ..., H]).
_BATCH_OPS = frozenset(
    {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::linear", "aten::batch_norm",
     "aten::layer_norm", "aten::group_norm"}
)  # fmt: skip

KERNEL_COLUMNS = (
    "name", "before_us", "after_us", "delta_us", "before_count", "after_count", "change",
    "example",
)  # fmt: skip


@dataclass
class Side:
    """One run as the comparison sees it."""

    source: dict[str, Any]
    device: DeviceMetrics | None
    verdict: Verdict
    steps: int
    #: Where its timeline starts (trace µs): the first step, else the first GPU event.
    origin_us: float | None
    origin_basis: str
    batch_size: int | None
    batch_basis: Basis

    @property
    def gpu(self) -> str:
        d = self.device
        return (d.name or f"device {d.device}") if d is not None else "no GPU"


@dataclass
class StepTime:
    """Mean step time (ms) of each run and before ÷ after; without steps the GPU span, or
    the CPU span when a run has no GPU activity."""

    before_ms: float | None
    after_ms: float | None
    ratio: float | None
    statistic: Literal["mean_step", "gpu_span", "cpu_span"]
    basis: str
    median_before_ms: float | None = None
    median_after_ms: float | None = None
    #: True when the means differ by less than two standard errors of their difference.
    within_noise: bool | None = None
    #: "faster", "slower", "same" (no difference at 0.1 ms), "within_noise", None (unknown).
    change: StepChange | None = None

    @property
    def median_ratio(self) -> float | None:
        return _ratio(self.median_before_ms, self.median_after_ms)


@dataclass
class MetricDelta:
    name: str
    label: str
    unit: str
    before: float | None
    after: float | None
    delta: float | None
    #: True: after is better; False: worse; None: no change, no direction, or unknown.
    better: bool | None
    basis_before: Basis | None = None
    basis_after: Basis | None = None
    #: Which way is better for this metric (None: neither, e.g. the number of kernels).
    direction: Better | None = None


@dataclass
class Diff:
    """What changed from ``before`` to ``after`` (see the module docstring)."""

    before: Side
    after: Side
    per: Per
    step_time: StepTime
    metrics: list[MetricDelta]
    #: One row per kernel group (normalized name), biggest movers first: KERNEL_COLUMNS.
    #: Times (µs) and counts are per iteration (``per``).
    kernels: pd.DataFrame
    #: The same for the top-level CPU ops of the compared rank.
    ops: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    summary: str = ""

    def metric(self, name: str) -> MetricDelta:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        st = self.step_time
        return {
            "schema": SCHEMA,
            "before": _side_json(self.before),
            "after": _side_json(self.after),
            "per": self.per,
            "step_time_ms": {
                "before": _num(st.before_ms),
                "after": _num(st.after_ms),
                "ratio": _num(st.ratio),
                "statistic": st.statistic,
                "basis": st.basis,
                "median_before": _num(st.median_before_ms),
                "median_after": _num(st.median_after_ms),
                "median_ratio": _num(st.median_ratio),
                "within_noise": st.within_noise,
                "change": st.change,
            },
            "metrics": [
                {
                    "name": m.name,
                    "label": m.label,
                    "unit": m.unit,
                    "before": _num(m.before),
                    "after": _num(m.after),
                    "delta": _num(m.delta),
                    "better": m.better,
                    "basis": {
                        "before": _basis_json(m.basis_before),
                        "after": _basis_json(m.basis_after),
                    },
                }
                for m in self.metrics
            ],
            "kernels": _records(self.kernels),
            "ops": _records(self.ops),
            "warnings": list(self.warnings),
            "summary": self.summary,
        }


# -- the comparison ---------------------------------------------------------------------


def compare(before: Trace, before_diag: Diagnosis, after: Trace, after_diag: Diagnosis) -> Diff:
    """Compare two analysed runs (each trace with the diagnosis of that trace)."""
    b = _side(before, before_diag)
    a = _side(after, after_diag)
    per: Per = "step" if b.steps and a.steps else "run"
    n_b, n_a = (b.steps, a.steps) if per == "step" else (1, 1)
    step = _step_time(before, b, after, a)
    metrics = [_metric(m, b.device, a.device, n_b, n_a) for m in METRICS]
    kernels = _kernel_table(before, b, n_b, after, a, n_a)
    ops = _op_table(before, b, n_b, after, a, n_a)
    warnings = _warnings(b, a, step)
    diff = Diff(b, a, per, step, metrics, kernels, ops, warnings)
    diff.summary = _summary(diff)
    logger.debug("compared %s with %s", b.source.get("path"), a.source.get("path"))
    return diff


def _primary(diag: Diagnosis) -> DeviceMetrics | None:
    """The device with the most kernel time (the one the verdict speaks about)."""
    if not diag.devices:
        return None
    return max(diag.devices, key=lambda d: d.gpu_span_us * (d.kernel_busy_pct or 0.0))


def _rank_rows(df: pd.DataFrame, rank: int) -> pd.DataFrame:
    return df[df["rank"].to_numpy() == rank] if not df.empty else df


def _columns(
    df: pd.DataFrame, rank: int, cols: tuple[str, ...], device: str | None = None
) -> list[np.ndarray]:
    """``cols`` of the rows of ``rank`` (and ``device``), as arrays.

    Only the columns asked for are taken: selecting rows of a whole frame copies every
    column, which on a 216k-event trace cost more than the comparison itself.
    """
    if df.empty:
        return [df[c].to_numpy() for c in cols]
    m = df["rank"].to_numpy() == rank
    if device is not None:
        m &= df["device"].to_numpy() == device
    arrays = [df[c].to_numpy() for c in cols]
    return arrays if m.all() else [a[m] for a in arrays]


def _side(trace: Trace, diag: Diagnosis) -> Side:
    dev = _primary(diag)
    rank = dev.rank if dev is not None else (trace.ranks[0] if trace.ranks else 0)
    steps = _rank_rows(trace.steps, rank)
    origin: float | None = None
    how = "first event"
    if not steps.empty:
        origin, how = float(steps["ts"].min()), "first ProfilerStep"
    elif dev is not None:
        ts = [_columns(f, dev.rank, ("ts",), dev.device)[0] for f in _gpu_frames(trace)]
        starts = [float(t.min()) for t in ts if len(t)]
        origin, how = (min(starts), "first GPU event") if starts else (None, how)
    names, dims = _columns(trace.cpu_ops, rank, ("name", "input_dims"))
    batch, batch_basis = batch_size(names, dims)
    return Side(
        source=dict(diag.source),
        device=dev,
        verdict=diag.verdict,
        steps=len(steps),
        origin_us=origin,
        origin_basis=how,
        batch_size=batch,
        batch_basis=batch_basis,
    )


def _gpu_frames(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return trace.kernels, trace.memcpy, trace.memset


def batch_size(names: np.ndarray, input_dims: np.ndarray) -> tuple[int | None, Basis]:
    """The batch size, estimated from input shapes: the most common leading dimension of the
    first input of convolution, linear and normalization ops (weighted by calls)."""
    none = Basis("unknown", "no convolution, linear or normalization ops")
    if not len(names):
        return None, none
    hit = pd.Series(names).isin(_BATCH_OPS).to_numpy()
    if not hit.any():
        return None, none
    counts = pd.Series(input_dims[hit]).astype(str).value_counts()
    votes: dict[int, int] = {}
    for text, n in counts.items():
        lead = _leading_dim(str(text))
        if lead is not None:
            votes[lead] = votes.get(lead, 0) + int(n)
    if not votes:
        return None, Basis("unknown", "the trace records no input shapes (record_shapes=False)")
    best = max(votes.items(), key=lambda kv: (kv[1], -kv[0]))[0]
    share = votes[best] / sum(votes.values()) * 100.0
    return best, Basis(
        "estimated",
        f"leading dimension of the first input of convolution/linear/normalization ops "
        f"({share:.0f}% of {sum(votes.values())} calls)",
    )


def _leading_dim(text: str) -> int | None:
    if not text or text[0] != "[":
        return None
    try:
        dims = json.loads(text)
    except ValueError:
        return None
    if not dims or not isinstance(dims[0], list) or len(dims[0]) < 2:
        return None
    lead = dims[0][0]
    return int(lead) if isinstance(lead, int) and lead > 0 else None


def _steps_ms(trace: Trace, side: Side) -> np.ndarray:
    rank = side.device.rank if side.device is not None else (trace.ranks or [0])[0]
    return _rank_rows(trace.steps, rank)["dur"].to_numpy(dtype="float64") / 1e3


def _step_time(before: Trace, b: Side, after: Trace, a: Side) -> StepTime:
    st = _step_numbers(before, b, after, a)
    if st.before_ms is not None and st.after_ms is not None and st.ratio is not None:
        if _same("µs", st.before_ms * 1e3, st.after_ms * 1e3):
            st.change = "same"
        elif st.within_noise:
            st.change = "within_noise"
        else:
            st.change = "faster" if st.ratio > 1.0 else "slower"
    return st


def _step_numbers(before: Trace, b: Side, after: Trace, a: Side) -> StepTime:
    if b.steps and a.steps:
        sb, sa = _steps_ms(before, b), _steps_ms(after, a)
        mb, ma = float(sb.mean()), float(sa.mean())
        noise: bool | None = None
        if len(sb) >= 2 and len(sa) >= 2:
            se = math.sqrt(sb.var(ddof=1) / len(sb) + sa.var(ddof=1) / len(sa))
            noise = bool(abs(mb - ma) < 2.0 * se)
        return StepTime(
            mb,
            ma,
            _ratio(mb, ma),
            "mean_step",
            f"mean of {len(sb)} and {len(sa)} ProfilerSteps (total step time ÷ steps)",
            float(np.median(sb)),
            float(np.median(sa)),
            noise,
        )
    if b.device is not None and a.device is not None:
        span_b, span_a = b.device.gpu_span_us / 1e3, a.device.gpu_span_us / 1e3
        return StepTime(
            span_b,
            span_a,
            _ratio(span_b, span_a),
            "gpu_span",
            "GPU span of each whole run (not both runs have ProfilerSteps)",
        )
    # A run without GPU activity has no GPU span: the time its top-level CPU ops cover is
    # what both runs still share.
    cpu_b, cpu_a = _cpu_span_ms(before, b), _cpu_span_ms(after, a)
    return StepTime(
        cpu_b,
        cpu_a,
        _ratio(cpu_b, cpu_a),
        "cpu_span",
        "first top-level CPU op start to last end, of each whole run (no ProfilerSteps, "
        "and not both runs have GPU activity)",
    )


def _top_ops(trace: Trace, side: Side) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(name, ts, dur) of the top-level CPU ops of the compared rank."""
    rank = side.device.rank if side.device is not None else (trace.ranks or [0])[0]
    name, ts, dur, depth = _columns(trace.cpu_ops, rank, ("name", "ts", "dur", "depth"))
    top = depth == 0
    return name[top], ts[top].astype("float64"), dur[top].astype("float64")


def _cpu_span_ms(trace: Trace, side: Side) -> float | None:
    _, ts, dur = _top_ops(trace, side)
    if not len(ts):
        return None
    return float((ts + dur).max() - ts.min()) / 1e3


def _ratio(b: float | None, a: float | None) -> float | None:
    if b is None or a is None or not (a > 0) or not (b > 0):
        return None
    return b / a


def _same(unit: str, b: float, a: float) -> bool:
    tol = max(_RESOLUTION.get(unit, 0.0), _RELATIVE * max(abs(b), abs(a)))
    return abs(a - b) <= tol


def _metric(
    m: Metric, b: DeviceMetrics | None, a: DeviceMetrics | None, n_b: int, n_a: int
) -> MetricDelta:
    vb = _value(m, b, n_b)
    va = _value(m, a, n_a)
    key = m.basis or m.name
    delta = better = None
    if vb is not None and va is not None:
        delta = va - vb
        if m.better is not None and not _same(m.unit, vb, va):
            better = (va > vb) == (m.better == "higher")
    return MetricDelta(
        m.name,
        m.label,
        m.unit,
        vb,
        va,
        delta,
        better,
        b.basis.get(key) if b is not None else None,
        a.basis.get(key) if a is not None else None,
        m.better,
    )


def _value(m: Metric, dev: DeviceMetrics | None, n: int) -> float | None:
    if dev is None:
        return None
    v = m.value(dev)
    if v is None:
        return None
    v = float(v)
    if math.isnan(v):
        return None
    return v / n if m.per_iteration else v


def _totals(names: np.ndarray, dur: np.ndarray, fold: Callable[[str], str]) -> pd.DataFrame:
    """Per group: time, count and the raw name that took the most time in it.

    Sums per distinct raw name first (one factorize, then bincounts), then per group over
    those few names: a 216k-event trace has tens of distinct kernel names, not thousands.
    """
    if len(names) == 0:
        return pd.DataFrame(
            {"us": pd.Series(dtype="float64"), "count": pd.Series(dtype="int64"),
             "example": pd.Series(dtype=object)},
            index=pd.Index([], name="g", dtype=object),
        )  # fmt: skip
    codes, raw = pd.factorize(names, use_na_sentinel=False)
    raw_us = np.bincount(codes, weights=dur, minlength=len(raw))
    raw_n = np.bincount(codes, minlength=len(raw))
    gcodes, gnames = pd.factorize(groups(pd.Series(raw, dtype=object), fold), use_na_sentinel=False)
    us = np.bincount(gcodes, weights=raw_us, minlength=len(gnames))
    count = np.bincount(gcodes, weights=raw_n, minlength=len(gnames)).astype(np.int64)
    # The raw name with the most time in each group (the first of equals).
    order = np.lexsort((-raw_us, gcodes))
    first = order[np.searchsorted(gcodes[order], np.arange(len(gnames)))]
    return pd.DataFrame(
        {"us": us, "count": count, "example": np.asarray(raw, dtype=object)[first]},
        index=pd.Index(np.asarray(gnames, dtype=object), name="g"),
    )


def _table(before: pd.DataFrame, n_b: int, after: pd.DataFrame, n_a: int) -> pd.DataFrame:
    j = before.merge(after, how="outer", left_index=True, right_index=True, suffixes=("_b", "_a"))
    if j.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in KERNEL_COLUMNS})
    cb = j["count_b"].fillna(0).to_numpy(dtype="float64")
    ca = j["count_a"].fillna(0).to_numpy(dtype="float64")
    ub = j["us_b"].fillna(0).to_numpy(dtype="float64") / n_b
    ua = j["us_a"].fillna(0).to_numpy(dtype="float64") / n_a
    delta = ua - ub
    same = np.abs(delta) <= np.maximum(_RESOLUTION["µs"], _RELATIVE * np.maximum(ub, ua))
    change = np.select(
        [cb == 0, ca == 0, same, delta > 0],
        ["new", "gone", "unchanged", "increased"],
        default="decreased",
    )
    # The name from the after run, else from the before run (object arrays: an empty side
    # has no strings to fill with).
    ea, eb = j["example_a"].to_numpy(dtype=object), j["example_b"].to_numpy(dtype=object)
    out = pd.DataFrame(
        {
            "name": j.index.astype(str),
            "before_us": ub,
            "after_us": ua,
            "delta_us": delta,
            "before_count": cb / n_b,
            "after_count": ca / n_a,
            "change": change,
            "example": np.where(pd.isna(ea), eb, ea).astype(str),
        }
    )
    # Biggest movers first; ties (unchanged kernels) by the time they take, then by name.
    order = np.lexsort((out["name"].to_numpy(), -np.maximum(ub, ua), -np.abs(delta)))
    return out.iloc[order].reset_index(drop=True)


def _kernel_table(
    before: Trace, b: Side, n_b: int, after: Trace, a: Side, n_a: int
) -> pd.DataFrame:
    def side(trace: Trace, s: Side) -> pd.DataFrame:
        k = trace.kernels
        if s.device is None:
            name, dur = k["name"].to_numpy()[:0], k["dur"].to_numpy()[:0]
        else:
            name, dur = _columns(k, s.device.rank, ("name", "dur"), s.device.device)
        return _totals(name, dur.astype("float64"), kernel_group)

    return _table(side(before, b), n_b, side(after, a), n_a)


def _op_table(before: Trace, b: Side, n_b: int, after: Trace, a: Side, n_a: int) -> pd.DataFrame:
    def side(trace: Trace, s: Side) -> pd.DataFrame:
        name, _, dur = _top_ops(trace, s)
        return _totals(name, dur, op_group)

    return _table(side(before, b), n_b, side(after, a), n_a)


# -- what to say ------------------------------------------------------------------------


def different_gpus(b: Side, a: Side) -> bool:
    """Both runs used a GPU, and not the same model."""
    if b.device is None or a.device is None:
        return False
    nb, na = b.device.name, a.device.name
    if nb and na:
        return nb != na
    return (b.device.compute_capability or "") != (a.device.compute_capability or "")


def _warnings(b: Side, a: Side, step: StepTime) -> list[str]:
    out: list[str] = []
    if different_gpus(b, a):
        out.append(
            f"Different GPUs: the before run used {b.gpu}, the after run {a.gpu}. Every "
            "difference below includes the hardware change; none of it measures the code "
            "change alone."
        )
    if b.device is None and a.device is None:
        out.append("Neither run recorded GPU activity: only their CPU sides compare.")
    else:
        for side, s in (("before", b), ("after", a)):
            if s.device is None:
                out.append(f"The {side} run recorded no GPU activity: only its CPU side compares.")
    if b.steps and a.steps and b.steps != a.steps:
        out.append(
            f"Different numbers of steps ({b.steps} before, {a.steps} after): times and "
            "counts are compared per step."
        )
    elif bool(b.steps) != bool(a.steps):
        has = "before" if b.steps else "after"
        out.append(
            f"Only the {has} run has ProfilerStep markers: the runs are compared whole (GPU "
            "span, totals), which is fair only if both ran the same work."
        )
    if b.batch_size and a.batch_size and b.batch_size != a.batch_size:
        text = (
            f"Different batch sizes ({b.batch_size} before, {a.batch_size} after, estimated "
            "from input shapes): per-step numbers are not per-sample numbers"
        )
        if step.statistic == "mean_step" and step.before_ms and step.after_ms:
            text += (
                f"; per sample the mean step is {step.before_ms / b.batch_size:.3g} ms before "
                f"and {step.after_ms / a.batch_size:.3g} ms after"
            )
        out.append(text + ".")
    return out


def _fmt(unit: str, v: float) -> str:
    if unit == "%":
        return units.pct(v)
    if unit == "µs":
        return units.duration(v)
    return f"{units.significant(v)} {unit}"


def _ms(v: float) -> str:
    """A step time given in ms, in the unit it reads best in (0.15 ms is "150.0 µs"); from
    a second on with two decimals, the sentence's precision since it was first written
    (``nbprof.compare/1`` keeps its summaries)."""
    return units.duration(v * 1e3, digits=2 if abs(v) >= 1e3 else 1)


def state(bottleneck: str) -> str:
    """A bottleneck in words ("starved by the input pipeline"), unknown ones spelled out."""
    return vocab.term(bottleneck).phrase


def _driver_clause(d: Diff) -> str:
    """How the measure of the before run's bottleneck moved; when it did not move, how the
    kernels' share of the span did (the measure of any bottleneck)."""
    known = []
    # The before run's verdict picks the measure: did what limited that run go away?
    for measure in (vocab.term(d.before.verdict.bottleneck).measure, vocab.KERNEL_BUSY):
        key, template = measure.metric, measure.moved
        m = d.metric(key)
        if m.before is None or m.after is None:
            continue
        if not _same(m.unit, m.before, m.after):
            return template.format(
                b=_fmt(m.unit, m.before), how=f"before and {_fmt(m.unit, m.after)} after"
            )
        known.append((m.unit, m.after, template))
    if not known:
        return ""
    unit, after, template = known[0]
    return template.format(b=_fmt(unit, after), how="in both")


def _step_clause(d: Diff, hardware: bool) -> str:
    st = d.step_time
    what = _STATISTIC_WORDS[st.statistic]
    if st.before_ms is None or st.after_ms is None or st.ratio is None:
        return ""
    b, a, r = st.before_ms, st.after_ms, st.ratio
    if st.change == "same":
        return f"{what} is the same, {_ms(a)}"
    moved = f"{what} went from {_ms(b)} to {_ms(a)}"
    if st.change == "within_noise":
        return f"{moved} ({r:.2f}x), within the step-to-step variation"
    speed = f"{r:.2f}x faster" if st.change == "faster" else f"{1.0 / r:.2f}x slower"
    return f"{moved}, {speed}" + (" (with the hardware change)" if hardware else "")


_STATISTIC_WORDS = {
    "mean_step": "the mean step",
    "gpu_span": "the GPU span",
    "cpu_span": "the traced CPU time",
}


def _summary(d: Diff) -> str:
    b, a = d.before, d.after
    hardware = different_gpus(b, a)
    parts = [p for p in (_driver_clause(d), _step_clause(d, hardware)) if p]
    vb, va = b.verdict.bottleneck, a.verdict.bottleneck
    if vb == va:
        parts.append(f"the GPU is still {state(va)}")
    else:
        parts.append(f"the GPU is now {state(va)} (it was {state(vb)})")
    text = "; ".join(parts)
    if hardware:
        text = f"On different GPUs ({b.gpu} before, {a.gpu} after), {text}"
    return text[:1].upper() + text[1:] + "."


# -- JSON -------------------------------------------------------------------------------


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


def _basis_json(b: Basis | None) -> dict[str, str] | None:
    return {"kind": b.kind, "how": b.how} if b is not None else None


def _side_json(s: Side) -> dict[str, Any]:
    d = s.device
    return {
        "source": s.source,
        "device": (
            {
                "rank": d.rank,
                "device": d.device,
                "name": d.name,
                "vendor": d.vendor,
                "sm_count": d.sm_count,
                "compute_capability": d.compute_capability,
            }
            if d is not None
            else None
        ),
        "verdict": {
            "bottleneck": s.verdict.bottleneck,
            "summary": s.verdict.summary,
            "confidence": s.verdict.confidence,
        },
        "steps": s.steps,
        "batch_size": {"value": s.batch_size, "basis": _basis_json(s.batch_basis)},
        "timeline_origin": s.origin_basis,
    }


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    r: Any  # a row of df (pandas-stubs types its fields as any scalar)
    for r in df.itertuples(index=False):
        out.append(
            {
                "name": r.name,
                "before_us": float(r.before_us),
                "after_us": float(r.after_us),
                "delta_us": float(r.delta_us),
                "before_count": float(r.before_count),
                "after_count": float(r.after_count),
                "change": str(r.change),
                "example": str(r.example),
            }
        )
    return out
