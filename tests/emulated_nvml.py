"""An NVML C library emulated beneath the real ``pynvml`` (nvidia-ml-py), for tests and benchmarks.

``pynvml`` loads ``libnvidia-ml.so.1`` with ``ctypes.CDLL`` and looks each C function up by
name (``_nvmlGetFunctionPointer``: ``getattr`` on the library, where a missing symbol becomes
``NVML_ERROR_FUNCTION_NOT_FOUND``). :meth:`Driver.install` puts an :class:`EmulatedLibrary`
where that ``CDLL`` would be: each attribute is a real C function pointer (a ``CFUNCTYPE``
callback with the ``nvml.h`` prototype, cdecl and returning ``nvmlReturn_t`` like the
functions of a ``CDLL``), so the wrapper's own code runs unchanged: its argument
conversions through libffi, its structures (read and filled here through ``nvml.h``'s
layouts, declared below without looking at pynvml's), its version fields and its
mapping of return codes to ``NVMLError`` classes. Nothing in pynvml is patched but the
library handle it would have loaded itself.

What a device does is plain data on an :class:`EmulatedGpu` that a test can change at any
time: readings, a GPM counter set (None: no GPM), errors per C function (``errors``: every
call; ``once``: the next calls, one code each), ``lost`` (every call answers GPU_IS_LOST).
:func:`h100` and :func:`a100` build the two usual GPUs; :data:`OLD_DRIVER` names the symbols
an older driver's NVML lacks. A Python exception inside an emulated function is recorded in
:attr:`Driver.faults` (a test asserts it stays empty) and answers ``NVML_ERROR_UNKNOWN``.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from ctypes import (
    CFUNCTYPE,
    Structure,
    Union,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_longlong,
    c_uint,
    c_ulong,
    c_ulonglong,
    c_ushort,
    c_void_p,
    sizeof,
)
from dataclasses import dataclass, field
from typing import Any

# -- nvml.h: return codes, constants and structures (as the header declares them) ---------

SUCCESS = 0
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_INSUFFICIENT_SIZE = 7
ERROR_DRIVER_NOT_LOADED = 9
ERROR_TIMEOUT = 10
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_ARGUMENT_VERSION_MISMATCH = 25
ERROR_UNKNOWN = 999

ARCH_AMPERE = 7
ARCH_HOPPER = 9
TEMPERATURE_GPU = 0
CLOCK_SM = 1
GPU_UTILIZATION_SAMPLES = 1
VALUE_TYPE_UNSIGNED_INT = 1
MIG_DISABLE, MIG_ENABLE = 0, 1

GPM_SM_UTIL = 2
GPM_SM_OCCUPANCY = 3
GPM_ANY_TENSOR_UTIL = 5
GPM_DFMA_TENSOR_UTIL = 6
GPM_HMMA_TENSOR_UTIL = 7
GPM_IMMA_TENSOR_UTIL = 9
GPM_DRAM_BW_UTIL = 10
GPM_FP32_UTIL = 12
GPM_FP16_UTIL = 13
#: NVML_GPM_METRIC_MAX of the nvml.h these layouts follow (CUDA 13 headers: 333).
GPM_METRIC_MAX = 333
GPM_METRICS_GET_VERSION = 1
GPM_SUPPORT_VERSION = 1


def _struct_version(struct: type[Structure], version: int) -> int:
    """``NVML_STRUCT_VERSION(data, ver)``: ``sizeof(struct) | ver << 24``."""
    return sizeof(struct) | (version << 24)


class Utilization(Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class Memory(Structure):  # nvmlMemory_t (v1): used counts reserved memory too
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class MemoryV2(Structure):  # nvmlMemory_v2_t
    _fields_ = [
        ("version", c_uint),
        ("total", c_ulonglong),
        ("reserved", c_ulonglong),
        ("free", c_ulonglong),
        ("used", c_ulonglong),
    ]


MEMORY_V2 = _struct_version(MemoryV2, 2)


class TemperatureV1(Structure):  # nvmlTemperature_v1_t
    _fields_ = [("version", c_uint), ("sensorType", c_int), ("temperature", c_int)]


TEMPERATURE_V1 = _struct_version(TemperatureV1, 1)


class PciInfo(Structure):  # nvmlPciInfo_t
    _fields_ = [
        ("busIdLegacy", c_char * 16),
        ("domain", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubSystemId", c_uint),
        ("busId", c_char * 32),
    ]


class Value(Union):  # nvmlValue_t
    _fields_ = [
        ("dVal", c_double),
        ("siVal", c_int),
        ("uiVal", c_uint),
        ("ulVal", c_ulong),
        ("ullVal", c_ulonglong),
        ("sllVal", c_longlong),
        ("usVal", c_ushort),
    ]


class Sample(Structure):  # nvmlSample_t
    _fields_ = [("timeStamp", c_ulonglong), ("sampleValue", Value)]


class GpmSupport(Structure):  # nvmlGpmSupport_t
    _fields_ = [("version", c_uint), ("isSupportedDevice", c_uint)]


class GpmMetricInfo(Structure):  # nvmlGpmMetricMetricInfo_t
    _fields_ = [("shortName", c_char_p), ("longName", c_char_p), ("unit", c_char_p)]


class GpmMetric(Structure):  # nvmlGpmMetric_t
    _fields_ = [
        ("metricId", c_uint),
        ("nvmlReturn", c_int),
        ("value", c_double),
        ("metricInfo", GpmMetricInfo),
    ]


class GpmMetricsGetHead(Structure):
    """nvmlGpmMetricsGet_t up to its metrics[NVML_GPM_METRIC_MAX] array.

    nvmlGpmSample_t is ``struct { struct nvmlGpmSample_st *handle; }``: one pointer, passed
    and laid out as a pointer.
    """

    _fields_ = [
        ("version", c_uint),
        ("numMetrics", c_uint),
        ("sample1", c_void_p),
        ("sample2", c_void_p),
        ("metrics", GpmMetric * 1),
    ]


_METRICS_OFFSET = GpmMetricsGetHead.metrics.offset

# -- the emulated machine --------------------------------------------------------------


class FakeTime:
    """Clocks that move only when told to (or by ``call_cost_ns``): deterministic timing."""

    def __init__(self, wall_ns: int = 1_764_460_000_000_000_000, mono_ns: int = 10**12) -> None:
        self.wall = wall_ns
        self.mono = mono_ns
        self._lock = threading.Lock()

    def advance_ns(self, ns: int) -> None:
        with self._lock:
            self.wall += ns
            self.mono += ns

    def wall_ns(self) -> int:
        return self.wall

    def monotonic_ns(self) -> int:
        return self.mono


class RealTime:
    def advance_ns(self, ns: int) -> None:
        time.sleep(ns / 1e9)

    def wall_ns(self) -> int:
        return time.time_ns()

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()


#: The GPM counters of a busy H100 (NVML_GPM_METRIC_* id -> value, in %).
H100_GPM: dict[int, float] = {
    GPM_SM_UTIL: 35.0,
    GPM_SM_OCCUPANCY: 20.0,
    GPM_ANY_TENSOR_UTIL: 12.5,
    GPM_HMMA_TENSOR_UTIL: 12.0,
    GPM_IMMA_TENSOR_UTIL: 0.0,
    GPM_DFMA_TENSOR_UTIL: 0.5,
    GPM_DRAM_BW_UTIL: 61.0,
    GPM_FP16_UTIL: 3.0,
    GPM_FP32_UTIL: 8.0,
}


@dataclass
class EmulatedGpu:
    name: str
    uuid: str
    pci_bus_id: str
    arch: int
    compute_capability: tuple[int, int]
    util_gpu: int = 100
    util_mem: int = 40
    #: Allocated by processes; the driver's own reservation is apart (v2) or added (v1).
    mem_used: int = 30 * 2**30
    mem_reserved: int = 537 * 2**20
    mem_total: int = 80 * 2**30
    power_mw: int = 350_000
    sm_clock_mhz: int = 1980
    temp_c: int = 61
    #: GPM metric id -> value; None: no GPM on this GPU (isSupportedDevice = 0).
    gpm: dict[int, float] | None = None
    #: GPM metric id -> nvmlReturn_t of that metric alone.
    gpm_errors: dict[int, int] = field(default_factory=dict)
    #: C function name -> return code of every call on this GPU.
    errors: dict[str, int] = field(default_factory=dict)
    #: C function name -> return codes for the next calls, one each (e.g. UNKNOWN once).
    once: dict[str, list[int]] = field(default_factory=dict)
    lost: bool = False
    mig: bool = False
    mig_uuids: list[str] = field(default_factory=list)
    #: Driver utilization samples (timestamp µs, value); None: NOT_SUPPORTED.
    util_samples: list[tuple[int, int]] | None = None
    #: Called with (gpu, seconds since nvmlInit) before each utilization reading: a script
    #: that makes the readings move.
    script: Callable[[EmulatedGpu, float], None] | None = None


def h100(index: int = 0, **kw: Any) -> EmulatedGpu:
    """An H100 SXM with GPM, as NVML describes one."""
    kw.setdefault("gpm", dict(H100_GPM))
    return EmulatedGpu(
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-5e0c7a11-93f4-4d8e-b0a1-{index:012x}",
        pci_bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        arch=ARCH_HOPPER,
        compute_capability=(9, 0),
        **kw,
    )


def a100(index: int = 0, **kw: Any) -> EmulatedGpu:
    """An A100 SXM: Ampere, no GPM."""
    kw.setdefault("mem_total", 40 * 2**30)
    return EmulatedGpu(
        name="NVIDIA A100-SXM4-40GB",
        uuid=f"GPU-a1000000-2222-4333-8444-{index:012x}",
        pci_bus_id=f"00000000:{0x07 + 0x10 * index:02X}:00.0",
        arch=ARCH_AMPERE,
        compute_capability=(8, 0),
        util_gpu=97,
        power_mw=250_000,
        sm_clock_mhz=1410,
        **kw,
    )


def moving(gpu: EmulatedGpu, t: float) -> None:
    """A script for :attr:`EmulatedGpu.script`: readings that move every sample (a 3 s
    wave), nvidia-smi's number high while the counters stay well below it."""
    phase = t * 2 * math.pi / 3.0
    gpu.util_gpu = round(55 + 40 * math.sin(phase))
    gpu.util_mem = round(30 + 20 * math.sin(phase + 1))
    gpu.power_mw = round(300_000 + 80_000 * math.sin(phase))
    if gpu.gpm is not None:
        gpu.gpm[GPM_SM_UTIL] = 30 + 25 * math.sin(phase * 1.7)
        gpu.gpm[GPM_ANY_TENSOR_UTIL] = 12 + 10 * math.sin(phase * 2.3)
        gpu.gpm[GPM_DRAM_BW_UTIL] = 45 + 30 * math.sin(phase * 0.9 + 2)


