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
    assert list(d.tables["kernel_class"].index) == list(trace.kernels.index)
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
    assert m.copy_gbps == pytest.approx(1_000_000 / 10 / 1e3)
    copies = d.tables["copies"]
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
    assert diagnose(b, tmp_path).devices[0].median_launch_delay_us == pytest.approx(7.0)


def test_idle_breakdown_host_kernel_other(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 0, 10, launch_ts=-5)
    # Queued before the previous kernel ended, gap 3 µs (< 5): kernel wait.
    b.kernel(SGEMM, 13, 10, launch_ts=2)
    # Queued early, gap 40 µs: other (waiting on something else).
    b.kernel(SGEMM, 63, 10, launch_ts=4)
    # Launched 20 µs after the previous kernel ended at 73, gap 30: host wait.
    b.kernel(SGEMM, 103, 10, launch_ts=93)
    d = diagnose(b, tmp_path)
    idle = d.devices[0].idle
    total = 3 + 40 + 30
    assert idle.idle_us == pytest.approx(total)
    assert idle.kernel_wait_pct == pytest.approx(3 / total * 100)
    assert idle.other_pct == pytest.approx(40 / total * 100)
    assert idle.host_wait_pct == pytest.approx(30 / total * 100)
    gaps = d.tables["idle_gaps"]
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
    gaps = d.tables["idle_gaps"]
    assert list(gaps["stream"]) == [7]
    assert gaps["dur"].iloc[0] == pytest.approx(20)
    # The device as a whole was never idle: stream 9 covered the gap.
    assert d.devices[0].kernel_busy_pct == pytest.approx(100.0)


def dataloader_run(workers: int) -> KinetoBuilder:
    """Two steps; with ``workers=0`` each batch takes 60 µs on the main thread."""
    b = KinetoBuilder()
    load = 60.0 if workers == 0 else 2.0
    t = 0.0
    for step in range(2):
        step_len = load + 5 + 35
        b.step(step, t, step_len)
        b.cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, load)
        b.kernel(SGEMM, t + load + 5, 35, launch_ts=t + load + 1)
        t += step_len
    return b


def test_dataloader_share_and_input_bound_verdict(tmp_path: Path) -> None:
    d = diagnose(dataloader_run(0), tmp_path)
    m = d.devices[0]
    # Steps of 100 µs each, 60 of them in __next__.
    assert m.dataloader_pct == pytest.approx(60 / 100 * 100)
    assert d.verdict.bottleneck == "input_bound"
    gaps = d.tables["idle_gaps"]
    assert gaps["cpu_work"].iloc[0] == "DataLoader __next__"
    f = {x.id: x for x in d.findings}["input_pipeline"]
    assert "num_workers" in (f.code or "") and "pin_memory=True" in (f.code or "")
    assert f.severity == "high"


def test_dataloader_after_fix_is_not_input_bound(tmp_path: Path) -> None:
    d = diagnose(dataloader_run(4), tmp_path)
    assert d.devices[0].dataloader_pct == pytest.approx(2 / 42 * 100)
    assert d.verdict.bottleneck != "input_bound"


def test_syncs_table_and_sync_bound(tmp_path: Path) -> None:
    b = KinetoBuilder()
    t = 0.0
    for _ in range(5):
        b.kernel(SGEMM, t, 10, launch_ts=t - 3)
        b.cpu_op("aten::item", t - 2, 14)
        b.runtime("cudaStreamSynchronize", t - 1, 12)
        # After the sync returns at t+11 the host takes 40 µs before the next launch.
        t += 55
    d = diagnose(b, tmp_path)
    syncs = d.tables["syncs"].set_index("name")
    assert syncs.loc["cudaStreamSynchronize", "count"] == 5
    assert syncs.loc["cudaStreamSynchronize", "total_us"] == pytest.approx(60)
    assert syncs.loc["aten::item", "count"] == 5
    span = 4 * 55 + 10
    assert syncs.loc["cudaStreamSynchronize", "pct"] == pytest.approx(60 / span * 100)
    assert d.verdict.bottleneck == "sync_bound"
    # Host sync time, counted once (.item() encloses the sync), clipped to the GPU span:
    # the first .item() starts 2 µs before the first kernel, the last ends 2 µs after the last.
    assert d.devices[0].sync_pct == pytest.approx((12 + 3 * 14 + 12) / span * 100)
    f = {x.id: x for x in d.findings}["sync_stalls"]
    assert ".item()" in (f.code or "")


def test_launch_bound(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(100):
        # 3 µs kernels, each launched 6 µs after the previous one ended.
        b.kernel(ELEMENTWISE, 10.0 * i, 3, launch_ts=10.0 * i - 1)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.short_kernel_pct == pytest.approx(100.0)
    assert m.kernel_busy_pct == pytest.approx(300 / (990 + 3) * 100)
    assert m.idle.host_wait_pct == pytest.approx(100.0)
    assert d.verdict.bottleneck == "launch_bound"
    f = {x.id: x for x in d.findings}["launch_overhead"]
    assert "reduce-overhead" in (f.code or "")


def test_communication_bound(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 0, 80)
    b.kernel(SGEMM, 80, 20)
    d = diagnose(b, tmp_path)
    assert d.verdict.bottleneck == "communication_bound"
    assert d.tables["kernel_class"]["cls"].tolist() == ["communication", "compute"]


def test_transfer_bound(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.memcpy(0, 80, 80_000_000, src="Pageable")
    b.kernel(SGEMM, 85, 15, launch_ts=1)
    d = diagnose(b, tmp_path)
    assert d.verdict.bottleneck == "transfer_bound"


def test_compute_and_memory_bound_by_kernel_class(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 90)
    b.kernel(ELEMENTWISE, 90, 10, launch_ts=50)
    d = diagnose(b, tmp_path / "")
    assert d.verdict.bottleneck == "compute_bound"
    b2 = KinetoBuilder()
    b2.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 10)
    b2.kernel(ELEMENTWISE, 10, 90, launch_ts=5)
    sub = tmp_path / "mem"
    sub.mkdir()
    assert diagnose(b2, sub).verdict.bottleneck == "memory_bound"


def test_idle_verdict(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 0, 10)
    b.kernel(SGEMM, 1000, 10)
    d = diagnose(b, tmp_path)
    assert d.devices[0].kernel_busy_pct == pytest.approx(20 / 1010 * 100)
    assert d.verdict.bottleneck == "idle"
    assert "2.0%" in d.verdict.summary


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
    assert d.tables["kernel_class"]["tensor_core"].tolist() == [True, True, False]
    top = d.tables["top_kernels"]
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
    b.kernel(SGEMM, 0, 90)
    b.kernel(ELEMENTWISE, 90, 10, launch_ts=50)
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
    roof = d.tables["ops_roofline"]
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
    roof = diagnose(b, tmp_path).tables["ops_roofline"]
    assert roof["bound"].iloc[0] == "memory"


def test_unknown_device_has_unknown_peaks(tmp_path: Path) -> None:
    b = KinetoBuilder(device_name="NVIDIA Mystery GPU 9000")
    b.cpu_op("aten::mm", 0, 30, flops=1e9, dims=[[64, 64], [64, 64]], types=["float"] * 2)
    b.kernel(SGEMM, 10, 40, launch_ts=5)
    d = diagnose(b, tmp_path)
    m = d.devices[0]
    assert m.peak_tflops is None and m.peak_gbps is None
    assert m.basis["peak_gbps"].kind == "unknown"
    assert d.tables["ops_roofline"]["bound"].iloc[0] == "unknown"


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
    from nbprof.result import load

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
