"""The NVML sampler against a fake pynvml: values, reasons, GPM windows, lifecycle."""

from __future__ import annotations

import inspect
import logging
import math
import threading

import fake_nvml
import numpy as np
import pynvml
import pytest
from fake_nvml import FakeClock, FakeGpu

from nbprof import telemetry
from nbprof.telemetry import Sampler, latest_of
from nbprof.telemetry.nvml import GPM_MIN_INTERVAL_NS

GIB = 2**30


def make(
    gpus: list[FakeGpu] | None = None, capacity: int = 1000, **kw: object
) -> tuple[Sampler, object, FakeClock]:
    clock = FakeClock()
    fake = fake_nvml.build(gpus, clock=clock, **kw)  # type: ignore[arg-type]
    s = Sampler(fake, capacity=capacity, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    return s, fake, clock


def run_passes(s: Sampler, clock: FakeClock, n: int, period_s: float = 0.25) -> None:
    for _ in range(n):
        s.sample_once()
        clock.advance(period_s)


def row(s: Sampler, gpu: int = 0, i: int = -1) -> dict[str, float]:
    f = s.samples().frame
    return f[f["gpu"] == gpu].iloc[i].to_dict()


def test_fake_mirrors_real_pynvml() -> None:
    fake = fake_nvml.build()
    for name in fake.FAKED:
        real = getattr(pynvml, name)
        assert list(inspect.signature(getattr(fake, name)).parameters) == list(
            inspect.signature(real).parameters
        ), name
    # Structures and errors are pynvml's own objects, not look-alikes.
    assert fake.c_nvmlGpmMetricsGet_t is pynvml.c_nvmlGpmMetricsGet_t
    assert fake.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert isinstance(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST), fake.NVMLError_GpuIsLost)