#: Symbols an older driver's NVML lacks: GPM, memory info v2, the versioned temperature.
OLD_DRIVER = frozenset(
    {
        "nvmlGpmQueryDeviceSupport",
        "nvmlGpmSampleAlloc",
        "nvmlGpmSampleFree",
        "nvmlGpmSampleGet",
        "nvmlGpmMetricsGet",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
    }
)


class EmulatedLibrary:
    """Stands where pynvml's ``CDLL("libnvidia-ml.so.1")`` would: symbols by attribute."""

    def __init__(self, symbols: dict[str, Any]) -> None:
        self._symbols = symbols

    def __getattr__(self, name: str) -> Any:
        try:
            return self._symbols[name]
        except KeyError:
            raise AttributeError(f"undefined symbol: {name}") from None


@dataclass
class _GpmSample:
    buffer: Any
    gpu: int | None = None
    t_ns: int = 0
    values: dict[int, float] = field(default_factory=dict)
    freed: bool = False


class Driver:
    """The emulated NVIDIA driver behind :class:`EmulatedLibrary`.

    ``missing``: C symbols this driver's NVML does not export (see :data:`OLD_DRIVER`).
    ``init_error``: what ``nvmlInitWithFlags`` answers (e.g. NO_PERMISSION). ``clock``:
    :class:`RealTime` (default) or :class:`FakeTime`; ``call_cost_ns(name)`` is time each
    call takes on it (slept on real time, added on fake time), for timing tests.
    """

    def __init__(
        self,
        gpus: list[EmulatedGpu],
        *,
        missing: frozenset[str] | set[str] = frozenset(),
        init_error: int | None = None,
        clock: FakeTime | RealTime | None = None,
        call_cost_ns: Callable[[str], int] | None = None,
        version: str = "570.124.06",
    ) -> None:
        self.gpus = gpus
        self.missing = set(missing)
        self.init_error = init_error
        self.clock = clock or RealTime()
        self.call_cost_ns = call_cost_ns
        self.version = version
        self.inits = 0
        self.shutdowns = 0
        self.calls: Counter[str] = Counter()
        self.faults: list[str] = []
        #: (gpu, window ns) of every nvmlGpmMetricsGet, and the monotonic time of every
        #: nvmlGpmSampleGet call.
        self.gpm_windows: list[tuple[int, int]] = []
        self.gpm_sample_times: list[int] = []
        self._gpm: dict[int, _GpmSample] = {}
        self._t0_ns = 0
        self._lock = threading.Lock()
        # Real addresses for handles (the wrapper treats them as opaque pointers).
        self._anchors = [c_int(i) for i in range(len(gpus))]
        self._handles = {ctypes.addressof(a): (i, None) for i, a in enumerate(self._anchors)}
        self._mig_anchors: dict[tuple[int, int], Any] = {}
        self._strings: dict[int, Any] = {}
        self._symbols: dict[str, Any] = {}
        self._export_all()
        self.library = EmulatedLibrary(
            {k: v for k, v in self._symbols.items() if k not in self.missing}
        )

    # -- installing beneath pynvml -------------------------------------------------------

    def install(self, pynvml: Any) -> Callable[[], None]:
        """Make ``pynvml`` (nvidia-ml-py's module, or the old package) load this driver;
        returns the call that puts back what was there."""
        # The module whose globals _nvmlGetFunctionPointer reads (pynvml.nvml in the old
        # package, which re-exports its names with a star import).
        g = pynvml.nvmlInit.__globals__
        saved = g["nvmlLib"]
        g["nvmlLib"] = self.library
        g["_nvmlGetFunctionPointer_cache"].clear()

        def uninstall() -> None:
            g["nvmlLib"] = saved
            g["_nvmlGetFunctionPointer_cache"].clear()

        return uninstall

    @contextmanager
    def installed(self, pynvml: Any) -> Iterator[Any]:
        """:meth:`install` for the duration of a ``with`` block."""
        uninstall = self.install(pynvml)
        try:
            yield pynvml
        finally:
            uninstall()

    # -- plumbing --------------------------------------------------------------------------

    def _export(
        self, name: str, argtypes: list[Any], restype: Any = c_int
    ) -> Callable[[Callable[..., int]], Callable[..., int]]:
        proto = CFUNCTYPE(restype, *argtypes)

        def register(py: Callable[..., int]) -> Callable[..., int]:
            def call(*args: Any) -> Any:
                with self._lock:
                    self.calls[name] += 1
                if self.call_cost_ns is not None:
                    self.clock.advance_ns(self.call_cost_ns(name))
                try:
                    return py(*args)
                except Exception as err:  # a bug here must not read as a driver answer
                    self.faults.append(f"{name}: {type(err).__name__}: {err}")
                    return ERROR_UNKNOWN

            call.__name__ = name
            self._symbols[name] = proto(call)
            return py

        return register

    def _device(self, handle: int | None, fn: str) -> tuple[int, EmulatedGpu, int | None]:
        """(index, gpu, MIG slot) of a handle, or raise _Answer with the code to return."""
        if self.inits <= self.shutdowns:
            raise _Answer(ERROR_UNINITIALIZED)
        if handle not in self._handles:
            raise _Answer(ERROR_INVALID_ARGUMENT)
        index, slot = self._handles[handle]
        gpu = self.gpus[index]
        if gpu.lost:
            raise _Answer(ERROR_GPU_IS_LOST)
        queued = gpu.once.get(fn)
        if queued:
            raise _Answer(queued.pop(0))
        if fn in gpu.errors:
            raise _Answer(gpu.errors[fn])
        return index, gpu, slot

    def _string(self, text: str) -> int:
        """The address of a NUL-terminated copy kept alive for the library's lifetime."""
        buf = ctypes.create_string_buffer(text.encode())
        self._strings[ctypes.addressof(buf)] = buf
        return ctypes.addressof(buf)

    @staticmethod
    def _put_string(addr: int | None, length: int, text: str) -> int:
        data = text.encode()
        if addr is None:
            return ERROR_INVALID_ARGUMENT
        if length < len(data) + 1:
            return ERROR_INSUFFICIENT_SIZE
        ctypes.memmove(addr, data + b"\0", len(data) + 1)
        return SUCCESS

    @staticmethod
    def _put(addr: int | None, ctype: Any, value: Any) -> int:
        if addr is None:
            return ERROR_INVALID_ARGUMENT
        ctype.from_address(addr).value = value
        return SUCCESS

    def elapsed_s(self) -> float:
        return (self.clock.monotonic_ns() - self._t0_ns) / 1e9

    # -- the C functions -------------------------------------------------------------------

    def _export_all(self) -> None:
        E = self._export
        P = c_void_p  # every pointer argument: the wrapper passes byref()/arrays/NULL

        def guarded(body: Callable[..., int]) -> Callable[..., int]:
            def run(*args: Any) -> int:
                try:
                    return body(*args)
                except _Answer as a:
                    return a.code

            return run

        @E("nvmlInitWithFlags", [c_uint])
        def nvmlInitWithFlags(flags: int) -> int:
            if self.init_error is not None:
                return self.init_error
            with self._lock:
                if self.inits == self.shutdowns:
                    self._t0_ns = self.clock.monotonic_ns()
                self.inits += 1
            return SUCCESS

        @E("nvmlInit_v2", [])
        def nvmlInit_v2() -> int:
            return nvmlInitWithFlags(0)

        @E("nvmlShutdown", [])
        def nvmlShutdown() -> int:
            with self._lock:
                if self.inits <= self.shutdowns:
                    return ERROR_UNINITIALIZED
                self.shutdowns += 1
            return SUCCESS

        @E("nvmlErrorString", [c_int], c_void_p)
        def nvmlErrorString(result: int) -> int:
            # pynvml sets this function's restype to c_char_p: a pointer to a kept string.
            return self._string(f"emulated NVML error {result}")

        @E("nvmlSystemGetDriverVersion", [P, c_uint])
        def nvmlSystemGetDriverVersion(buf: int | None, length: int) -> int:
            return self._put_string(buf, length, self.version)

        @E("nvmlDeviceGetCount_v2", [P])
        def nvmlDeviceGetCount_v2(count: int | None) -> int:
            if self.inits <= self.shutdowns:
                return ERROR_UNINITIALIZED
            return self._put(count, c_uint, len(self.gpus))

        @E("nvmlDeviceGetHandleByIndex_v2", [c_uint, P])
        def nvmlDeviceGetHandleByIndex_v2(index: int, device: int | None) -> int:
            if self.inits <= self.shutdowns:
                return ERROR_UNINITIALIZED
            if index >= len(self.gpus):
                return ERROR_INVALID_ARGUMENT
            return self._put(device, c_void_p, ctypes.addressof(self._anchors[index]))

        def name_(device: int | None, buf: int | None, length: int) -> int:
            _, gpu, slot = self._device(device, "nvmlDeviceGetName")
            name = gpu.name if slot is None else f"{gpu.name} MIG 1g.10gb"
            return self._put_string(buf, length, name)

        E("nvmlDeviceGetName", [P, P, c_uint])(guarded(name_))

        def uuid_(device: int | None, buf: int | None, length: int) -> int:
            _, gpu, slot = self._device(device, "nvmlDeviceGetUUID")
            return self._put_string(buf, length, gpu.uuid if slot is None else gpu.mig_uuids[slot])

        E("nvmlDeviceGetUUID", [P, P, c_uint])(guarded(uuid_))

        def pci(device: int | None, info: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetPciInfo_v3")
            if info is None:
                return ERROR_INVALID_ARGUMENT
            p = PciInfo.from_address(info)
            domain, bus, dev = (int(x, 16) for x in gpu.pci_bus_id.replace(".", ":").split(":")[:3])
            p.domain, p.bus, p.device = domain, bus, dev
            p.busId = gpu.pci_bus_id.encode()
            p.busIdLegacy = f"{domain:04X}:{bus:02X}:{dev:02X}.0".encode()
            return SUCCESS

        E("nvmlDeviceGetPciInfo_v3", [P, P])(guarded(pci))

        def arch(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetArchitecture")
            return self._put(out, c_uint, gpu.arch)

        E("nvmlDeviceGetArchitecture", [P, P])(guarded(arch))

        def cc(device: int | None, major: int | None, minor: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetCudaComputeCapability")
            self._put(major, c_int, gpu.compute_capability[0])
            return self._put(minor, c_int, gpu.compute_capability[1])

        E("nvmlDeviceGetCudaComputeCapability", [P, P, P])(guarded(cc))

        def mig_mode(device: int | None, current: int | None, pending: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetMigMode")
            if gpu.arch < ARCH_AMPERE:
                return ERROR_NOT_SUPPORTED
            mode = MIG_ENABLE if gpu.mig else MIG_DISABLE
            self._put(current, c_uint, mode)
            return self._put(pending, c_uint, mode)

        E("nvmlDeviceGetMigMode", [P, P, P])(guarded(mig_mode))

        def mig_count(device: int | None, count: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetMaxMigDeviceCount")
            return self._put(count, c_uint, 7 if gpu.mig else 0)

        E("nvmlDeviceGetMaxMigDeviceCount", [P, P])(guarded(mig_count))

        def mig_handle(device: int | None, index: int, out: int | None) -> int:
            i, gpu, _ = self._device(device, "nvmlDeviceGetMigDeviceHandleByIndex")
            if not gpu.mig or index >= len(gpu.mig_uuids):
                return ERROR_NOT_FOUND
            anchor = self._mig_anchors.setdefault((i, index), c_int(index))
            self._handles[ctypes.addressof(anchor)] = (i, index)
            return self._put(out, c_void_p, ctypes.addressof(anchor))

        E("nvmlDeviceGetMigDeviceHandleByIndex", [P, c_uint, P])(guarded(mig_handle))

        def utilization(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetUtilizationRates")
            if gpu.script is not None:
                gpu.script(gpu, self.elapsed_s())
            if gpu.mig:
                return ERROR_NOT_SUPPORTED
            if out is None:
                return ERROR_INVALID_ARGUMENT
            u = Utilization.from_address(out)
            u.gpu, u.memory = gpu.util_gpu, gpu.util_mem
            return SUCCESS

        E("nvmlDeviceGetUtilizationRates", [P, P])(guarded(utilization))

        def memory(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetMemoryInfo")
            if out is None:
                return ERROR_INVALID_ARGUMENT
            m = Memory.from_address(out)
            m.total = gpu.mem_total
            m.used = gpu.mem_used + gpu.mem_reserved
            m.free = gpu.mem_total - m.used
            return SUCCESS

        E("nvmlDeviceGetMemoryInfo", [P, P])(guarded(memory))

        def memory_v2(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetMemoryInfo_v2")
            if out is None:
                return ERROR_INVALID_ARGUMENT
            m = MemoryV2.from_address(out)
            if m.version != MEMORY_V2:
                return ERROR_ARGUMENT_VERSION_MISMATCH
            m.total, m.reserved, m.used = gpu.mem_total, gpu.mem_reserved, gpu.mem_used
            m.free = gpu.mem_total - gpu.mem_used - gpu.mem_reserved
            return SUCCESS

        E("nvmlDeviceGetMemoryInfo_v2", [P, P])(guarded(memory_v2))

        def power(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetPowerUsage")
            return self._put(out, c_uint, gpu.power_mw)

        E("nvmlDeviceGetPowerUsage", [P, P])(guarded(power))

        def clock(device: int | None, kind: int, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetClockInfo")
            if kind != CLOCK_SM:
                return ERROR_NOT_SUPPORTED
            return self._put(out, c_uint, gpu.sm_clock_mhz)

        E("nvmlDeviceGetClockInfo", [P, c_uint, P])(guarded(clock))

        def temperature(device: int | None, sensor: int, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetTemperature")
            if sensor != TEMPERATURE_GPU:
                return ERROR_INVALID_ARGUMENT
            return self._put(out, c_uint, gpu.temp_c)

        E("nvmlDeviceGetTemperature", [P, c_uint, P])(guarded(temperature))

        def temperature_v(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetTemperatureV")
            if out is None:
                return ERROR_INVALID_ARGUMENT
            t = TemperatureV1.from_address(out)
            if t.version != TEMPERATURE_V1:
                return ERROR_ARGUMENT_VERSION_MISMATCH
            if t.sensorType != TEMPERATURE_GPU:
                return ERROR_INVALID_ARGUMENT
            t.temperature = gpu.temp_c
            return SUCCESS

        E("nvmlDeviceGetTemperatureV", [P, P])(guarded(temperature_v))

        def samples(
            device: int | None,
            kind: int,
            last_seen: int,
            value_type: int | None,
            count: int | None,
            out: int | None,
        ) -> int:
            _, gpu, _ = self._device(device, "nvmlDeviceGetSamples")
            if kind != GPU_UTILIZATION_SAMPLES or gpu.util_samples is None or gpu.mig:
                return ERROR_NOT_SUPPORTED
            if count is None:
                return ERROR_INVALID_ARGUMENT
            now_us = self.clock.wall_ns() // 1000
            fresh = [(t, v) for t, v in gpu.util_samples if last_seen < t <= now_us]
            if not fresh:
                return ERROR_NOT_FOUND
            n = c_uint.from_address(count)
            if out is None:  # the first call asks how many
                n.value = len(fresh)
                return SUCCESS
            if n.value == 0:
                return ERROR_INVALID_ARGUMENT
            fresh = fresh[: n.value]
            arr = (Sample * len(fresh)).from_address(out)
            for k, (t, v) in enumerate(fresh):
                arr[k].timeStamp = t
                arr[k].sampleValue.uiVal = v
            n.value = len(fresh)
            return self._put(value_type, c_uint, VALUE_TYPE_UNSIGNED_INT)

        E("nvmlDeviceGetSamples", [P, c_uint, c_ulonglong, P, P, P])(guarded(samples))

        def gpm_support(device: int | None, out: int | None) -> int:
            _, gpu, _ = self._device(device, "nvmlGpmQueryDeviceSupport")
            if out is None:
                return ERROR_INVALID_ARGUMENT
            s = GpmSupport.from_address(out)
            if s.version != GPM_SUPPORT_VERSION:
                return ERROR_ARGUMENT_VERSION_MISMATCH
            s.isSupportedDevice = int(gpu.gpm is not None and gpu.arch >= ARCH_HOPPER)
            return SUCCESS

        E("nvmlGpmQueryDeviceSupport", [P, P])(guarded(gpm_support))

        @E("nvmlGpmSampleAlloc", [P])
        def nvmlGpmSampleAlloc(out: int | None) -> int:
            if out is None:
                return ERROR_INVALID_ARGUMENT
            buf = ctypes.create_string_buffer(64)
            self._gpm[ctypes.addressof(buf)] = _GpmSample(buf)
            return self._put(out, c_void_p, ctypes.addressof(buf))

        @E("nvmlGpmSampleFree", [c_void_p])
        def nvmlGpmSampleFree(sample: int | None) -> int:
            s = self._gpm.get(sample)  # type: ignore[arg-type]
            if s is None or s.freed:
                return ERROR_INVALID_ARGUMENT
            s.freed = True
            return SUCCESS

        def gpm_get(device: int | None, sample: int | None) -> int:
            i, gpu, _ = self._device(device, "nvmlGpmSampleGet")
            s = self._gpm.get(sample)  # type: ignore[arg-type]
            if s is None or s.freed:
                return ERROR_INVALID_ARGUMENT
            if gpu.gpm is None or gpu.arch < ARCH_HOPPER:
                return ERROR_NOT_SUPPORTED
            s.gpu, s.t_ns, s.values = i, self.clock.monotonic_ns(), dict(gpu.gpm)
            self.gpm_sample_times.append(s.t_ns)
            return SUCCESS

        E("nvmlGpmSampleGet", [P, c_void_p])(guarded(gpm_get))

        @E("nvmlGpmMetricsGet", [P])
        def nvmlGpmMetricsGet(request: int | None) -> int:
            if request is None:
                return ERROR_INVALID_ARGUMENT
            head = GpmMetricsGetHead.from_address(request)
            if head.version != GPM_METRICS_GET_VERSION:
                return ERROR_ARGUMENT_VERSION_MISMATCH
            if head.numMetrics > GPM_METRIC_MAX:
                return ERROR_INVALID_ARGUMENT
            s1, s2 = self._gpm.get(head.sample1), self._gpm.get(head.sample2)  # type: ignore[arg-type]
            if s1 is None or s2 is None or s1.freed or s2.freed or s1.gpu is None:
                return ERROR_INVALID_ARGUMENT
            if s1.gpu != s2.gpu or s2.t_ns <= s1.t_ns:
                return ERROR_INVALID_ARGUMENT
            gpu = self.gpus[s1.gpu]
            self.gpm_windows.append((s1.gpu, s2.t_ns - s1.t_ns))
            metrics = (GpmMetric * head.numMetrics).from_address(request + _METRICS_OFFSET)
            for m in metrics:
                if m.metricId in gpu.gpm_errors:
                    m.nvmlReturn, m.value = gpu.gpm_errors[m.metricId], 0.0
                elif m.metricId in s2.values:
                    m.nvmlReturn, m.value = SUCCESS, s2.values[m.metricId]
                else:
                    m.nvmlReturn = ERROR_NOT_SUPPORTED
            return SUCCESS

    # -- what tests read ---------------------------------------------------------------------

    def live_gpm_samples(self) -> int:
        """GPM sample buffers allocated and not freed (a leak shows here)."""
        return sum(1 for s in self._gpm.values() if not s.freed)


class _Answer(Exception):
    """Raised inside an emulated function to return ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


__all__ = [
    "OLD_DRIVER",
    "Driver",
    "EmulatedGpu",
    "EmulatedLibrary",
    "FakeTime",
    "RealTime",
    "a100",
    "h100",
    "moving",
]
