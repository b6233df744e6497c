"""The sampler through the REAL pynvml wrapper, over an emulated NVML C library.

``tests/emulated_nvml.py`` puts C function pointers with nvml.h's prototypes where pynvml's
``CDLL("libnvidia-ml.so.1")`` would be, so every call here goes through nvidia-ml-py's own
code: its structures, version fields, ``_nvmlGetFunctionPointer`` (a missing symbol is
FUNCTION_NOT_FOUND) and its mapping of return codes to exceptions. The oldest nvidia-ml-py
the project admits and the old ``pynvml`` package run in subprocesses, each installed into
a throw-away folder (skipped where pip cannot fetch them).
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import emulated_nvml as em
import pynvml
import pytest
from golden import KinetoBuilder, read_trace

from nbprof import telemetry
from nbprof.analysis import analyze
from nbprof.analysis.samples import measured_for, nvml_gpu
from nbprof.telemetry import Sampler, read_recording, replay, write_jsonl
from nbprof.telemetry.devices import CudaDevice, map_cuda_devices, parse_visible_devices
from nbprof.telemetry.nvml import GPM_MIN_INTERVAL_NS, UNKNOWN_PASSES_TO_DROP

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
GIB = 2**30
#: The oldest nvidia-ml-py pyproject.toml admits (nvidia-ml-py>=12.535), and the last old
#: `pynvml` package that installs a pynvml/ folder without GPM.
OLDEST_ML_PY = "nvidia-ml-py==12.535.77"
OLD_PYNVML = "pynvml==11.4.1"


@contextmanager
def emulated(
    gpus: list[em.EmulatedGpu], fake_time: bool = True, **kw: Any
) -> Iterator[tuple[em.Driver, Sampler, em.FakeTime | em.RealTime]]:
    """A driver beneath the real pynvml and a sampler on the same clocks; no faults after."""
    clock: em.FakeTime | em.RealTime = em.FakeTime() if fake_time else em.RealTime()
    driver = em.Driver(gpus, clock=clock, **kw)
    with driver.installed(pynvml):
        s = Sampler(capacity=10_000, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
        try:
            yield driver, s, clock
        finally:
            s.close_backend()
    assert driver.faults == [], driver.faults
    assert driver.inits == driver.shutdowns, "nvmlShutdown once per nvmlInit"
    assert driver.live_gpm_samples() == 0, "every GPM sample buffer freed"


def passes(s: Sampler, clock: Any, n: int, period_s: float = 0.25) -> None:
    """``n`` passes started ``period_s`` apart, as the sampler thread schedules them."""
    for _ in range(n):
        start = clock.monotonic_ns()
        s.sample_once()
        clock.advance_ns(max(0, start + round(period_s * 1e9) - clock.monotonic_ns()))


def last(s: Sampler, gpu: int = 0) -> dict[str, float]:
    f = s.samples().frame
    return f[f["gpu"] == gpu].iloc[-1].to_dict()


# -- the two usual GPUs ---------------------------------------------------------------------


def test_h100_with_gpm_and_a100_without() -> None:
    with emulated([em.h100(0), em.a100(1)]) as (driver, s, clock):
        s.open()
        passes(s, clock, 3)
        h, a = last(s, 0), last(s, 1)
        out = s.samples()
    assert h["util_gpu"] == 100.0 and h["util_mem"] == 40.0
    # Memory v2: `used` is what processes allocated (30 GiB), the driver's 537 MiB apart;
    # v1 would have said 30.52 GiB used.
    assert h["mem_used"] == 30 * GIB and h["mem_reserved"] == 537 * 2**20
    assert h["mem_total"] == 80 * GIB and a["mem_total"] == 40 * GIB
    assert h["power_w"] == 350.0 and h["sm_clock_mhz"] == 1980.0 and h["temp_c"] == 61.0
    assert a["util_gpu"] == 97.0 and a["power_w"] == 250.0 and a["sm_clock_mhz"] == 1410.0
    # GPM values went through pynvml's c_nvmlGpmMetricsGet_t, filled by nvml.h's layout.
    assert h["sm_util"] == 35.0 and h["tensor_util"] == 12.5 and h["dram_bw_util"] == 61.0
    assert h["hmma_util"] == 12.0 and h["dfma_util"] == 0.5 and h["fp32_util"] == 8.0
    assert all(math.isnan(a[m]) for m in ("sm_util", "tensor_util", "dram_bw_util"))
    assert out.reasons[(1, "sm_util")] == (
        "GPM counters need a Hopper or newer GPU (this one is Ampere)"
    )
    assert not any(g == 0 for g, _ in out.reasons), out.reasons
    assert out.gpus[0]["uuid"] == em.h100(0).uuid and out.gpus[0]["architecture"] == "Hopper"
    assert out.gpus[1]["pci_bus_id"] == "00000000:17:00.0"
    assert driver.calls["nvmlDeviceGetMemoryInfo_v2"] == 6
    assert driver.calls["nvmlDeviceGetMemoryInfo"] == 0
    assert driver.calls["nvmlGpmSampleGet"] == 3  # the H100 only


def test_an_idle_gpu_reads_near_zero_memory_like_nvidia_smi() -> None:
    gpu = em.h100(0, mem_used=4 * 2**20)
    with emulated([gpu]) as (_, s, clock):
        s.open()
        passes(s, clock, 1)
        r = last(s)
    assert r["mem_used"] == 4 * 2**20  # nvidia-smi's "4MiB / 81559MiB"
    assert r["mem_reserved"] == 537 * 2**20


def test_a_driver_without_memory_v2_falls_back_and_says_reserved_is_included() -> None:
    with emulated([em.h100(0)], missing={"nvmlDeviceGetMemoryInfo_v2"}) as (driver, s, clock):
        s.open()
        passes(s, clock, 3)
        r = last(s)
        reasons = s.samples().reasons
    assert r["mem_used"] == 30 * GIB + 537 * 2**20 and math.isnan(r["mem_reserved"])
    assert "includes the driver's reservation" in reasons[(0, "mem_reserved")]
    assert driver.calls["nvmlDeviceGetMemoryInfo"] == 3  # v2 asked once, not every pass


def test_an_old_driver_without_gpm_says_so_not_needs_hopper() -> None:
    with emulated([em.h100(0)], missing=em.OLD_DRIVER) as (driver, s, clock):
        s.open()
        passes(s, clock, 3)
        r = last(s)
        reasons = s.samples().reasons
    gpm = reasons[(0, "sm_util")]
    assert "older than the GPM functions" in gpm and "Hopper" not in gpm
    # Everything else is still read, through the calls an old driver has.
    assert r["util_gpu"] == 100.0 and r["temp_c"] == 61.0 and r["power_w"] == 350.0
    assert driver.calls["nvmlDeviceGetTemperature"] == 3
    assert math.isnan(r["sm_util"])


@pytest.mark.parametrize("how", ["support_call", "support_flag", "sample_get"])
def test_a_hopper_that_refuses_gpm_is_told_apart_from_an_older_gpu(how: str) -> None:
    gpu = em.h100(0)
    if how == "support_call":
        gpu.errors["nvmlGpmQueryDeviceSupport"] = em.ERROR_NOT_SUPPORTED
    elif how == "support_flag":
        gpu.gpm = None  # isSupportedDevice = 0
    with emulated([gpu]) as (_, s, clock):
        s.open()
        if how == "sample_get":
            passes(s, clock, 2)
            gpu.errors["nvmlGpmSampleGet"] = em.ERROR_NOT_SUPPORTED  # e.g. DCGM took them
        passes(s, clock, 2)
        reason = s.samples().reasons[(0, "tensor_util")]
        assert math.isnan(last(s)["tensor_util"]) and last(s)["util_gpu"] == 100.0
    assert reason == (
        "the driver reports GPM unsupported here (MIG, vGPU, or profiling counters held by "
        "DCGM / Nsight)"
    )


def test_no_permission() -> None:
    with emulated([em.h100(0)], init_error=em.ERROR_NO_PERMISSION) as (driver, s, _):
        s.open()
        assert s.samples().unavailable == "no permission to use NVML on this machine"
        driver.inits = driver.shutdowns = 0  # nvmlInit failed: nothing to shut down
    gpu = em.h100(0)
    gpu.errors["nvmlDeviceGetPowerUsage"] = em.ERROR_NO_PERMISSION
    gpu.errors["nvmlGpmSampleGet"] = em.ERROR_NO_PERMISSION
    with emulated([gpu]) as (driver, s, clock):
        s.open()
        passes(s, clock, 3)
        r, reasons = last(s), s.samples().reasons
    assert math.isnan(r["power_w"]) and "permission" in reasons[(0, "power_w")]
    assert "permission" in reasons[(0, "sm_util")]
    assert r["util_gpu"] == 100.0 and r["mem_used"] == 30 * GIB
    # Refused for good: neither asked again every pass.
    assert driver.calls["nvmlDeviceGetPowerUsage"] == 1
    assert driver.calls["nvmlGpmSampleGet"] == 1


def test_a_gpu_lost_mid_run_is_dropped_at_once() -> None:
    gpus = [em.h100(0), em.h100(1)]
    with emulated(gpus) as (driver, s, clock):
        s.open()
        passes(s, clock, 3)
        gpus[1].lost = True
        passes(s, clock, 1)
        out = s.samples()
        assert "lost mid-run" in out.gpus[1]["lost"]
        asked = driver.calls["nvmlDeviceGetUtilizationRates"]
        passes(s, clock, 3)
        assert driver.calls["nvmlDeviceGetUtilizationRates"] == asked + 3  # GPU 0 only
        f = s.samples().frame
    assert (f["gpu"] == 1).sum() == 3 and (f["gpu"] == 0).sum() == 7
    assert "lost mid-run" in s.samples().reasons[(1, "sm_util")]


def test_unknown_once_is_retried_and_only_repeated_failure_drops() -> None:
    gpu = em.h100(0)
    with emulated([gpu]) as (_, s, clock):
        s.open()
        passes(s, clock, 2)
        gpu.once["nvmlDeviceGetUtilizationRates"] = [em.ERROR_UNKNOWN]
        passes(s, clock, 1)
        hiccup = last(s)
        assert math.isnan(hiccup["util_gpu"]) and hiccup["mem_used"] == 30 * GIB
        assert "retrying" in s.samples().reasons[(0, "util_gpu")]
        passes(s, clock, 1)
        assert last(s)["util_gpu"] == 100.0 and (0, "util_gpu") not in s.samples().reasons
        assert "lost" not in s.samples().gpus[0]
        # Every call failing: given up after UNKNOWN_PASSES_TO_DROP passes, not before.
        for name in ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo_v2",
                     "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo",
                     "nvmlDeviceGetTemperatureV", "nvmlGpmSampleGet"):  # fmt: skip
            gpu.errors[name] = em.ERROR_UNKNOWN
        passes(s, clock, UNKNOWN_PASSES_TO_DROP - 1)
        assert "lost" not in s.samples().gpus[0]
        passes(s, clock, 1)
        assert "3 passes in a row" in s.samples().gpus[0]["lost"]


# -- GPM windows ------------------------------------------------------------------------------


def test_gpm_windows_are_timed_at_the_call_not_at_the_pass_start() -> None:
    # Each NVML call takes 0-9 ms (seeded), as real driver calls do; passes start exactly
    # 100 ms apart. Timed from the pass start, windows would be 100 ms ± the jitter of the
    # calls before GPM (some 9x ms, under nvml.h's "greater than 100ms").
    rng = random.Random(7)
    costs = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetSamples"}

    def cost(name: str) -> int:
        return rng.randrange(0, 9_000_000) if name in costs else 100_000

    gpu = em.h100(0, util_samples=[])
    with emulated([gpu], call_cost_ns=cost) as (driver, s, clock):
        s.open()
        passes(s, clock, 40, period_s=0.1)
        f = s.samples().frame
    windows = [w for _, w in driver.gpm_windows]
    assert len(windows) >= 15
    assert min(windows) >= GPM_MIN_INTERVAL_NS >= 110_000_000
    # GPM at its own rate (every other 10 Hz pass), its last window carried in between.
    assert driver.calls["nvmlGpmSampleGet"] <= 21
    assert f["sm_util"].iloc[4:].eq(35.0).all()


@pytest.mark.slow
def test_gpm_windows_on_the_sampler_thread_with_real_time() -> None:
    rng = random.Random(3)

    def cost(name: str) -> int:
        return rng.randrange(0, 8_000_000) if name == "nvmlDeviceGetPowerUsage" else 0

    with emulated([em.h100(0)], fake_time=False, call_cost_ns=cost) as (driver, s, _):
        with s.subscribe(0.1):
            assert s.wait_ticks(20, 30)
    windows = [w for _, w in driver.gpm_windows]
    assert len(windows) >= 5
    # Measured by the emulated driver at its own entry: over nvml.h's 100 ms every time.
    assert min(windows) > 100_000_000, windows


# -- which NVML GPU is which CUDA device ----------------------------------------------------


def four_h100s() -> list[em.EmulatedGpu]:
    gpus = [em.h100(i) for i in range(4)]
    # NVML's index is not PCI order here: GPU 0 sits last on the bus.
    gpus[0].pci_bus_id = "00000000:DB:00.0"
    for k, g in enumerate(gpus):
        assert g.gpm is not None
        g.gpm[em.GPM_SM_UTIL] = 10.0 * (k + 1)  # tell the GPUs apart by their readings
    gpus[2].uuid = "GPU-c0ffee00-1111-4222-8333-444455556666"
    gpus[3].mig = True
    gpus[3].mig_uuids = ["MIG-0b1c2d3e-4f50-5162-7384-95a6b7c8d9e0"]
    return gpus


def sampled_gpus() -> dict[int, dict[str, Any]]:
    with emulated(four_h100s()) as (_, s, clock):
        s.open()
        passes(s, clock, 1)
        return s.samples().gpus


def torch_uuid(nvml_uuid: str) -> str:
    return nvml_uuid.removeprefix("GPU-")  # str(props.uuid): CUDA's bytes, no prefix


def test_parse_visible_devices_reads_as_cuda_does() -> None:
    assert parse_visible_devices(None) is None
    assert parse_visible_devices("") == []
    assert parse_visible_devices("2, 0") == ["2", "0"]
    assert parse_visible_devices("1gpu,x,3") == ["1"]  # leading digits; stops at x
    assert parse_visible_devices("GPU-5e0c,MIG-ab") == ["GPU-5e0c", "MIG-ab"]


def test_cuda_devices_map_by_uuid_not_by_index() -> None:
    gpus = sampled_gpus()
    assert gpus[3]["mig_uuids"] == ["MIG-0b1c2d3e-4f50-5162-7384-95a6b7c8d9e0"]
    # CUDA_VISIBLE_DEVICES=2: CUDA's device 0 is NVML's GPU 2; torch reports its UUID.
    cuda = [CudaDevice(0, torch_uuid(gpus[2]["uuid"]))]
    m = map_cuda_devices(cuda, gpus, "2", None)
    assert m["0"]["gpu"] == 2 and "UUID" in m["0"]["how"]
    # A UUID NVML does not list is no match, whatever the index says.
    m = map_cuda_devices(
        [CudaDevice(0, "ffffffff-0000-0000-0000-000000000000")], gpus, "0", "PCI_BUS_ID"
    )
    assert m["0"]["gpu"] is None and "none of the GPUs NVML lists" in m["0"]["why"]
    # A MIG instance maps to its GPU, flagged: whole-GPU numbers are not the instance's.
    m = map_cuda_devices([CudaDevice(0, "0b1c2d3e-4f50-5162-7384-95a6b7c8d9e0")], gpus)
    assert m["0"]["gpu"] == 3 and m["0"]["mig"] is True


def test_cuda_visible_devices_in_index_uuid_and_mig_forms() -> None:
    gpus = sampled_gpus()
    no_uuid = [CudaDevice(0), CudaDevice(1)]
    # Index form: CUDA's own order, which NVML does not share, unless PCI_BUS_ID.
    m = map_cuda_devices(no_uuid, gpus, "2,0", None)
    assert m["0"]["gpu"] is None and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in m["0"]["why"]
    m = map_cuda_devices(no_uuid, gpus, "2,0", "PCI_BUS_ID")
    # PCI order: GPU 1 (0x28), GPU 2 (0x38), GPU 3 (0x48), GPU 0 (0xDB): rank 2 is GPU 3,
    # rank 0 is GPU 1 (NVML's index 2 and 0 would be the wrong GPUs).
    assert (m["0"]["gpu"], m["1"]["gpu"]) == (3, 1)
    m = map_cuda_devices([CudaDevice(0)], gpus, None, "PCI_BUS_ID")
    assert m["0"]["gpu"] == 1
    # UUID form, a unique prefix as CUDA accepts it; an ambiguous one is refused.
    m = map_cuda_devices(no_uuid, gpus, "GPU-c0ffee,GPU-5e0c")
    assert m["0"]["gpu"] == 2 and "matches 3 GPUs" in m["1"]["why"]
    # MIG forms: the instance UUID, and the older MIG-GPU-<uuid>/<gi>/<ci>.
    m = map_cuda_devices([CudaDevice(0)], gpus, "MIG-0b1c2d3e-4f50-5162-7384-95a6b7c8d9e0")
    assert m["0"]["gpu"] == 3 and m["0"]["mig"]
    m = map_cuda_devices([CudaDevice(0)], gpus, f"MIG-{gpus[1]['uuid']}/1/0")
    assert m["0"]["gpu"] == 1 and m["0"]["mig"]
    # PCI bus id from CUDA, when no UUID came.
    m = map_cuda_devices([CudaDevice(0, pci_bus_id="0000:38:00.0")], gpus)
    assert m["0"]["gpu"] == 2
    # Nothing to go on with four GPUs: said, not guessed.
    m = map_cuda_devices([CudaDevice(0)], gpus)
    assert m["0"]["gpu"] is None and "nothing says which one" in m["0"]["why"]


def test_mixed_gpus_fastest_first() -> None:
    # CUDA's default FASTEST_FIRST makes the H100 device 0 although NVML lists it second.
    with emulated([em.a100(0), em.h100(1)]) as (_, s, clock):
        s.open()
        passes(s, clock, 1)
        gpus = s.samples().gpus
    m = map_cuda_devices(
        [CudaDevice(0, torch_uuid(gpus[1]["uuid"])), CudaDevice(1, torch_uuid(gpus[0]["uuid"]))],
        gpus,
    )
    assert (m["0"]["gpu"], m["1"]["gpu"]) == (1, 0)


def test_the_analysis_credits_the_traced_gpu_and_never_guesses(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 2_000_000)
    trace = read_trace(b.write(tmp_path))
    assert trace.origin_ns is not None
    kernel_start_ns = trace.origin_ns + int(trace.kernels["ts"].iloc[0] * 1000)
    gpus = four_h100s()
    clock = em.FakeTime(wall_ns=kernel_start_ns + 50_000_000)
    driver = em.Driver(gpus, clock=clock)
    with driver.installed(pynvml):
        s = Sampler(clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
        s.open()
        passes(s, clock, 7)  # 1.5 s of samples inside the 2 s kernel
        s.close_backend()
    samples = s.samples()
    assert driver.faults == []
    # sm_util: GPU k reads 10 (k + 1) %. The run had CUDA_VISIBLE_DEVICES=2.
    samples.cuda_devices = map_cuda_devices(
        [CudaDevice(0, torch_uuid(samples.gpus[2]["uuid"]))], samples.gpus, "2"
    )
    m = analyze(trace, samples).devices[0]
    assert m.sm_active_pct == pytest.approx(30.0)  # GPU 2's, not GPU 0's 10%
    assert m.basis["sm_active_pct"].kind == "measured"
    measured = measured_for(samples, "0", trace.origin_ns, 0.0, 2_000_000.0)
    assert measured is not None and measured.gpu == 2 and "UUID" in measured.how
    # Without a recorded match, four GPUs: no numbers rather than another GPU's.
    samples.cuda_devices = {}
    assert measured_for(samples, "0", trace.origin_ns, 0.0, 2_000_000.0) is None
    assert "do not say which one" in nvml_gpu(samples, "0")[1]
    unmatched = analyze(trace, samples).devices[0]
    assert unmatched.sm_active_pct is None
    # The basis gives the real reason, not "no samples overlap".
    assert "do not say which one" in unmatched.basis["sm_active_pct"].how
    # A MIG instance: its GPU's whole-GPU counters are not credited to it.
    samples.cuda_devices = map_cuda_devices(
        [CudaDevice(0, "0b1c2d3e-4f50-5162-7384-95a6b7c8d9e0")], samples.gpus
    )
    gpu, why = nvml_gpu(samples, "0")
    assert gpu is None and "MIG instance" in why


def test_one_gpu_needs_no_recorded_match() -> None:
    with emulated([em.h100(0)]) as (_, s, clock):
        s.open()
        passes(s, clock, 1)
        samples = s.samples()
    assert nvml_gpu(samples, "0") == (0, "NVML saw one GPU only (GPU 0)")


def test_the_match_is_kept_in_recordings(tmp_path: Path) -> None:
    gpus = sampled_gpus()
    with emulated(four_h100s()) as (_, s, clock):
        s.open()
        passes(s, clock, 2)
        samples = s.samples()
    samples.cuda_devices = map_cuda_devices([CudaDevice(0, torch_uuid(gpus[2]["uuid"]))], gpus)
    path = write_jsonl(samples, tmp_path / "run.jsonl")
    back = replay(path)
    assert back.cuda_devices == samples.cuda_devices
    assert nvml_gpu(back, "0")[0] == 2
    # A state line written later (a GPU lost) keeps the match of the header.
    with path.open("ab") as fh:
        state = {"gpus": {"0": {"index": 0}}, "reasons": [], "unavailable": ""}
        fh.write(
            json.dumps({"t": int(samples.frame["time_ns"].max()) + 1, "state": state}).encode()
        )
        fh.write(b"\n")
    assert read_recording(path).states[-1].cuda_devices == samples.cuda_devices


class _Props:
    def __init__(self, uuid: str, name: str) -> None:
        self.uuid, self.name = uuid, name
        self.pci_bus_id = self.pci_domain_id = self.pci_device_id = None


class _TorchCuda:
    """Only what the capture reads of torch.cuda: the device count and properties."""

    def __init__(self, props: list[_Props]) -> None:
        self._props = props

    def device_count(self) -> int:
        return len(self._props)

    def get_device_properties(self, i: int) -> _Props:
        return self._props[i]


def test_the_capture_records_the_cuda_uuids(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbprof.capture import Capture

    gpus = sampled_gpus()
    with emulated(four_h100s()) as (_, s, clock):
        s.open()
        passes(s, clock, 1)
        samples = s.samples()
    cap = Capture(sample=False)
    torch_like = type("T", (), {})()
    torch_like.cuda = _TorchCuda([_Props(torch_uuid(gpus[2]["uuid"]), "NVIDIA H100"),
                                  _Props("ffffffff-0000-0000-0000-000000000000", "?")])  # fmt: skip
    monkeypatch.setattr(cap, "_torch", torch_like)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,7")
    cap._cuda = True  # as on a GPU machine; the profiler itself never ran
    prof = cap._build(samples, None)
    assert prof.samples is samples
    assert samples.cuda_devices["0"]["gpu"] == 2
    assert samples.cuda_devices["1"]["gpu"] is None
    assert any(n.startswith("NVML samples not used for CUDA device 1") for n in cap._notes)


# -- the magic's own check --------------------------------------------------------------------


def test_the_magic_asks_pynvml_whether_nvml_loads() -> None:
    from nbprof.magic import _no_nvml_reason

    telemetry.configure()  # a fresh process-wide sampler: nothing learned yet
    try:
        if pynvml.nvmlLib is None:
            try:
                pynvml._LoadNvmlLibrary()  # type: ignore[attr-defined]
            except pynvml.NVMLError_LibraryNotFound:
                assert "NVML library not found" in _no_nvml_reason()
            else:
                assert _no_nvml_reason() == ""
        # Where pynvml has its library (here: loaded beneath it), the cell gets a gauge,
        # whether or not ctypes would find libnvidia-ml.so.1 on its own.
        driver = em.Driver([em.h100(0)])
        with driver.installed(pynvml):
            assert _no_nvml_reason() == ""
    finally:
        telemetry.configure()


# -- old bindings, installed apart and run in a subprocess ----------------------------------


def _pip_target(tmp: Path, *requirements: str) -> Path:
    target = tmp / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
           "--disable-pip-version-check", "--target", str(target), *requirements]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip could not install {requirements} in time")
    if done.returncode != 0:
        pytest.skip(f"pip could not install {requirements}: {done.stderr.strip()[-300:]}")
    return target


_SCRIPT = """
import json, sys
sys.path[:0] = [{site!r}, {tests!r}, {repo!r}]
import pynvml, emulated_nvml as em
from nbprof.telemetry import Sampler
clock = em.FakeTime()
driver = em.Driver([em.h100(0), em.a100(1)], clock=clock)
with driver.installed(pynvml):
    s = Sampler(clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    s.open()
    for _ in range(3):
        s.sample_once()
        clock.advance_ns(250_000_000)
    s.close_backend()
out = s.samples()
last = out.frame.groupby("gpu").last()
print(json.dumps({{
    "module": pynvml.__file__,
    "rows": len(out.frame),
    "unavailable": out.unavailable,
    "values": {{int(g): {{k: (None if v != v else v) for k, v in r.items()}}
               for g, r in last.iterrows()}},
    "reasons": {{f"{{g}} {{m}}": r for (g, m), r in out.reasons.items()}},
    "faults": driver.faults,
}}))
"""


def _run_with(site: Path) -> dict[str, Any]:
    script = _SCRIPT.format(site=str(site), tests=str(TESTS), repo=str(REPO))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_oldest_admitted_nvidia_ml_py(tmp_path: Path) -> None:
    site = _pip_target(tmp_path, OLDEST_ML_PY)
    got = _run_with(site)
    assert got["module"] == str(site / "pynvml.py")
    assert got["faults"] == [] and got["unavailable"] == ""
    h, a = got["values"]["0"], got["values"]["1"]
    # 12.535's GPM struct holds 98 metrics (13.x: 477): the layout still lines up.
    assert h["sm_util"] == 35.0 and h["dram_bw_util"] == 61.0 and h["tensor_util"] == 12.5
    assert h["mem_used"] == 30 * GIB and h["mem_reserved"] == 537 * 2**20
    assert h["temp_c"] == 61.0 and a["util_gpu"] == 97.0
    assert "Ampere" in got["reasons"]["1 sm_util"]


@pytest.mark.slow
def test_the_old_pynvml_package_beside_nvidia_ml_py(tmp_path: Path) -> None:
    site = _pip_target(tmp_path, f"nvidia-ml-py=={pynvml_version()}", OLD_PYNVML)
    assert (site / "pynvml.py").is_file() and (site / "pynvml" / "__init__.py").is_file()
    got = _run_with(site)
    # The package folder wins the import over nvidia-ml-py's pynvml.py beside it.
    assert got["module"] == str(site / "pynvml" / "__init__.py")
    assert got["faults"] == [] and got["unavailable"] == ""
    assert got["rows"] == 6  # both GPUs, every pass: the sampler kept going
    h = got["values"]["0"]
    assert h["util_gpu"] == 100.0 and h["power_w"] == 350.0 and h["temp_c"] == 61.0
    assert h["mem_used"] == 30 * GIB + 537 * 2**20  # v1: this pynvml has no memory v2
    gpm = got["reasons"]["0 sm_util"]
    assert gpm.startswith("no GPM (old bindings") and "shadows nvidia-ml-py" in gpm
    assert "upgrade nvidia-ml-py" in got["reasons"]["0 mem_reserved"]


def pynvml_version() -> str:
    from importlib.metadata import version

    return version("nvidia-ml-py")


def test_emulated_return_codes_are_pynvmls() -> None:
    # The emulator's nvml.h constants and pynvml's agree, so a code here means the same there.
    for name in ("NOT_SUPPORTED", "NO_PERMISSION", "GPU_IS_LOST", "UNKNOWN",
                 "FUNCTION_NOT_FOUND", "ARGUMENT_VERSION_MISMATCH", "NOT_FOUND"):  # fmt: skip
        assert getattr(em, f"ERROR_{name}") == getattr(pynvml, f"NVML_ERROR_{name}")
    assert em.MEMORY_V2 == pynvml.nvmlMemory_v2
    assert em.TEMPERATURE_V1 == pynvml.nvmlTemperature_v1
    assert em.GPM_SM_UTIL == pynvml.NVML_GPM_METRIC_SM_UTIL


@pytest.mark.gpu
def test_on_a_real_gpu_every_cuda_device_matches_an_nvml_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from nbprof.telemetry.devices import cuda_devices_of

    s = Sampler()  # the real pynvml and driver
    s.open()
    s.sample_once()
    s.close_backend()
    samples = s.samples()
    m = map_cuda_devices(
        cuda_devices_of(torch),
        samples.gpus,
        os.environ.get("CUDA_VISIBLE_DEVICES"),
        os.environ.get("CUDA_DEVICE_ORDER"),
    )
    assert m and all(v["gpu"] is not None and "UUID" in v["how"] for v in m.values()), m