def test_values_with_gpm() -> None:
    s, fake, clock = make()
    s.open()
    run_passes(s, clock, 2)
    first, second = row(s, i=0), row(s, i=1)
    assert first["util_gpu"] == 100.0 and first["util_mem"] == 40.0
    assert first["mem_used"] == 30 * GIB and first["mem_total"] == 80 * GIB
    assert first["power_w"] == 350.0 and first["sm_clock_mhz"] == 1980.0
    assert first["temp_c"] == 61.0
    # The first GPM sample opens a window; values come from the second one on.
    assert math.isnan(first["sm_util"])
    assert second["sm_util"] == 35.0 and second["tensor_util"] == 12.5
    assert second["hmma_util"] == 12.0 and second["dfma_util"] == 0.5
    assert second["dram_bw_util"] == 61.0 and second["fp16_util"] == 3.0
    assert second["fp32_util"] == 8.0 and second["sm_occupancy"] == 20.0
    assert s.samples().reasons == {}
    assert s.samples().gpus[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert s.samples().gpus[0]["gpm"] is True
    s.close_backend()
    assert fake.state.inits == fake.state.shutdowns == 1
    # Every GPM sample allocated was freed.
    assert set(fake.state.gpm_samples) == fake.state.gpm_freed


def test_time_stamps_are_the_injected_wall_clock() -> None:
    s, _, clock = make()
    start = clock.wall
    s.open()
    run_passes(s, clock, 3)
    assert s.samples().frame["time_ns"].tolist() == [start, start + 250_000_000, start + 5 * 10**8]
    assert s.samples(since_ns=start + 1).frame["time_ns"].min() == start + 250_000_000


def test_gpm_windows_are_at_least_100ms_and_carried_forward() -> None:
    s, fake, clock = make()
    s.open()
    run_passes(s, clock, 12, period_s=0.04)  # faster than GPM allows
    windows = fake.state.gpm_windows_ns
    assert windows and min(windows) >= GPM_MIN_INTERVAL_NS
    f = s.samples().frame
    # Rows between two windows repeat the last complete window rather than going blank.
    assert f["sm_util"].iloc[3:].eq(35.0).all()
    assert fake.state.calls["nvmlGpmMetricsGet"] < 12


def test_gpm_unsupported_says_why_and_keeps_the_rest() -> None:
    s, fake, clock = make([FakeGpu(name="NVIDIA A100", gpm=None)])
    s.open()
    run_passes(s, clock, 3)
    r = row(s)
    assert r["util_gpu"] == 100.0
    assert all(math.isnan(r[m]) for m in ("sm_util", "tensor_util", "dram_bw_util"))
    reasons = s.samples().reasons
    assert "Hopper" in reasons[(0, "sm_util")] and "Hopper" in reasons[(0, "tensor_util")]
    assert "nvmlGpmSampleGet" not in fake.state.calls


def test_per_metric_gpm_error_codes() -> None:
    gpu = FakeGpu(
        gpm_errors={
            pynvml.NVML_GPM_METRIC_DFMA_TENSOR_UTIL: pynvml.NVML_ERROR_NOT_SUPPORTED,
            pynvml.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: pynvml.NVML_ERROR_NO_PERMISSION,
        }
    )
    s, _, clock = make([gpu])
    s.open()
    run_passes(s, clock, 3)
    r = row(s)
    reasons = s.samples().reasons
    assert math.isnan(r["dfma_util"]) and "not supported" in reasons[(0, "dfma_util")]
    assert math.isnan(r["imma_util"]) and "permission" in reasons[(0, "imma_util")]
    assert r["hmma_util"] == 12.0 and r["sm_util"] == 35.0
    assert set(reasons) == {(0, "dfma_util"), (0, "imma_util")}


def test_errors_mid_run_become_reasons_and_unsupported_is_not_asked_again() -> None:
    gpu = FakeGpu()
    s, fake, clock = make([gpu])
    s.open()
    run_passes(s, clock, 2)
    gpu.errors["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    gpu.errors["nvmlDeviceGetTemperatureV"] = pynvml.NVML_ERROR_TIMEOUT
    run_passes(s, clock, 2)
    r = row(s)
    reasons = s.samples().reasons
    assert math.isnan(r["power_w"]) and "not supported" in reasons[(0, "power_w")]
    assert math.isnan(r["temp_c"]) and "timed out" in reasons[(0, "temp_c")]
    power_calls = fake.state.calls["nvmlDeviceGetPowerUsage"]
    # A transient error clears when the reading works again; NOT_SUPPORTED stays skipped.
    del gpu.errors["nvmlDeviceGetTemperatureV"]
    run_passes(s, clock, 2)
    assert row(s)["temp_c"] == 61.0
    assert (0, "temp_c") not in s.samples().reasons
    assert fake.state.calls["nvmlDeviceGetPowerUsage"] == power_calls
    assert row(s)["util_gpu"] == 100.0


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN])
def test_a_gpu_that_disappears(code: int, caplog: pytest.LogCaptureFixture) -> None:
    gpus = [FakeGpu(), FakeGpu(name="second", uuid="GPU-1")]
    s, fake, clock = make(gpus)
    s.open()
    run_passes(s, clock, 2)
    gpus[1].failing = code  # every call on GPU 1 answers this from now on
    with caplog.at_level(logging.WARNING, logger="nbprof.telemetry"):
        run_passes(s, clock, 2)
        # GPU_IS_LOST drops the GPU at once; UNKNOWN is retried until
        # UNKNOWN_PASSES_TO_DROP (3) passes in a row answered nothing else.
        assert (code == pynvml.NVML_ERROR_GPU_IS_LOST) == ("lost" in s.samples().gpus[1])
        run_passes(s, clock, 3)
    f = s.samples().frame
    assert (f["gpu"] == 1).sum() == 2  # sampled before it went, never after
    assert (f["gpu"] == 0).sum() == 7
    reasons = s.samples().reasons
    assert "mid-run" in reasons[(1, "util_gpu")] and "mid-run" in reasons[(1, "sm_util")]
    calls = fake.state.calls["nvmlDeviceGetUtilizationRates"]
    run_passes(s, clock, 2)
    # Two passes ask GPU 0 twice; the dropped GPU 1 is not asked again.
    assert fake.state.calls["nvmlDeviceGetUtilizationRates"] == calls + 2
    assert "lost" in s.samples().gpus[1]
    # Logged once, not once per pass.
    assert sum("GPU 1" in r.getMessage() for r in caplog.records) <= 1
    s.close_backend()
    assert set(fake.state.gpm_samples) == fake.state.gpm_freed


