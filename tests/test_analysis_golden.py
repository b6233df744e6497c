"""Golden tests: tiny hand-built Kineto traces, read end to end, answers written as formulas."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from golden import KinetoBuilder, read_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbprof.analysis import analyze
from nbprof.analysis.model import BOTTLENECKS, Diagnosis
from nbprof.telemetry.model import METRICS, Samples
from nbprof.trace.model import Trace

SGEMM = "ampere_sgemm_128x64_nn"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def diagnose(b: KinetoBuilder, tmp_path: Path, samples: Samples | None = None) -> Diagnosis:
    trace = read_trace(b.write(tmp_path))
    d = analyze(trace, samples)
    # Every diagnosis serialises to the schema and keeps its table contract.
    j = d.to_json()
    assert j["schema"] == "nbprof.analysis/1"
    assert j["verdict"]["bottleneck"] in BOTTLENECKS
    assert list(d.kernel_class.index) == list(trace.kernels.index)
    return d


def basic(tmp_path: Path) -> tuple[Diagnosis, KinetoBuilder]:
    b = KinetoBuilder(sm_count=132)
    b.kernel(SGEMM, 0, 10, grid=(66, 1, 1), occupancy=50)
    b.kernel(SGEMM, 5, 20, grid=(264, 1, 1), occupancy=100)
    b.kernel(ELEMENTWISE, 40, 4, grid=(33, 1, 1), occupancy=20)
    b.memcpy(60, 10, 1_000_000, src="Pageable")
    b.memset(80, 5, 4096)
    return diagnose(b, tmp_path), b


def sample_frame(trace: Trace, n: int, every_us: int, **cols: float | np.ndarray) -> pd.DataFrame:
    """``n`` NVML samples of GPU 0, one every ``every_us`` from the first kernel's start;
    every metric NaN (not sampled) but ``cols``."""
    assert trace.origin_ns is not None
    t0 = trace.origin_ns + int(trace.kernels["ts"].iloc[0] * 1000)
    rows = {c: np.full(n, np.nan) for c in METRICS}
    rows.update({c: np.broadcast_to(np.asarray(v, dtype="float64"), n) for c, v in cols.items()})
    times = t0 + every_us * 1000 * np.arange(n, dtype="int64")
    return pd.DataFrame({"time_ns": times, "gpu": 0, **rows})


def test_busy_span_and_counts(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    (m,) = d.devices
    assert (m.rank, m.device) == (0, "0")
    assert m.gpu_span_us == pytest.approx(85.0)
    assert (m.kernel_count, m.memcpy_count, m.memset_count) == (3, 1, 1)
    # Union of [0,10], [5,25], [40,44] = 25 + 4.
    assert m.kernel_busy_pct == pytest.approx((25 + 4) / 85 * 100)
    # Plus the memcpy [60,70] and the memset [80,85].
    assert m.gpu_busy_pct == pytest.approx((25 + 4 + 10 + 5) / 85 * 100)
    assert m.basis["kernel_busy_pct"].kind == "trace"


def test_sm_efficiency_overlaps_add_and_clamp(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    (m,) = d.devices
    # [0,5): 66/132 = .5; [5,10): .5 + 1 clamped to 1; [10,25): 1; [40,44): 33/132 = .25.
    expected = (0.5 * 5 + 1 * 5 + 1 * 15 + 0.25 * 4) / 85 * 100
    assert m.sm_efficiency_pct == pytest.approx(expected)
    assert m.basis["sm_efficiency_pct"].kind == "trace"


def test_sm_efficiency_null_without_sm_count(tmp_path: Path) -> None:
    b = KinetoBuilder(sm_count=0)
    b.kernel(SGEMM, 0, 10, grid=(66, 1, 1))
    (m,) = diagnose(b, tmp_path).devices
    assert m.sm_efficiency_pct is None
    assert m.basis["sm_efficiency_pct"].kind == "unknown"


def test_occupancy_is_duration_weighted(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    assert d.devices[0].occupancy_pct == pytest.approx((50 * 10 + 100 * 20 + 20 * 4) / 34)


def test_short_kernels_by_count(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    # Durations 10, 20, 4: only the 4 µs kernel is under 10 µs.
    assert d.devices[0].short_kernel_pct == pytest.approx(1 / 3 * 100)


def test_copies_bytes_pageable_bandwidth(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    m = d.devices[0]
    assert m.memcpy_bytes == 1_000_000
    assert m.pageable_memcpy_count == 1
    ((c),) = m.copies
    assert (c["kind"], c["count"], c["bytes"], c["us"]) == ("HtoD pageable", 1, 1_000_000, 10)
    assert c["gbps"] == pytest.approx(1_000_000 / 10 / 1e3)
    copies = d.copies
    assert list(copies[["kind", "src", "dst"]].iloc[0]) == ["HtoD", "Pageable", "Device"]
    assert bool(copies["pageable"].iloc[0])
    assert copies["gbps"].iloc[0] == pytest.approx(100.0)
    f = {x.id: x for x in d.findings}["pageable_memcpy"]
    assert f.evidence["pageable_memcpy_count"] == 1
    assert "non_blocking=True" in (f.code or "")


def test_launch_delay_is_median_of_start_minus_launch(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i, delay in enumerate((3.0, 7.0, 11.0)):
        b.kernel(SGEMM, 100 * i + 20, 10, launch_ts=100 * i + 20 - delay)
    assert diagnose(b, tmp_path).devices[0].launch_to_start_us == pytest.approx(7.0)


def test_idle_breakdown_host_kernel_other(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 0, 10, launch_ts=-5)
    # Queued before the previous kernel ended, gap 3 µs (< 5): kernel wait.
    b.kernel(SGEMM, 13, 10, launch_ts=2)
    # Queued early, gap 40 µs: other (waiting on something else).
    b.kernel(SGEMM, 63, 10, launch_ts=4)
    # Launched 20 µs after the previous kernel ended at 73, gap 30: the host's until its
    # launch call returned at 95 (93 + the builder's 2 µs call), then 8 µs of the GPU's
    # own delay before the kernel started at 103.
    b.kernel(SGEMM, 103, 10, launch_ts=93)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    idle = m.idle
    total = 3 + 40 + 30
    assert idle.idle_us == pytest.approx(total)
    assert idle.kernel_wait_pct == pytest.approx((3 + 8) / total * 100)
    assert idle.other_pct == pytest.approx(40 / total * 100)
    assert idle.host_wait_pct == pytest.approx(22 / total * 100)
    assert m.idle_queued_pct == pytest.approx((3 + 40 + 8) / total * 100)
    gaps = d.idle_gaps
    assert list(gaps.columns[:8]) == [
        "rank", "device", "stream", "start", "end", "dur", "cause", "cpu_work",
    ]  # fmt: skip
    assert sorted(gaps["cause"]) == ["host_wait", "kernel_wait", "other"]
    assert gaps["dur"].iloc[0] == pytest.approx(40)  # largest first


def test_idle_is_per_stream(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 0, 10, stream=7, launch_ts=-5)
    b.kernel(SGEMM, 30, 10, stream=7, launch_ts=25)
    b.kernel(SGEMM, 0, 50, stream=9, launch_ts=-5)
    d = diagnose(b, tmp_path)
    gaps = d.idle_gaps
    assert list(gaps["stream"]) == [7]
    assert gaps["dur"].iloc[0] == pytest.approx(20)
    # The device as a whole was never idle: stream 9 covered the gap.
    assert d.devices[0].kernel_busy_pct == pytest.approx(100.0)


DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
STEPS, BURST, KERNEL_US = 4, 10, 30.0


def dataloader_run(load: float, *, recorded_as: str = "cpu_op") -> KinetoBuilder:
    """``STEPS`` steps: a ``load`` µs batch fetch on the main thread, then ``BURST``
    back-to-back kernels of ``KERNEL_US``, all launched at once (the GPU never waits
    inside a burst). Older PyTorch writes the fetch as a ``cpu_op``, newer as a
    ``user_annotation``, and ``with_stack=True`` adds its ``python_function`` frame."""
    b = KinetoBuilder()
    t = 0.0
    busy = BURST * KERNEL_US
    for step in range(STEPS):
        step_len = load + 5 + busy
        b.step(step, t, step_len)
        if recorded_as == "python_function":
            b.cpu_op("torch/utils/data/dataloader.py(733): __next__", t, load, cat=recorded_as)
            b.cpu_op("torch/nn/modules/module.py(1743): _call_impl", t + load, 2, cat=recorded_as)
        else:
            b.cpu_op(DATALOADER, t, load, cat=recorded_as)
        for j in range(BURST):
            launch = t + load + 1 + 0.1 * j
            b.kernel(SGEMM, t + load + 5 + KERNEL_US * j, KERNEL_US, launch_ts=launch,
                     launch_dur=0.05)  # fmt: skip
        t += step_len
    return b


def dataloader_shares(load: float) -> tuple[float, float]:
    """(share of the span idle in the fetch, share of step time in it), as formulas: the
    span opens at the first kernel; each later step adds a ``load + 5`` µs gap, all but the
    5 µs launch delay of it inside the fetch."""
    busy = BURST * KERNEL_US
    span = (STEPS - 1) * (load + 5) + STEPS * busy
    return (STEPS - 1) * load / span * 100, load / (load + 5 + busy) * 100


@pytest.mark.parametrize("recorded_as", ["cpu_op", "user_annotation", "python_function"])
def test_dataloader_share_and_input_bound_verdict(tmp_path: Path, recorded_as: str) -> None:
    d = diagnose(dataloader_run(600.0, recorded_as=recorded_as), tmp_path)
    m = d.devices[0]
    idle_share, step_share = dataloader_shares(600.0)
    assert m.dataloader_pct == pytest.approx(step_share)
    assert m.span_breakdown["input"] == pytest.approx(idle_share)
    assert d.verdict.bottleneck == "input_bound"
    assert d.verdict.basis == "dataloader_gaps"
    assert f"{idle_share:.0f}% of the span" in d.verdict.summary
    assert d.idle_gaps["cpu_work"].iloc[0] == "DataLoader __next__"
    stalls = d.stalls
    assert (stalls["cause"].iloc[0], stalls["cpu_work"].iloc[0]) == (
        "input",
        "DataLoader __next__",
    )
    f = {x.id: x for x in d.findings}["input_pipeline"]
    assert "num_workers" in (f.code or "") and "pin_memory=True" in (f.code or "")
    assert f.severity == "high"
    assert f.evidence["idle_in_dataloader_pct"] == pytest.approx(idle_share, abs=0.05)


def test_only_the_dataloader_frame_of_a_python_stack_is_read(tmp_path: Path) -> None:
    trace = read_trace(dataloader_run(600.0, recorded_as="python_function").write(tmp_path))
    names = set(trace.annotations["name"])
    assert "torch/utils/data/dataloader.py(733): __next__" in names
    assert not any("module.py" in n for n in names)


def test_dataloader_after_fix_is_not_input_bound(tmp_path: Path) -> None:
    d = diagnose(dataloader_run(2.0), tmp_path)
    idle_share, step_share = dataloader_shares(2.0)
    assert d.devices[0].dataloader_pct == pytest.approx(step_share)
    assert d.devices[0].span_breakdown["input"] == pytest.approx(idle_share)
    assert d.verdict.bottleneck == "compute_bound"


def test_syncs_table_and_sync_pct(tmp_path: Path) -> None:
    n = 25
    b = KinetoBuilder()
    t = 0.0
    for _ in range(n):
        b.kernel(SGEMM, t, 10, launch_ts=t - 3)
        b.cpu_op("aten::item", t - 2, 14)
        b.runtime("cudaStreamSynchronize", t - 1, 12)
        # After the sync returns at t+11 the host takes 40 µs before the next launch.
        t += 55
    d = diagnose(b, tmp_path)
    syncs = d.syncs.set_index("name")
    assert syncs.loc["cudaStreamSynchronize", "count"] == n
    assert syncs.loc["cudaStreamSynchronize", "total_us"] == pytest.approx(12 * n)
    assert syncs.loc["aten::item", "count"] == n
    span = (n - 1) * 55 + 10
    assert syncs.loc["cudaStreamSynchronize", "pct"] == pytest.approx(12 * n / span * 100)
    # Host sync time, counted once (.item() encloses the sync), clipped to the GPU span:
    # the first .item() starts 2 µs before the first kernel, the last ends 2 µs after the last.
    assert d.devices[0].sync_pct == pytest.approx((12 + (n - 2) * 14 + 12) / span * 100)
    # Each 45 µs gap [t+10, t+55): the .item() still blocks 2 µs (to t+12); the next
    # .item() blocks from t+53, 1 µs before the next kernel's launch call returns at t+54:
    # 3 µs are the syncs'. From t+54 the kernel is queued (1 µs of the GPU's own delay).
    # Once .item() has returned, the host's Python runs: 41 µs are the host's, 14 µs of
    # them right after the 14 µs block (the queue it drained).
    sb = d.devices[0].span_breakdown
    assert sb["sync"] == pytest.approx((n - 1) * 3 / span * 100)
    assert sb["kernel_wait"] == pytest.approx((n - 1) * 1 / span * 100)
    assert sb["host"] == pytest.approx((n - 1) * 41 / span * 100)
    assert d.verdict.bottleneck == "host_bound"
    assert f"{(n - 1) * 14 / span * 100:.0f}% of the span right after a blocking call" in (
        d.verdict.summary
    )
    # .item() holds the synchronize: each µs of idle time is charged to one of them only.
    f = {x.id: x for x in d.findings}["sync_stalls"]
    assert sum(f.evidence["blocking_calls"].values()) == pytest.approx(sb["sync"], abs=0.1)


CYCLES, KERNEL_LONG, HOST_AFTER = 10, 1000.0, 1000.0


def blocking_run(*, blocking: bool, copy: bool = False) -> KinetoBuilder:
    """``CYCLES`` cycles of 2010 µs: a 1000 µs GEMM launched at T (running T+5 to T+1005),
    a blocking call, then host work until the next launch at T+2010.

    ``blocking``: the call is made at T+3 and returns as the GEMM ends (the host waits for
    it); else it is made at T+1006, on an idle GPU, and returns in 1 µs. ``copy``: the call
    is a device-to-host cudaMemcpyAsync of 704 B (its copy runs T+1005 to T+1007) instead of
    a cudaStreamSynchronize."""
    b = KinetoBuilder()
    for i in range(CYCLES):
        t = 2010.0 * i
        b.kernel(SGEMM, t + 5, KERNEL_LONG, launch_ts=t)
        if copy:
            b.memcpy(t + 1005, 2, 704, kind="DtoH", src="Device", dst="Pageable",
                     launch_ts=t + 3, launch_dur=1005)  # fmt: skip
        elif blocking:
            b.runtime("cudaStreamSynchronize", t + 3, 1003)
        else:
            b.runtime("cudaStreamSynchronize", t + 1006, 1)
    return b


def test_a_blocking_sync_gets_only_its_blocked_time(tmp_path: Path) -> None:
    d = diagnose(blocking_run(blocking=True), tmp_path)
    m = d.devices[0]
    span = (CYCLES - 1) * 2010 + KERNEL_LONG
    # Each gap T+1005..T+2015: the sync still blocks 1 µs (to T+1006); then the host's
    # Python until the next launch call returns at T+2012 (1006 µs, the first 1003 of them
    # inside the block's own length after it: the queue it drained); the next sync blocks
    # from T+2013 with the GEMM queued since T+2012: 3 µs of the GPU's own delay.
    assert m.span_breakdown["sync"] == pytest.approx((CYCLES - 1) * 1 / span * 100)
    assert m.span_breakdown["host"] == pytest.approx((CYCLES - 1) * 1006 / span * 100)
    assert m.span_breakdown["kernel_wait"] == pytest.approx((CYCLES - 1) * 3 / span * 100)
    assert d.verdict.bottleneck == "host_bound"
    drained = (CYCLES - 1) * 1003 / span * 100
    assert f"{drained:.0f}% of the span right after a blocking call returned" in d.verdict.summary
    assert "sync_stalls" not in {x.id for x in d.findings}


def test_an_instant_sync_explains_nothing_of_the_gap(tmp_path: Path) -> None:
    d = diagnose(blocking_run(blocking=False), tmp_path)
    m = d.devices[0]
    span = (CYCLES - 1) * 2010 + KERNEL_LONG
    # Each 1010 µs gap: the 1 µs sync blocks 1 µs; the GEMM is queued from T+2012 (its
    # launch call returned), 3 µs before it starts; the other 1006 µs are the host's work.
    assert m.span_breakdown["sync"] == pytest.approx((CYCLES - 1) * 1 / span * 100)
    assert m.span_breakdown["host"] == pytest.approx((CYCLES - 1) * 1006 / span * 100)
    assert d.verdict.bottleneck == "host_bound"
    assert "sync_stalls" not in {x.id for x in d.findings}


def test_a_blocking_device_to_host_copy_is_charged_as_a_sync_is(tmp_path: Path) -> None:
    d = diagnose(blocking_run(blocking=True, copy=True), tmp_path)
    m = d.devices[0]
    span = (CYCLES - 1) * 2010 + 1002.0  # the last copy ends 2 µs after the last GEMM
    # Each gap T+1007..T+2015: the copy call still blocks 1 µs (to T+1008), then 1004 µs
    # of the host's work until the next launch call returns at T+2012; 3 µs queued.
    assert m.span_breakdown["sync"] == pytest.approx((CYCLES - 1) * 1 / span * 100)
    assert m.span_breakdown["host"] == pytest.approx((CYCLES - 1) * 1004 / span * 100)
    assert d.verdict.bottleneck != "sync_bound"
    assert d.verdict.basis in ("host_gaps", "launch_gaps")
    syncs = d.syncs.set_index("name")
    assert syncs.loc["cudaMemcpyAsync (DtoH)", "count"] == CYCLES
    assert syncs.loc["cudaMemcpyAsync (DtoH)", "total_us"] == pytest.approx(CYCLES * 1005)


def staging_run() -> KinetoBuilder:
    """``CYCLES`` cycles of 1000 µs: a 200 µs GEMM (T+5 to T+205), then a blocking 64 MB
    pageable cudaMemcpy called at T+205 that returns at T+1000, its copy running only from
    T+945 to T+995 (the host stages the data first); the next GEMM is launched at T+1000
    (its call returning at T+1002) and starts at T+1005."""
    b = KinetoBuilder()
    for i in range(CYCLES):
        t = 1000.0 * i
        b.kernel(SGEMM, t + 5, 200, launch_ts=t)
        b.memcpy(t + 945, 50, 64 << 20, launch_ts=t + 205, launch_dur=795, call="cudaMemcpy")
    return b


def test_a_host_blocked_with_nothing_queued_is_sync_bound(tmp_path: Path) -> None:
    d = diagnose(staging_run(), tmp_path)
    m = d.devices[0]
    span = (CYCLES - 1) * 1000 + 990.0
    # Each cycle idles T+205..T+945 with the host in the copy call and nothing queued
    # (740 µs, the sync's); between cycles, T+995..T+1005: still blocked to T+1000 (5 µs
    # more), the host's to T+1002, then the GEMM queued 3 µs.
    assert m.span_breakdown["sync"] == pytest.approx((CYCLES * 740 + (CYCLES - 1) * 5) / span * 100)
    assert m.span_breakdown["kernel_wait"] == pytest.approx((CYCLES - 1) * 3 / span * 100)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("sync_bound", "sync_gaps")
    assert "cudaMemcpy (HtoD)" in d.verdict.summary
    assert "sync_stalls" in {x.id for x in d.findings}


def test_an_asynchronous_copy_that_returns_early_is_no_sync(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(CYCLES):
        b.kernel(SGEMM, 1000.0 * i + 5, 990, launch_ts=1000.0 * i)
        b.memcpy(1000.0 * i + 995, 4, 4096, src="Pinned", launch_ts=1000.0 * i + 1)
    d = diagnose(b, tmp_path)
    assert d.syncs.empty
    assert d.devices[0].sync_pct == 0.0


def paced_run(n: int, period: float, kernel: float, call: float, start: float) -> KinetoBuilder:
    """``n`` kernels of ``kernel`` µs, one launch call of ``call`` µs every ``period`` µs,
    each kernel starting ``start`` µs after its launch call began (``start > call``)."""
    b = KinetoBuilder()
    for i in range(n):
        b.kernel(ELEMENTWISE, period * i + start, kernel, launch_ts=period * i, launch_dur=call)
    return b


def test_host_bound_when_the_host_spends_far_more_than_the_launch_per_kernel(
    tmp_path: Path,
) -> None:
    # 5 µs kernels, a 5 µs launch call every 50 µs: 45 µs of Python per kernel.
    d = diagnose(paced_run(50, period=50, kernel=5, call=5, start=7), tmp_path)
    m = d.devices[0]
    span = 49 * 50 + 5
    # Each 45 µs gap: 43 µs until the launch call returns, 2 µs of the GPU's own delay.
    assert m.span_breakdown["host"] == pytest.approx(49 * 43 / span * 100)
    assert m.span_breakdown["kernel_wait"] == pytest.approx(49 * 2 / span * 100)
    assert m.host_us_per_kernel == pytest.approx(50)
    assert m.launch_us_per_kernel == pytest.approx(5)
    assert m.launch_to_start_us == pytest.approx(7)
    assert m.idle.host_wait_pct == pytest.approx(43 / 45 * 100)
    assert m.idle_queued_pct == pytest.approx(2 / 45 * 100)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("host_bound", "host_gaps")
    assert "50.0 µs per kernel, 5.0 µs of it in the launch call" in d.verdict.summary
    f = {x.id: x for x in d.findings}["host_overhead"]
    assert f.evidence["host_us_per_kernel"] == 50.0
    assert "launch_overhead" not in {x.id for x in d.findings}


def test_launch_bound_when_queued_kernels_are_shorter_than_the_gaps_between_them(
    tmp_path: Path,
) -> None:
    # A graph replay: 100 kernels of 2 µs all queued up front, 3 µs apart on the GPU (its
    # own per-kernel delay): the host is not involved, the kernels are just too small.
    b = KinetoBuilder()
    for i in range(100):
        b.kernel(ELEMENTWISE, 5.0 * i, 2, launch_ts=-20 + 0.1 * i, launch_dur=0.05)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    span = 99 * 5 + 2.0
    assert m.span_breakdown["kernel_wait"] == pytest.approx(99 * 3 / span * 100)
    assert m.span_breakdown["host"] == 0.0
    assert (d.verdict.bottleneck, d.verdict.basis) == ("launch_bound", "kernel_gaps")


def test_launch_bound_when_the_launch_calls_take_the_host_time(tmp_path: Path) -> None:
    # 2 µs kernels, an 8 µs launch call every 10 µs, each kernel starting 1 µs after its
    # call returns: the next call is still running when a kernel ends, so nothing is
    # queued in a gap until that call returns 1 µs before its kernel starts, and the
    # calls take 8 of the host's 10 µs per kernel.
    d = diagnose(paced_run(100, period=10, kernel=2, call=8, start=9), tmp_path)
    m = d.devices[0]
    span = 99 * 10 + 2
    assert m.short_kernel_pct == pytest.approx(100.0)
    assert m.kernel_busy_pct == pytest.approx(100 * 2 / span * 100)
    assert m.span_breakdown["host"] == pytest.approx(99 * 7 / span * 100)
    assert m.span_breakdown["kernel_wait"] == pytest.approx(99 * 1 / span * 100)
    assert (m.host_us_per_kernel, m.launch_us_per_kernel) == (pytest.approx(10), pytest.approx(8))
    assert (d.verdict.bottleneck, d.verdict.basis) == ("launch_bound", "launch_gaps")
    f = {x.id: x for x in d.findings}["launch_overhead"]
    assert "reduce-overhead" in (f.code or "")
    assert "host_overhead" not in {x.id for x in d.findings}


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"


def collective_run(*, exposed: bool) -> KinetoBuilder:
    """Ten cycles of a 1000 µs GEMM on stream 7 and an all-reduce on stream 9.

    ``exposed``: cycles of 2000 µs, the all-reduce running T+500..T+2000, half of it past
    the GEMM; else back-to-back GEMMs, the all-reduce T+100..T+900 inside each."""
    b = KinetoBuilder()
    period = 2000.0 if exposed else 1000.0
    for i in range(10):
        t = period * i
        b.kernel(SGEMM, t, 1000, launch_ts=t - 50, stream=7)
        if exposed:
            b.kernel(NCCL, t + 500, 1500, launch_ts=t - 40, stream=9)
        else:
            b.kernel(NCCL, t + 100, 800, launch_ts=t - 40, stream=9)
    return b


def test_exposed_collectives_are_communication_bound(tmp_path: Path) -> None:
    d = diagnose(collective_run(exposed=True), tmp_path)
    m = d.devices[0]
    span = 10 * 2000.0
    assert m.comm_pct == pytest.approx(15000 / (15000 + 10000) * 100)
    assert m.exposed_comm_pct == pytest.approx(10 * 1000 / span * 100)
    assert m.comm_overlap_pct == pytest.approx(500 / 1500 * 100)
    assert (d.verdict.bottleneck, d.verdict.basis) == (
        "communication_bound",
        "exposed_communication",
    )
    assert "for 50% of the span collectives ran with no compute kernel" in d.verdict.summary
    f = {x.id: x for x in d.findings}["communication"]
    assert f.evidence["exposed_comm_pct"] == pytest.approx(50.0)
    assert d.kernel_class["cls"].tolist()[:2] == ["compute", "communication"]


def test_overlapped_collectives_are_not_communication_bound(tmp_path: Path) -> None:
    d = diagnose(collective_run(exposed=False), tmp_path)
    m = d.devices[0]
    assert m.comm_pct == pytest.approx(8000 / (8000 + 10000) * 100)  # a large share...
    assert m.exposed_comm_pct == pytest.approx(0.0)  # ...all of it hidden
    assert m.comm_overlap_pct == pytest.approx(100.0)
    assert d.verdict.bottleneck == "compute_bound"
    assert "communication" not in {x.id for x in d.findings}


def test_transfer_bound(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(10):
        t = 100.0 * i
        # An 80 µs copy, then a 15 µs GEMM queued long before: only copies run 80 of 100 µs.
        b.memcpy(t, 80, 8_000_000, src="Pageable", launch_ts=t - 5)
        b.kernel(SGEMM, t + 83, 15, launch_ts=t - 4)
    d = diagnose(b, tmp_path)
    span = 9 * 100 + 98.0
    assert d.devices[0].span_breakdown["copy_only"] == pytest.approx(10 * 80 / span * 100)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("transfer_bound", "copy_time")


def test_compute_and_memory_bound_by_kernel_class(tmp_path: Path) -> None:
    # Two kernels, but 1 ms of GPU work: enough to judge.
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 900)
    b.kernel(ELEMENTWISE, 900, 100, launch_ts=50)
    d = diagnose(b, tmp_path / "")
    assert d.verdict.bottleneck == "compute_bound"
    b2 = KinetoBuilder()
    b2.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 100)
    b2.kernel(ELEMENTWISE, 100, 900, launch_ts=5)
    sub = tmp_path / "mem"
    sub.mkdir()
    assert diagnose(b2, sub).verdict.bottleneck == "memory_bound"


def test_idle_verdict_when_no_cause_dominates(tmp_path: Path) -> None:
    # Cycles of 1000 µs: a 300 µs GEMM, then a 700 µs gap shared by three causes: a 230 µs
    # DataLoader fetch, 230 µs of set-up (cudaMalloc) and 237 µs of Python (then 3 µs
    # between the launch call's return and the GEMM), none of them a quarter of the span.
    b = KinetoBuilder()
    for i in range(20):
        t = 1000.0 * i
        b.kernel(SGEMM, t, 300, launch_ts=t - 5)
        b.cpu_op(DATALOADER, t + 300, 230)
        b.runtime("cudaMalloc", t + 530, 230)
    d = diagnose(b, tmp_path)
    sb = d.devices[0].span_breakdown
    span = 19 * 1000 + 300.0
    assert sb["input"] == pytest.approx(19 * 230 / span * 100)
    assert sb["setup"] == pytest.approx(19 * 230 / span * 100)
    assert sb["host"] == pytest.approx(19 * 237 / span * 100)
    assert (d.verdict.bottleneck, d.verdict.confidence) == ("idle", "low")
    assert "no one cause covers 25%" in d.verdict.summary
    assert "gpu_idle" in {f.id for f in d.findings}


def test_cpu_only_trace(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.cpu_op("aten::add", 0, 10)
    b.cpu_op("aten::mul", 20, 10)
    d = diagnose(b, tmp_path)
    assert d.devices == []
    assert d.verdict.bottleneck == "cpu_only"
    assert [f.id for f in d.findings] == ["no_gpu_activity"]
    assert d.explanation


def test_tensor_cores_by_name_and_class_table(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 30)
    b.kernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", 30, 10)
    b.kernel(ELEMENTWISE, 40, 60, launch_ts=35)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.tensor_core_pct == pytest.approx(40 / 100 * 100)
    assert m.tensor_core_basis == "kernel_names"
    assert d.kernel_class["tensor_core"].tolist() == [True, True, False]
    top = d.top_kernels
    assert top["name"].iloc[0] == ELEMENTWISE
    assert top["pct"].iloc[0] == pytest.approx(60.0)
    assert list(top.columns[:7]) == [
        "name", "count", "total_us", "mean_us", "pct", "cls", "tensor_core",
    ]  # fmt: skip


def test_tensor_cores_by_op_when_names_are_silent(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.cpu_op("aten::mm", 0, 20, dims=[[64, 64], [64, 64]], types=["c10::BFloat16"] * 2)
    b.kernel("some_future_gemm_kernel_without_markers", 10, 50, launch_ts=5)
    b.cpu_op("aten::mm", 100, 20, dims=[[64, 64], [64, 64]], types=["float", "float"])
    b.kernel("another_unknown_kernel", 110, 50, launch_ts=105)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.tensor_core_basis == "ops"
    assert m.tensor_core_pct == pytest.approx(50 / 100 * 100)


def test_no_tensor_cores_before_volta(tmp_path: Path) -> None:
    b = KinetoBuilder(device_name="Tesla P100-SXM2-16GB", major=6, minor=0, sm_count=56)
    b.kernel("volta_h884gemm_lookalike", 0, 10)  # a name alone cannot overrule the hardware
    m = diagnose(b, tmp_path).devices[0]
    assert m.tensor_core_pct == 0.0
    assert "compute capability" in m.basis["tensor_core_pct"].how


def test_simt_gemm_flagged_for_tf32(tmp_path: Path) -> None:
    b = KinetoBuilder(device_name="NVIDIA A100-SXM4-80GB", major=8, sm_count=108)
    b.kernel(SGEMM, 0, 900)
    b.kernel(ELEMENTWISE, 900, 100, launch_ts=50)
    d = diagnose(b, tmp_path)
    assert d.devices[0].tensor_core_pct == 0.0
    f = {x.id: x for x in d.findings}["low_tensor_core_share"]
    assert "set_float32_matmul_precision('high')" in (f.code or "")
    assert f.evidence["simt_gemm_pct"] == pytest.approx(90.0)


def test_roofline_from_flops_and_shapes(tmp_path: Path) -> None:
    m_, k_, n_ = 1024, 512, 256
    flops = 2.0 * m_ * k_ * n_
    b = KinetoBuilder()  # H100 SXM: fp32 67 TFLOP/s, 3350 GB/s -> ridge 20 FLOP/B
    b.cpu_op("aten::mm", 0, 30, flops=flops, dims=[[m_, k_], [k_, n_]], types=["float", "float"])
    b.kernel(SGEMM, 10, 40, launch_ts=5)
    b.kernel(SGEMM, 50, 10, launch_ts=8)
    d = diagnose(b, tmp_path)
    roof = d.ops_roofline
    row = roof[roof["op"] == "aten::mm"].iloc[0]
    nbytes = (m_ * k_ + k_ * n_ + m_ * n_) * 4
    assert row["flops"] == pytest.approx(flops)
    assert row["bytes"] == pytest.approx(nbytes)
    assert row["total_us"] == pytest.approx(50)
    assert row["tflops"] == pytest.approx(flops / 50e-6 / 1e12)
    assert row["gbps"] == pytest.approx(nbytes / 50e-6 / 1e9)
    assert row["intensity"] == pytest.approx(flops / nbytes)
    ridge = 67e12 / 3350e9
    assert row["bound"] == ("compute" if flops / nbytes >= ridge else "memory")
    assert "estimated" in row["basis"]
    m = d.devices[0]
    assert m.achieved_tflops == pytest.approx(flops / 50 / 1e6)  # span is 50 µs
    assert m.achieved_gbps == pytest.approx(nbytes / 50 / 1e3)
    assert m.basis["achieved_gbps"].kind == "estimated"
    assert m.peak_tflops == 67.0 and m.peak_gbps == 3350.0


def test_roofline_memory_bound_small_matmul(tmp_path: Path) -> None:
    b = KinetoBuilder()
    dims = [[4096, 8], [8, 4096]]  # intensity = 2*4096*8*4096 / ((2*4096*8 + 4096²)*4) < 1
    b.cpu_op("aten::mm", 0, 30, flops=2.0 * 4096 * 8 * 4096, dims=dims, types=["float"] * 2)
    b.kernel(SGEMM, 10, 40, launch_ts=5)
    roof = diagnose(b, tmp_path).ops_roofline
    assert roof["bound"].iloc[0] == "memory"


def test_unknown_device_has_unknown_peaks(tmp_path: Path) -> None:
    b = KinetoBuilder(device_name="NVIDIA Mystery GPU 9000")
    b.cpu_op("aten::mm", 0, 30, flops=1e9, dims=[[64, 64], [64, 64]], types=["float"] * 2)
    b.kernel(SGEMM, 10, 40, launch_ts=5)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.peak_tflops is None and m.peak_gbps is None
    assert m.basis["peak_gbps"].kind == "unknown"
    assert d.ops_roofline["bound"].iloc[0] == "unknown"


def test_known_device_without_flops_says_why_its_peak_tflops_is_unknown(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 10, 40)
    m = diagnose(b, tmp_path).devices[0]
    assert m.peak_gbps == 3350.0 and m.peak_tflops is None
    assert m.basis["peak_tflops"].kind == "unknown"
    assert "no ops with FLOP counts" in m.basis["peak_tflops"].how


def test_amd_gets_no_nvidia_claims(tmp_path: Path) -> None:
    b = KinetoBuilder(device_name="AMD Instinct MI250X", major=9, minor=0, sm_count=110)
    b.kernel("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN", 0, 50)
    b.kernel(ELEMENTWISE, 50, 50, launch_ts=45)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.vendor == "amd"
    assert m.peak_tflops is None and m.peak_gbps is None
    assert m.tensor_core_pct == pytest.approx(50.0)  # MFMA matrix cores, by name
    assert "MFMA" in m.basis["tensor_core_pct"].how
    assert "low_tensor_core_share" not in {f.id for f in d.findings}
    assert "AMD" in d.explanation


def test_samples_measured_basis(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 1000)
    trace = read_trace(b.write(tmp_path))
    frame = sample_frame(  # every 100 µs across the 1 ms kernel
        trace, 11, 100, util_gpu=100.0, sm_util=np.arange(11) * 10.0, tensor_util=40.0,
        dram_bw_util=5.0,
    )  # fmt: skip
    outside = frame.assign(time_ns=frame["time_ns"] + 10**12)  # hours later: ignored
    samples = Samples(frame=pd.concat([frame, outside], ignore_index=True), source="replay")
    m = analyze(trace, samples).devices[0]
    assert m.sm_active_pct == pytest.approx(50.0)
    assert m.tensor_active_pct == pytest.approx(40.0)
    assert m.nvml_util_pct == pytest.approx(100.0)
    assert m.dram_bw_pct == pytest.approx(5.0)
    assert m.basis["sm_active_pct"].kind == "measured"
    # Counters that saw no tensor activity overrule names.
    frame2 = frame.assign(tensor_util=0.0)
    m2 = analyze(trace, Samples(frame=frame2)).devices[0]
    assert m2.tensor_core_pct == 0.0 and m2.tensor_core_basis == "measured"


def test_explanation_quotes_this_runs_numbers(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    m = d.devices[0]
    text = d.explanation
    assert f"{m.kernel_busy_pct:.1f}%" in text
    assert f"{m.sm_efficiency_pct:.1f}%" in text
    assert f"{m.tensor_core_pct:.1f}%" in text
    assert "nvidia-smi" in text


def test_every_metric_has_a_basis(tmp_path: Path) -> None:
    d, _ = basic(tmp_path)
    m = d.devices[0]
    # Every field the panel may show, so a field added later cannot go without one; the
    # identity fields and tensor_core_basis (itself a basis) are the only ones left out.
    not_numbers = {"rank", "device", "name", "tensor_core_basis", "basis"}
    for name in (f.name for f in dataclasses.fields(m) if f.name not in not_numbers):
        assert name in m.basis, name
        assert m.basis[name].how


def test_multi_device_keys(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 0, 10, device=0)
    b.kernel(SGEMM, 0, 30, device=1)
    d = diagnose(b, tmp_path)
    assert [(m.rank, m.device) for m in d.devices] == [(0, "0"), (0, "1")]
    assert [m.gpu_span_us for m in d.devices] == [pytest.approx(10), pytest.approx(30)]


def test_a_finding_every_device_shares_names_the_busiest(tmp_path: Path) -> None:
    b = KinetoBuilder(device_name="NVIDIA Mystery GPU 9000")
    b.kernel(SGEMM, 0, 10, device=0)
    b.kernel(SGEMM, 0, 30, device=1)  # as busy, over a longer span
    found = [f for f in diagnose(b, tmp_path).findings if f.id == "unknown_peaks"]
    assert [f.device for f in found] == ["1"]


def test_one_block_kernel_is_busy_but_uses_one_sm(tmp_path: Path) -> None:
    # torch.cuda._sleep: one block spinning; nvidia-smi reads 100%.
    b = KinetoBuilder(sm_count=132)
    b.kernel("at::cuda::(anonymous namespace)::spin_kernel(long)", 0, 1000, grid=(1, 1, 1))
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.kernel_busy_pct == pytest.approx(100.0)
    assert m.sm_efficiency_pct == pytest.approx(1 / 132 * 100)
    assert "low_sm_efficiency" in {f.id for f in d.findings}
    assert f"{m.sm_efficiency_pct:.1f}%" in d.explanation


def test_measured_dram_bandwidth_decides_memory_bound(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 1000)
    trace = read_trace(b.write(tmp_path))
    frame = sample_frame(trace, 5, 200, dram_bw_util=80.0, sm_util=30.0)
    d = analyze(trace, Samples(frame=frame))
    # Names alone say compute-bound; the counters say the DRAM was the limit.
    assert analyze(trace).verdict.bottleneck == "compute_bound"
    assert d.verdict.bottleneck == "memory_bound"
    assert "measured DRAM bandwidth utilization 80%" in d.verdict.summary


def test_source_carries_reader_notes(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.cpu_op("aten::add", 0, 10)
    d = diagnose(b, tmp_path)
    assert d.source["events"] == 1
    assert d.source["path"].endswith("trace.json")


def test_no_device_properties(tmp_path: Path) -> None:
    b = KinetoBuilder(with_devices=False)
    b.kernel("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16", 0, 30)
    b.kernel(SGEMM, 30, 10, launch_ts=20)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.vendor == "nvidia"  # from the cudaLaunchKernel calls
    assert m.sm_count is None and m.sm_efficiency_pct is None
    assert m.basis["sm_efficiency_pct"].kind == "unknown"
    assert m.peak_gbps is None and m.basis["peak_gbps"].kind == "unknown"
    assert m.tensor_core_pct == pytest.approx(30 / 40 * 100)


def test_profile_diagnosis_end_to_end(tmp_path: Path) -> None:
    from nbprof.loading import load

    d, b = basic(tmp_path)
    prof = load(b.write(tmp_path, "again.json"))
    assert prof.diagnosis.to_json()["devices"] == d.to_json()["devices"]


_NAMES = [SGEMM, ELEMENTWISE, "ncclKernel_AllReduce", "sm90_xmma_gemm_bf16bf16_bf16f32_f32"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["kernel", "memcpy", "memset"]),
            st.floats(0, 500, allow_nan=False),
            st.floats(0, 80, allow_nan=False),
            st.floats(-30, 30, allow_nan=False),
            st.integers(0, 3),
            st.sampled_from([7, 9]),
        ),
        min_size=0,
        max_size=30,
    )
)
def test_any_small_trace_gives_a_sane_diagnosis(events: list[tuple]) -> None:
    b = KinetoBuilder()
    for kind, ts, dur, lag, pick, stream in events:
        if kind == "kernel":
            b.kernel(
                _NAMES[pick], ts, dur, launch_ts=ts - lag, stream=stream, grid=(pick * 50, 1, 1)
            )
        elif kind == "memcpy":
            b.memcpy(ts, dur, pick * 1000, stream=stream)
        else:
            b.memset(ts, dur, pick * 1000, stream=stream)
    b.cpu_op("aten::add", 0, 10)
    with tempfile.TemporaryDirectory() as tmp:
        d = diagnose(b, Path(tmp))
    for m in d.devices:
        for pct in (m.kernel_busy_pct, m.gpu_busy_pct, m.sm_efficiency_pct, m.short_kernel_pct):
            assert pct is None or 0.0 <= pct <= 100.0 + 1e-9
        assert m.kernel_busy_pct is None or m.kernel_busy_pct <= (m.gpu_busy_pct or 0) + 1e-9
        if m.idle.idle_us > 0:
            shares = m.idle.host_wait_pct + m.idle.kernel_wait_pct + m.idle.other_pct
            assert shares == pytest.approx(100.0)
    assert d.verdict.summary


def test_measured_tensor_activity_exposes_unknown_names(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("brand_new_gemm_kernel_2031", 0, 1000)
    trace = read_trace(b.write(tmp_path))
    frame = sample_frame(trace, 3, 300, tensor_util=60.0)
    m = analyze(trace, Samples(frame=frame)).devices[0]
    assert m.tensor_active_pct == pytest.approx(60.0)
    assert "do not recognise" in m.basis["tensor_core_pct"].how


def test_graph_capture_is_too_little_gpu_work_and_raises_no_launch_findings(
    tmp_path: Path,
) -> None:
    b = KinetoBuilder()
    b.kernel(ELEMENTWISE, -50, 2)
    b.runtime("cudaStreamBeginCapture", 0, 1)
    for i in range(100):  # recorded into the graph: no kernel runs
        b.runtime("cudaLaunchKernel", 10 + 10.0 * i, 5)
    b.runtime("cudaStreamSynchronize", 500, 300)  # a capture-time call, not a block
    b.runtime("cudaStreamEndCapture", 1100, 2)
    b.kernel(ELEMENTWISE, 1200, 2)
    b.kernel(ELEMENTWISE, 1300, 2)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert (d.verdict.bottleneck, d.verdict.basis) == ("insufficient_gpu_work", "graph_capture")
    assert "recorded 100 launches" in d.verdict.summary
    # Launch figures come from the three launches outside the capture only.
    assert m.host_us_per_kernel == pytest.approx(np.median([1195 - -55, 1295 - 1195]))
    ids = {f.id for f in d.findings}
    assert "graph_capture" in ids
    assert not ids & {"launch_overhead", "host_overhead", "sync_stalls", "gpu_idle"}
    assert d.syncs.empty
    # The GPU idled the whole capture window (BeginCapture at 0 to EndCapture's end).
    assert m.span_breakdown["capture"] == pytest.approx(1102 / 1352 * 100)


def test_one_tiny_kernel_is_too_little_gpu_work(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("triton_poi_fused_add_cos_sin_0", 0, 1.76)
    d = diagnose(b, tmp_path)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("insufficient_gpu_work", "little_gpu_work")
    assert "only 1 GPU event ran (1.8 µs of GPU time)" in d.verdict.summary
    assert "memory_bound_kernels" not in {f.id for f in d.findings}


def test_copies_per_direction_and_memory_kind(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.memcpy(0, 100, 1_000_000, kind="HtoD", src="Pageable")
    b.memcpy(200, 100, 2_000_000, kind="HtoD", src="Pinned")
    b.memcpy(400, 50, 500_000, kind="DtoH", src="Device", dst="Pinned")
    b.memcpy(500, 10, 10_000_000, kind="DtoD", src="Device", dst="Device")
    b.memcpy(600, 10, None, kind="DtoD", src="Device", dst="Device")  # no byte count
    m = diagnose(b, tmp_path).devices[0]
    got = {c["kind"]: c for c in m.copies}
    assert list(got) == ["HtoD pageable", "HtoD pinned", "DtoH pinned", "DtoD"]
    assert got["HtoD pageable"]["gbps"] == pytest.approx(1_000_000 / 100 / 1e3)
    assert got["HtoD pinned"]["gbps"] == pytest.approx(2_000_000 / 100 / 1e3)
    assert got["DtoH pinned"]["gbps"] == pytest.approx(500_000 / 50 / 1e3)
    # The DtoD rate is over the copies whose bytes are known; both count and take time.
    assert (got["DtoD"]["count"], got["DtoD"]["us"]) == (2, 20.0)
    assert got["DtoD"]["gbps"] == pytest.approx(10_000_000 / 10 / 1e3)
    assert m.memcpy_bytes == 1_000_000 + 2_000_000 + 500_000 + 10_000_000


def test_memcpy_bytes_unknown_when_no_copy_has_a_count(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.memcpy(0, 10, None)
    b.kernel(SGEMM, 20, 10)
    m = diagnose(b, tmp_path).devices[0]
    assert m.memcpy_bytes is None
    assert m.basis["memcpy_bytes"].kind == "unknown"
    assert m.copies[0]["bytes"] is None and m.copies[0]["gbps"] is None


def test_idle_on_three_streams_is_the_union(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for stream, first in ((7, 0.0), (9, 20.0), (11, 40.0)):
        b.kernel(SGEMM, first, 10, stream=stream, launch_ts=-20)
        b.kernel(SGEMM, 90, 10, stream=stream, launch_ts=-20)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    # Busy [0,10) [20,30) [40,50) [90,100): the device idled 10 + 10 + 40 µs of its 100.
    assert m.gpu_span_us == pytest.approx(100)
    assert m.idle.idle_us == pytest.approx(60)
    # Each stream's own gaps (80 + 60 + 40 µs) add up to more than the span: no measure
    # of the device's idle time.
    per_stream = d.idle_gaps.groupby("stream")["dur"].sum().to_dict()
    assert per_stream == {7: pytest.approx(80), 9: pytest.approx(60), 11: pytest.approx(40)}
    assert sum(per_stream.values()) > m.gpu_span_us
    assert d.stalls["dur"].sum() == pytest.approx(60)


def test_queued_work_waiting_is_a_dependency(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(10):
        t = 7000.0 * i
        b.kernel(SGEMM, t, 1000, stream=7, launch_ts=t - 10)
        # Launched at once but waits (on an event of stream 7's future work, a peer...).
        b.kernel(SGEMM, t + 6000, 1000, stream=9, launch_ts=t + 10)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    span = 9 * 7000 + 7000.0
    assert m.span_breakdown["dependency"] == pytest.approx(10 * 5000 / span * 100)
    assert m.idle_queued_pct == pytest.approx(10 * 5000 / (10 * 5000) * 100)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("idle", "queued_idle")
    assert "queued_idle" in {f.id for f in d.findings}


def test_a_host_blocked_on_queued_work_that_waits_is_not_sync_bound(tmp_path: Path) -> None:
    # As above, but the host blocks in a synchronize while the queued work waits: it waits
    # on that same queue, a consequence of the wait: the time stays the dependency's.
    b = KinetoBuilder()
    for i in range(10):
        t = 7000.0 * i
        b.kernel(SGEMM, t, 1000, stream=7, launch_ts=t - 10)
        b.kernel(SGEMM, t + 6000, 1000, stream=9, launch_ts=t + 10)
        b.runtime("cudaStreamSynchronize", t + 20, 6980)
    d = diagnose(b, tmp_path)
    span = 70000.0
    sb = d.devices[0].span_breakdown
    # Each 5000 µs gap (t+1000..t+6000) had the stream-9 kernel queued since t+12.
    assert sb["dependency"] == pytest.approx(10 * 5000 / span * 100)
    assert sb["sync"] == 0.0
    assert (d.verdict.bottleneck, d.verdict.basis) == ("idle", "queued_idle")
    assert "a consequence, not the cause" in d.verdict.summary
    ids = {f.id for f in d.findings}
    assert "sync_stalls" not in ids and "queued_idle" in ids
    f = {x.id: x for x in d.findings}["queued_idle"]
    assert f.evidence["host_blocked_behind_pct"] == pytest.approx(10 * 5000 / span * 100, abs=0.05)
    assert all("synchronize" not in (x.fix or "") for x in d.findings)


def test_one_time_setup_is_blamed_on_the_runtime_calls(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(20):
        b.kernel(SGEMM, 100.0 * i, 90, launch_ts=100.0 * i - 5)
    # A conv op whose first call initialises the library: cudaFree 5 ms inside it.
    b.cpu_op("aten::conv2d", 1950, 6000)
    b.runtime("cudaFree", 2000, 5000)
    b.kernel(SGEMM, 8000, 1000, launch_ts=7990)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    span = 9000.0
    assert m.span_breakdown["setup"] == pytest.approx(5000 / span * 100)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("idle", "one_time_setup")
    assert d.stalls["cpu_work"].iloc[0] == "set-up: cudaFree"  # not aten::conv2d
    assert "one_time_setup" in {f.id for f in d.findings}


def test_a_first_launch_loading_code_is_set_up(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(20):
        b.kernel(SGEMM, 100.0 * i, 90, launch_ts=100.0 * i - 5)
    # A launch 3 ms long (lazy module loading), the GPU idle meanwhile.
    b.kernel(SGEMM, 5010, 90, launch_ts=2000, launch_dur=3000)
    d = diagnose(b, tmp_path)
    sb = d.devices[0].span_breakdown
    assert sb["setup"] == pytest.approx(3000 / 5100 * 100)
    assert d.stalls["cpu_work"].iloc[0] == "set-up: cudaLaunchKernel"


def test_window_beyond_the_gpu_span_and_work_before_the_first_gpu_event(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for step in range(5):
        t = 1000.0 * step
        b.step(step, t, 1000)
        b.cpu_op("preprocess", t, 800)  # 80% of each step before any GPU work
        for j in range(5):
            b.kernel(SGEMM, t + 810 + 30 * j, 30, launch_ts=t + 801)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.window_us == pytest.approx(5000)
    assert m.gpu_span_us == pytest.approx(4000 + 150)
    # Each step's first kernel starts 810 µs into its 1000 µs.
    assert m.pre_gpu_step_pct == pytest.approx(81.0)
    assert m.step_us == pytest.approx(1000)
    f = {x.id: x for x in d.findings}["gpu_span_vs_window"]
    assert f.evidence["pre_gpu_step_pct"] == pytest.approx(81.0)
    assert f.evidence["before_first_gpu_us"] == pytest.approx(810)
    assert "Most of each ProfilerStep happens before any GPU work" in f.detail


def test_roofline_and_classes_reconcile_per_kernel(tmp_path: Path) -> None:
    # FLOP-counted GEMMs (compute-bound on the roofline) 20% of kernel time, elementwise
    # kernels 80% by name: different kernels, no contradiction: memory-bound, both said.
    b = KinetoBuilder()
    big = [[4096, 4096], [4096, 4096]]
    for i in range(10):
        t = 1000.0 * i
        b.cpu_op("aten::mm", t, 30, flops=2.0 * 4096**3, dims=big, types=["float"] * 2)
        b.kernel(SGEMM, t + 10, 200, launch_ts=t + 5)
        b.kernel(ELEMENTWISE, t + 210, 800, launch_ts=t + 40)
    d = diagnose(b, tmp_path)
    v = d.verdict
    assert (v.bottleneck, v.confidence) == ("memory_bound", "high")
    assert "memory-bound kernels take 80% of kernel time against 20%" in v.summary
    assert "FLOP-counted ops above the roofline ridge point take 20% of kernel time" in v.summary
    f = {x.id: x for x in d.findings}["memory_bound_kernels"]
    assert f.evidence["memory_kernel_pct"] == pytest.approx(80.0)


def test_a_gemm_kernel_of_a_memory_bound_op_counts_as_memory(tmp_path: Path) -> None:
    b = KinetoBuilder()
    small = [[4096, 8], [8, 4096]]  # intensity < 1 FLOP/B: far below the ridge
    for i in range(10):
        t = 1000.0 * i
        b.cpu_op("aten::mm", t, 30, flops=2.0 * 4096 * 8 * 4096, dims=small, types=["float"] * 2)
        b.kernel(SGEMM, t + 10, 700, launch_ts=t + 5)  # a GEMM by name...
        b.kernel(SGEMM, t + 710, 300, launch_ts=t + 40)  # ...this one outside any op
    d = diagnose(b, tmp_path)
    assert d.verdict.bottleneck == "memory_bound"
    assert "FLOP-counted ops below the roofline ridge point take 70%" in d.verdict.summary


def test_measured_counters_that_disagree_lower_the_confidence(tmp_path: Path) -> None:
    # Kernel names say memory-bound (90% elementwise); DRAM bandwidth was sampled at 20%
    # and SM activity at 30%: neither limit was reached, so the call is made, but low.
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 100)
    b.kernel(ELEMENTWISE, 100, 900, launch_ts=5)
    trace = read_trace(b.write(tmp_path))
    frame = sample_frame(trace, 5, 200, dram_bw_util=20.0, sm_util=30.0)
    v = analyze(trace, Samples(frame=frame)).verdict
    assert analyze(trace).verdict.confidence == "high"
    assert (v.bottleneck, v.confidence) == ("memory_bound", "low")
    assert "measured DRAM bandwidth is only 20%" in v.summary


def test_memory_bound_ops_far_below_the_bandwidth_peak_lower_the_confidence(
    tmp_path: Path,
) -> None:
    b = KinetoBuilder()  # H100 SXM: 3350 GB/s
    small = [[64, 8], [8, 64]]  # intensity < 1 FLOP/B, and only ~20 kB per 700 µs call
    for i in range(10):
        t = 1000.0 * i
        b.cpu_op("aten::mm", t, 30, flops=2.0 * 64 * 8 * 64, dims=small, types=["float"] * 2)
        b.kernel(SGEMM, t + 10, 700, launch_ts=t + 5)
        b.kernel(SGEMM, t + 710, 300, launch_ts=t + 40)
    v = diagnose(b, tmp_path).verdict
    nbytes = (64 * 8 + 8 * 64 + 64 * 64) * 4
    rate = nbytes / 700 / 1e3  # GB/s while the op's kernels ran
    assert (v.bottleneck, v.confidence) == ("memory_bound", "low")
    assert f"move only {rate:.0f} GB/s" in v.summary


def test_collectives_do_not_drive_the_low_sm_efficiency_finding(tmp_path: Path) -> None:
    # A one-block all-reduce beside GEMMs that fill all 132 SMs: the SM-weighted
    # efficiency of all kernels is low, of the compute kernels full.
    b = KinetoBuilder(sm_count=132)
    for i in range(10):
        t = 1000.0 * i
        b.kernel(SGEMM, t, 400, grid=(264, 1, 1), launch_ts=t - 10, stream=7)
        b.kernel(NCCL, t + 400, 600, grid=(1, 1, 1), launch_ts=t - 9, stream=9)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.sm_efficiency_pct == pytest.approx((400 + 600 / 132) / 1000 * 100)
    assert "low_sm_efficiency" not in {f.id for f in d.findings}


def test_allocation_that_recurs_every_step_is_not_called_one_time(tmp_path: Path) -> None:
    # Five steps, each: a 1 ms GEMM, then 3 ms in cudaMalloc (an empty_cache() habit).
    b = KinetoBuilder()
    for i in range(5):
        t = 5000.0 * i
        b.step(i, t, 5000)
        for j in range(4):
            b.kernel(SGEMM, t + 10 + 250 * j, 250, launch_ts=t + 5)
        b.runtime("cudaMalloc", t + 1500, 3000)
    d = diagnose(b, tmp_path)
    assert (d.verdict.bottleneck, d.verdict.basis) == ("idle", "one_time_setup")
    # The last step's allocation comes after the last kernel, outside the GPU span: 4 of
    # them fall in gaps, 3 after the first step.
    assert d.devices[0].span_breakdown["setup"] == pytest.approx(4 * 3000 / (4 * 5000 + 1000) * 100)
    assert "75% of it after the first ProfilerStep: they recur" in d.verdict.summary
    ids = {f.id for f in d.findings}
    assert "allocation_churn" in ids and "one_time_setup" not in ids
