"""A fake ``pynvml`` for driving the sampler without a GPU.

It mirrors the real module rather than imitating it: constants (``NVML_*``), the error
classes (``NVMLError`` and its ``NVMLError_*`` subclasses) and the ctypes structures
(``c_nvmlGpmMetricsGet_t``, ``c_nvmlSample_t``, ...) are the installed nvidia-ml-py's own
objects, and each fake function has the real function's name and parameters (a test checks
this). Only what the functions do is faked, from a :class:`FakeGpu` per device that a test
can change between passes (set ``lost``, add an error, change a value).
"""

from __future__ import annotations

import ctypes
import itertools
import time
import types
from dataclasses import dataclass, field
from typing import Any

import pynvml


class FakeClock:
    """Wall and monotonic clocks a test moves by hand (ns)."""

    def __init__(self, wall_ns: int = 1_764_460_000_000_000_000, mono_ns: int = 10**12) -> None:
        self.wall = wall_ns
        self.mono = mono_ns

    def advance(self, seconds: float) -> None:
        step = round(seconds * 1e9)
        self.wall += step
        self.mono += step

    def wall_ns(self) -> int:
        return self.wall

    def monotonic_ns(self) -> int:
        return self.mono


class RealClock:
    """The real clocks, for fakes driven by the sampler's own thread."""

    def wall_ns(self) -> int:
        return time.time_ns()

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()


H100_GPM: dict[int, float] = {
    pynvml.NVML_GPM_METRIC_SM_UTIL: 35.0,
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 20.0,
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 12.5,
    pynvml.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 12.0,
    pynvml.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: 0.0,
    pynvml.NVML_GPM_METRIC_DFMA_TENSOR_UTIL: 0.5,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 61.0,
    pynvml.NVML_GPM_METRIC_FP16_UTIL: 3.0,
    pynvml.NVML_GPM_METRIC_FP32_UTIL: 8.0,
}


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    util_gpu: int = 100
    util_mem: int = 40
    mem_used: int = 30 * 2**30
    mem_total: int = 80 * 2**30
    #: What the driver keeps for itself: v2 reports it apart, v1 adds it to ``used``.
    mem_reserved: int = 2**29
    power_mw: int = 350_000
    sm_clock: int = 1980
    temp_c: int = 61
    #: GPM metric id -> value; None: nvmlGpmQueryDeviceSupport says unsupported.
    gpm: dict[int, float] | None = field(default_factory=lambda: dict(H100_GPM))
    #: GPM metric id -> NVML return code for that metric alone.
    gpm_errors: dict[int, int] = field(default_factory=dict)
    #: pynvml function name -> NVML error code it raises for this device.
    errors: dict[str, int] = field(default_factory=dict)
    mig: bool = False
    #: True: every call on the device raises NVMLError_GpuIsLost.
    lost: bool = False
    #: An NVML error code every call on the device raises (e.g. UNKNOWN), or None.
    failing: int | None = None
    #: Driver utilization samples as (timestamp µs, value); None: NOT_SUPPORTED.
    util_samples: list[tuple[int, int]] | None = None
    #: NVML_DEVICE_ARCH_*; None: from the name (H100/H200 Hopper, A100 Ampere, else unknown).
    arch: int | None = None

    def __post_init__(self) -> None:
        if self.arch is None:
            if "H100" in self.name or "H200" in self.name:
                self.arch = pynvml.NVML_DEVICE_ARCH_HOPPER
            elif "A100" in self.name:
                self.arch = pynvml.NVML_DEVICE_ARCH_AMPERE


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