def test_no_library_on_the_fake() -> None:
    s, _, _ = make(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    s.open()
    s.sample_once()
    out = s.samples()
    assert "NVML library not found" in out.unavailable
    assert len(out) == 0


def test_no_library_on_this_machine_via_the_real_pynvml() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVML library")
    s = Sampler()  # the real pynvml
    with s.subscribe(0.05) as sub:
        assert s.wait_ticks(0, 5)
    assert "NVML library not found" in sub.samples().unavailable
    assert not s.running


def test_permission_denied() -> None:
    s, _, _ = make(init_error=pynvml.NVML_ERROR_NO_PERMISSION)
    s.open()
    assert "permission" in s.samples().unavailable
    gpus = [FakeGpu(), FakeGpu(errors={"nvmlDeviceGetHandleByIndex": 4})]
    s, _, clock = make(gpus)
    s.open()
    run_passes(s, clock, 2)
    out = s.samples()
    assert out.unavailable == ""
    assert "permission" in out.reasons[(1, "util_gpu")]
    assert set(out.frame["gpu"]) == {0}


def test_no_gpu() -> None:
    s, _, _ = make([])
    s.open()
    assert "no GPU" in s.samples().unavailable


def test_mig_mode() -> None:
    s, fake, clock = make([FakeGpu(mig=True)])
    s.open()
    run_passes(s, clock, 3)
    r = row(s)
    reasons = s.samples().reasons
    assert math.isnan(r["util_gpu"]) and "MIG" in reasons[(0, "util_gpu")]
    assert math.isnan(r["sm_util"]) and "MIG" in reasons[(0, "sm_util")]
    assert r["mem_used"] == 30 * GIB and r["power_w"] == 350.0
    assert "nvmlDeviceGetUtilizationRates" not in fake.state.calls


def test_driver_buffered_utilization_samples() -> None:
    clock = FakeClock()
    t0 = clock.wall // 1000
    # Two old samples (before the sampler started) and three new ones.
    samples = [(t0 - 200_000, 5), (t0 - 100_000, 6), (t0 + 80_000, 100), (t0 + 160_000, 0)]
    samples.append((t0 + 240_000, 50))
    gpu = FakeGpu(util_samples=samples)
    fake = fake_nvml.build([gpu], clock=clock)
    s = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    s.open()
    run_passes(s, clock, 2)
    f = s.samples().frame
    util = f.dropna(subset=["util_gpu"])
    # Pass 1 (at t0) finds no new driver sample: util_gpu from the utilization rates.
    # Pass 2 (t0 + 250 ms) gets three: one row each at the driver's timestamps, and the
    # pass row leaves util_gpu to them (no stretch of time counted twice).
    assert util["util_gpu"].tolist() == [100.0, 100.0, 0.0, 50.0]
    expected = [t0 * 1000] + [(t0 + d) * 1000 for d in (80_000, 160_000, 240_000)]
    assert util["time_ns"].tolist() == expected
    assert len(f) == 5 and f["mem_used"].notna().sum() == 2
    assert f["time_ns"].is_monotonic_increasing
    assert latest_of(s.samples()).frame.iloc[0]["util_gpu"] == 50.0
    # One metric at a time, without the other kinds of rows in between.
    t, v = telemetry.metric_series(s.samples(), 0, "mem_used")
    assert len(t) == 2 and (v == 30 * GIB).all()
    t, v = telemetry.metric_series(s.samples(), 0, "util_gpu")
    assert v.tolist() == [100.0, 100.0, 0.0, 50.0]


def test_late_driver_samples_still_come_out_in_time_order() -> None:
    clock = FakeClock()
    t0 = clock.wall // 1000
    gpu = FakeGpu(util_samples=[])
    fake = fake_nvml.build([gpu], clock=clock)
    s = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    s.open()
    run_passes(s, clock, 2)  # passes at t0 and t0 + 250 ms, no driver samples yet
    # The driver publishes a sample stamped before the second pass only now.
    gpu.util_samples = [(t0 + 200_000, 42)]
    run_passes(s, clock, 1)
    f = s.samples().frame
    assert f["time_ns"].is_monotonic_increasing
    assert f.loc[f["time_ns"] == (t0 + 200_000) * 1000, "util_gpu"].tolist() == [42.0]


def test_driver_timestamps_off_the_wall_clock_are_ignored() -> None:
    clock = FakeClock()
    gpu = FakeGpu(util_samples=[(clock.wall // 1000 - 3600 * 10**6, 7)])
    fake = fake_nvml.build([gpu], clock=clock)
    s = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    s.open()
    # Pretend the driver's clock runs an hour behind: its samples look "new" to us.
    s._backend._devices[0].last_util_us = 1  # type: ignore[union-attr]
    run_passes(s, clock, 2)
    assert s.samples().frame["util_gpu"].tolist() == [100.0, 100.0]


def test_ring_buffer_is_bounded() -> None:
    s, _, clock = make([FakeGpu(), FakeGpu()], capacity=5)
    s.open()
    first = clock.wall
    run_passes(s, clock, 12)
    f = s.samples().frame
    assert len(f) == 10  # 5 passes x 2 GPUs
    assert f["time_ns"].min() == first + 7 * 250_000_000


def test_latest_of_takes_each_metrics_last_value() -> None:
    s, _, clock = make()
    s.open()
    run_passes(s, clock, 3)
    latest = latest_of(s.samples())
    assert len(latest) == 1
    r = latest.frame.iloc[0]
    assert r["sm_util"] == 35.0 and r["util_gpu"] == 100.0
    assert r["time_ns"] == s.samples().frame["time_ns"].max()


def test_refcounting_starts_and_stops_one_thread() -> None:
    s, fake, _ = make()
    a = s.subscribe(0.05)
    b = s.subscribe(0.25)
    assert [t.name for t in threading.enumerate()].count(telemetry.THREAD_NAME) == 1
    assert s.wait_ticks(3, 10)
    a.close()
    assert s.running and s.subscribers == 1
    a.close()  # idempotent
    assert s.subscribers == 1
    b.close()
    assert not s.running
    assert telemetry.THREAD_NAME not in [t.name for t in threading.enumerate()]
    assert fake.state.inits == fake.state.shutdowns == 1
    # Closed subscriptions keep what they saw.
    assert len(b.samples()) >= 3
    assert len(b.latest()) == 1
    # And the sampler starts again for a new subscriber.
    with s.subscribe(0.05):
        assert s.running
        assert s.wait_ticks(s.ticks + 1, 10)
    assert not s.running and fake.state.inits == fake.state.shutdowns == 2


def test_a_failing_subscriber_does_not_stop_sampling() -> None:
    s, _, _ = make()
    calls: list[int] = []

    def bad(tick: telemetry.Tick) -> None:
        calls.append(len(tick.block))
        raise RuntimeError("boom")

    with s.subscribe(0.05, on_tick=bad):
        assert s.wait_ticks(3, 10)
    assert len(calls) >= 3
    assert not s.running


def test_the_process_wide_sampler_is_configurable_only_while_stopped() -> None:
    fake = fake_nvml.build()
    try:
        sampler = telemetry.configure(nvml=fake, capacity=10)
        with telemetry.subscribe(0.05) as sub:
            assert telemetry.get_sampler() is sampler
            with pytest.raises(RuntimeError):
                telemetry.configure(nvml=fake)
            assert sampler.wait_ticks(2, 10)
        assert len(sub.samples()) >= 2
        assert not np.isnan(sub.latest().frame.iloc[0]["util_gpu"])
    finally:
        telemetry.configure()


def test_on_trace_clock_puts_samples_on_the_trace_axis() -> None:
    s, _, clock = make()
    s.open()
    origin = clock.wall - 1_000_123  # a trace that started 1.000123 ms before the sampler
    run_passes(s, clock, 2)
    frame = telemetry.on_trace_clock(s.samples(), origin)
    assert list(frame.columns[:3]) == ["time_ns", "ts", "gpu"]
    # Exact to the nanosecond although epoch ns do not fit a float64 exactly.
    assert frame["ts"].tolist() == [1000.123, 251000.123]


def test_interpreter_exit_stops_the_process_wide_sampler() -> None:
    from nbprof.telemetry import sampler as sampler_module

    sampler = telemetry.configure(nvml=fake_nvml.build())
    try:
        sub = telemetry.subscribe(0.05)
        assert sampler.running
        sampler_module._stop_at_exit()  # what atexit runs at kernel shutdown
        assert not sampler.running and sub.closed
        assert telemetry.THREAD_NAME not in [t.name for t in threading.enumerate()]
    finally:
        telemetry.configure()


def test_latest_looks_back_one_minute_only() -> None:
    gpu = FakeGpu()
    s, _, clock = make([gpu])
    s.open()
    run_passes(s, clock, 2)
    gpu.errors["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_TIMEOUT
    run_passes(s, clock, 4 * 61)  # 61 s without a power reading
    sub = telemetry.Subscription(s, 0.25, None)  # a handle only: no thread is started
    row_ = sub.latest().frame.iloc[0]
    assert math.isnan(row_["power_w"]) and row_["util_gpu"] == 100.0
    assert "timed out" in sub.latest().reasons[(0, "power_w")]


def test_a_failing_first_gpm_sample_is_reused_not_leaked() -> None:
    gpu = FakeGpu()
    gpu.errors["nvmlGpmSampleGet"] = pynvml.NVML_ERROR_TIMEOUT
    s, fake, clock = make([gpu])
    s.open()
    run_passes(s, clock, 5)
    assert "timed out" in s.samples().reasons[(0, "sm_util")]
    del gpu.errors["nvmlGpmSampleGet"]
    run_passes(s, clock, 2)
    assert row(s)["sm_util"] == 35.0
    # One sample kept for the next try, not one allocated (and dropped) per failing pass.
    assert len(fake.state.gpm_samples) == 2
    s.close_backend()
    assert set(fake.state.gpm_samples) == fake.state.gpm_freed


def test_a_non_nvml_exception_costs_one_reading_not_the_sampler() -> None:
    s, fake, clock = make()

    def broken(handle: object) -> int:
        raise AttributeError("module 'pynvml' has no attribute 'c_nvmlPowerSample_t'")

    fake.nvmlDeviceGetPowerUsage = broken  # type: ignore[attr-defined]
    s.open()
    run_passes(s, clock, 3)
    r = row(s)
    assert math.isnan(r["power_w"]) and r["util_gpu"] == 100.0 and r["sm_util"] == 35.0
    assert (
        "could not be read with this pynvml (AttributeError" in s.samples().reasons[(0, "power_w")]
    )
    assert len(s.samples()) == 3


def test_a_sampler_that_stops_on_a_bug_says_so_to_its_subscribers() -> None:
    s, fake, _ = make()
    ticks: list[telemetry.Tick] = []

    def bad_count() -> int:
        raise RuntimeError("boom")

    fake.nvmlDeviceGetCount = bad_count  # type: ignore[attr-defined]
    with s.subscribe(0.05, on_tick=ticks.append) as sub:
        assert wait_for(lambda: bool(ticks))
    assert "RuntimeError: boom" in sub.samples().unavailable
    assert ticks[-1].state_changed


def wait_for(cond, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