def build(
    gpus: list[FakeGpu] | None = None,
    *,
    clock: FakeClock | RealClock | None = None,
    init_error: int | None = None,
    count_error: int | None = None,
) -> types.ModuleType:
    """A module object with pynvml's names; functions read ``gpus`` and ``clock``.

    Without ``clock`` the fake runs on the real clocks (for the sampler's own thread); pass
    the :class:`FakeClock` given to the sampler for deterministic single-pass tests.
    """
    fake = types.ModuleType("fake_pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVML_", "NVMLError", "c_nvml", "struct_c_nvml", "nvml")) and (
            not callable(getattr(pynvml, name)) or isinstance(getattr(pynvml, name), type)
        ):
            setattr(fake, name, getattr(pynvml, name))
    fake.NVMLError = pynvml.NVMLError
    for name in dir(pynvml):
        if name.startswith("NVMLError_"):
            setattr(fake, name, getattr(pynvml, name))

    state = types.SimpleNamespace(
        gpus=gpus if gpus is not None else [FakeGpu()],
        clock=clock or RealClock(),
        init_error=init_error,
        count_error=count_error,
        inits=0,
        shutdowns=0,
        calls={},
        gpm_samples={},  # id -> (gpu index, monotonic ns) or None before nvmlGpmSampleGet
        gpm_freed=set(),
        gpm_windows_ns=[],
    )
    fake.state = state
    ids = itertools.count(0x1000, 0x10)

    def raise_(code: int) -> None:
        raise pynvml.NVMLError(code)

    def dev(handle: _Handle, fn: str) -> FakeGpu:
        state.calls[fn] = state.calls.get(fn, 0) + 1
        gpu = state.gpus[handle.index]
        if gpu.lost:
            raise_(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu.failing is not None:
            raise_(gpu.failing)
        if fn in gpu.errors:
            raise_(gpu.errors[fn])
        return gpu

    def nvmlInit() -> None:
        if state.init_error is not None:
            raise_(state.init_error)
        state.inits += 1

    def nvmlShutdown() -> None:
        if state.inits <= state.shutdowns:
            raise_(pynvml.NVML_ERROR_UNINITIALIZED)
        state.shutdowns += 1

    def nvmlDeviceGetCount() -> int:
        if state.count_error is not None:
            raise_(state.count_error)
        return len(state.gpus)

    def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
        gpu = state.gpus[index]
        if "nvmlDeviceGetHandleByIndex" in gpu.errors:
            raise_(gpu.errors["nvmlDeviceGetHandleByIndex"])
        return _Handle(index)

    def nvmlDeviceGetName(handle: _Handle) -> str:
        return dev(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(handle: _Handle) -> str:
        return dev(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetMigMode(device: _Handle) -> list[int]:
        gpu = dev(device, "nvmlDeviceGetMigMode")
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if gpu.mig else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetUtilizationRates(handle: _Handle) -> Any:
        gpu = dev(handle, "nvmlDeviceGetUtilizationRates")
        if gpu.mig:
            raise_(pynvml.NVML_ERROR_NOT_SUPPORTED)
        u = pynvml.c_nvmlUtilization_t()
        u.gpu, u.memory = gpu.util_gpu, gpu.util_mem
        return u

    def nvmlDeviceGetMemoryInfo(handle: _Handle, version: Any = None) -> Any:
        gpu = dev(handle, "nvmlDeviceGetMemoryInfo")
        free = gpu.mem_total - gpu.mem_used - gpu.mem_reserved
        if version:
            m = pynvml.c_nvmlMemory_v2_t()
            m.version, m.reserved = version, gpu.mem_reserved
            m.total, m.used, m.free = gpu.mem_total, gpu.mem_used, free
            return m
        m = pynvml.c_nvmlMemory_t()
        m.total, m.used, m.free = gpu.mem_total, gpu.mem_used + gpu.mem_reserved, free
        return m

    def nvmlDeviceGetArchitecture(device: _Handle) -> int:
        gpu = dev(device, "nvmlDeviceGetArchitecture")
        if gpu.arch is None:
            raise_(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.arch

    def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
        return dev(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetClockInfo(handle: _Handle, type: int) -> int:
        gpu = dev(handle, "nvmlDeviceGetClockInfo")
        assert type == pynvml.NVML_CLOCK_SM
        return gpu.sm_clock

    def nvmlDeviceGetTemperatureV(handle: _Handle, sensor: int, version: int = 0) -> int:
        gpu = dev(handle, "nvmlDeviceGetTemperatureV")
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return gpu.temp_c

    def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
        return dev(handle, "nvmlDeviceGetTemperature").temp_c

    def nvmlDeviceGetSamples(device: _Handle, sampling_type: int, timeStamp: int) -> Any:
        gpu = dev(device, "nvmlDeviceGetSamples")
        assert sampling_type == pynvml.NVML_GPU_UTILIZATION_SAMPLES
        if gpu.util_samples is None:
            raise_(pynvml.NVML_ERROR_NOT_SUPPORTED)
        now_us = state.clock.wall_ns() // 1000
        fresh = [(t, v) for t, v in gpu.util_samples if timeStamp < t <= now_us]
        if not fresh:
            raise_(pynvml.NVML_ERROR_NOT_FOUND)
        out = (pynvml.c_nvmlSample_t * len(fresh))()
        for k, (t, v) in enumerate(fresh):
            out[k].timeStamp = t
            out[k].sampleValue.uiVal = v
        return (pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, out[0 : len(fresh)])

    def nvmlGpmQueryDeviceSupport(device: _Handle) -> Any:
        gpu = dev(device, "nvmlGpmQueryDeviceSupport")
        s = pynvml.c_nvmlGpmSupport_t()
        s.version = pynvml.NVML_GPM_SUPPORT_VERSION
        s.isSupportedDevice = 0 if gpu.gpm is None else 1
        return s

    def nvmlGpmSampleAlloc() -> Any:
        sid = next(ids)
        state.gpm_samples[sid] = None
        return ctypes.cast(ctypes.c_void_p(sid), pynvml.c_nvmlGpmSample_t)

    def _sid(sample: Any) -> int:
        sid = ctypes.cast(sample, ctypes.c_void_p).value
        if sid not in state.gpm_samples or sid in state.gpm_freed:
            raise_(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return sid  # type: ignore[return-value]

    def nvmlGpmSampleFree(gpmSample: Any) -> None:
        state.gpm_freed.add(_sid(gpmSample))

    def nvmlGpmSampleGet(device: _Handle, gpmSample: Any) -> Any:
        gpu = dev(device, "nvmlGpmSampleGet")
        if gpu.gpm is None:
            raise_(pynvml.NVML_ERROR_NOT_SUPPORTED)
        state.gpm_samples[_sid(gpmSample)] = (device.index, state.clock.monotonic_ns())
        return gpmSample

    def nvmlGpmMetricsGet(metricsGet: Any) -> Any:
        state.calls["nvmlGpmMetricsGet"] = state.calls.get("nvmlGpmMetricsGet", 0) + 1
        if metricsGet.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            raise_(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        s1 = state.gpm_samples.get(_sid(metricsGet.sample1))
        s2 = state.gpm_samples.get(_sid(metricsGet.sample2))
        if s1 is None or s2 is None or s1[0] != s2[0] or s2[1] <= s1[1]:
            raise_(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        state.gpm_windows_ns.append(s2[1] - s1[1])
        gpu = state.gpus[s1[0]]
        assert gpu.gpm is not None
        for k in range(metricsGet.numMetrics):
            m = metricsGet.metrics[k]
            if m.metricId in gpu.gpm_errors:
                m.nvmlReturn = gpu.gpm_errors[m.metricId]
                m.value = 0.0
            elif m.metricId in gpu.gpm:
                m.nvmlReturn = pynvml.NVML_SUCCESS
                m.value = gpu.gpm[m.metricId]
            else:
                m.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return metricsGet

    for fn in (
        nvmlInit,
        nvmlShutdown,
        nvmlDeviceGetCount,
        nvmlDeviceGetHandleByIndex,
        nvmlDeviceGetName,
        nvmlDeviceGetUUID,
        nvmlDeviceGetMigMode,
        nvmlDeviceGetUtilizationRates,
        nvmlDeviceGetMemoryInfo,
        nvmlDeviceGetArchitecture,
        nvmlDeviceGetPowerUsage,
        nvmlDeviceGetClockInfo,
        nvmlDeviceGetTemperatureV,
        nvmlDeviceGetTemperature,
        nvmlDeviceGetSamples,
        nvmlGpmQueryDeviceSupport,
        nvmlGpmSampleAlloc,
        nvmlGpmSampleFree,
        nvmlGpmSampleGet,
        nvmlGpmMetricsGet,
    ):
        setattr(fake, fn.__name__, fn)
    fake.FAKED = (
        "nvmlInit nvmlShutdown nvmlDeviceGetCount nvmlDeviceGetHandleByIndex nvmlDeviceGetName "
        "nvmlDeviceGetUUID nvmlDeviceGetMigMode nvmlDeviceGetUtilizationRates "
        "nvmlDeviceGetMemoryInfo nvmlDeviceGetArchitecture nvmlDeviceGetPowerUsage "
        "nvmlDeviceGetClockInfo "
        "nvmlDeviceGetTemperatureV nvmlDeviceGetTemperature nvmlDeviceGetSamples "
        "nvmlGpmQueryDeviceSupport nvmlGpmSampleAlloc nvmlGpmSampleFree nvmlGpmSampleGet "
        "nvmlGpmMetricsGet"
    ).split()
    return fake
