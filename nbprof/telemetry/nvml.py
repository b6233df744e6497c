"""The NVML backend: one sampling pass over every GPU, errors turned into plain reasons.

Everything here runs on the sampler thread. Nothing raises out of :meth:`NvmlBackend.open`,
:meth:`NvmlBackend.read` or :meth:`NvmlBackend.close`: a missing library, a missing driver, a
permission problem, MIG mode, an unsupported metric, a GPU that falls off the bus, or a
``pynvml`` too old to have a function each become a sentence in :attr:`NvmlBackend.reasons`
(per GPU and metric) or :attr:`NvmlBackend.unavailable` (process-wide), logged once, never
once per sample. What one reading cannot do never stops the others.

The ``nvml`` module is injected (``pynvml`` from nvidia-ml-py by default) so tests can pass a
fake with the same names, structures and error classes, or the real module over an emulated
C library.

GPM (Hopper and newer): each metric is computed by ``nvmlGpmMetricsGet`` from two GPM samples.
``nvml.h`` asks for more than 100 ms between the two ``nvmlGpmSampleGet`` calls; the window
is timed at the call itself (not at the start of the pass, whose other calls take varying
time) and must reach :data:`GPM_MIN_INTERVAL_NS`, so GPM runs at its own rate under a faster
sampling period, the last complete window's values carried forward in between. Each
metric's own ``nvmlReturn`` is checked: one unsupported counter does not hide the others.

Errors: ``GPU_IS_LOST`` (and ``GPU_NOT_FOUND``, ``RESET_REQUIRED``) drop a GPU at once; an
``UNKNOWN`` answer is retried, and a GPU is dropped only when every reading failed for
:data:`UNKNOWN_PASSES_TO_DROP` passes in a row. ``NOT_SUPPORTED``-like answers stop asking
for that metric; others (a timeout) clear when the reading works again.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbprof.telemetry.model import METRICS

logger = logging.getLogger(__name__)

#: The metric columns, in the order of the ``values`` arrays a read returns.
METRIC_NAMES: tuple[str, ...] = tuple(METRICS)
_COL = {m: i for i, m in enumerate(METRIC_NAMES)}

#: Shortest GPM window computed: nvml.h asks for more than 100 ms between two
#: ``nvmlGpmSampleGet`` calls; 10% on top absorbs the scheduling jitter of the timestamp.
GPM_MIN_INTERVAL_NS = 110_000_000

#: Passes in a row in which every reading of a GPU answered NVML_ERROR_UNKNOWN before that
#: GPU is given up (one UNKNOWN is a hiccup, not a lost GPU).
UNKNOWN_PASSES_TO_DROP = 3

#: metric column -> name of the pynvml constant of its GPM metric id.
GPM_METRICS: dict[str, str] = {
    "sm_util": "NVML_GPM_METRIC_SM_UTIL",
    "sm_occupancy": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "tensor_util": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "hmma_util": "NVML_GPM_METRIC_HMMA_TENSOR_UTIL",
    "imma_util": "NVML_GPM_METRIC_IMMA_TENSOR_UTIL",
    "dfma_util": "NVML_GPM_METRIC_DFMA_TENSOR_UTIL",
    "dram_bw_util": "NVML_GPM_METRIC_DRAM_BW_UTIL",
    "fp16_util": "NVML_GPM_METRIC_FP16_UTIL",
    "fp32_util": "NVML_GPM_METRIC_FP32_UTIL",
}

#: What the bindings must have for GPM (nvidia-ml-py 12.535 has all of it; the old ``pynvml``
#: package, <= 11.4, none).
_GPM_API = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmSampleFree",
    "nvmlGpmMetricsGet",
    "c_nvmlGpmMetricsGet_t",
    "NVML_GPM_METRICS_GET_VERSION",
)

# Driver-buffered samples whose timestamps stray further than this from time.time_ns() are
# not on the wall clock after all; they are then ignored rather than misplaced on a timeline.
_DRIVER_CLOCK_TOLERANCE_NS = 60_000_000_000

# NVML return codes by name, so this module works with any module that mirrors pynvml.
_LOST = ("GPU_IS_LOST", "GPU_NOT_FOUND", "RESET_REQUIRED")
_PERMANENT = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_PERMISSION", "ARGUMENT_VERSION_MISMATCH")

#: nvmlDeviceGetArchitecture's NVML_DEVICE_ARCH_HOPPER: GPM exists from here on.
_ARCH_HOPPER = 9
_ARCH_UNKNOWN = 0xFFFFFFFF

_logged: set[str] = set()


def _log_once(level: int, message: str, exc_info: bool = False) -> None:
    """Log each distinct message once per process: a sampler at 4 Hz must not flood the log."""
    if message not in _logged:
        _logged.add(message)
        logger.log(level, message, exc_info=exc_info)


@dataclass
class Block:
    """Rows from one sampling pass: ``values[i]`` holds :data:`METRIC_NAMES` for ``gpu[i]``."""

    time_ns: np.ndarray
    gpu: np.ndarray
    values: np.ndarray

    @classmethod
    def empty(cls) -> Block:
        return cls(
            np.empty(0, dtype=np.int64),
            np.empty(0, dtype=np.int64),
            np.empty((0, len(METRIC_NAMES)), dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.time_ns)


@dataclass
class _Device:
    index: int
    handle: Any
    mig: bool = False
    lost: bool = False
    gpm: bool = False
    #: NVML_DEVICE_ARCH_* (None: not known), to tell "needs Hopper" from "refused here".
    arch: int | None = None
    #: GPM metric ids queried, in the order of ``gpm_cols``.
    gpm_ids: list[int] = field(default_factory=list)
    gpm_cols: list[str] = field(default_factory=list)
    gpm_prev: Any = None
    #: Monotonic time of the nvmlGpmSampleGet call that filled ``gpm_prev``.
    gpm_prev_ns: int = 0
    gpm_spare: Any = None
    gpm_request: Any = None
    gpm_last: dict[str, float] = field(default_factory=dict)
    #: metrics not to query again (unsupported, no permission, MIG, bindings without it).
    skip: set[str] = field(default_factory=set)
    fine_util: bool = True
    last_util_us: int = 0
    use_temperature_v: bool = True
    #: nvmlDeviceGetMemoryInfo_v2 (``used`` without the driver's reservation) still to try.
    memory_v2: bool = True
    #: Readings this pass that succeeded / answered UNKNOWN, and passes in a row of UNKNOWN only.
    pass_ok: int = 0
    pass_unknown: int = 0
    unknown_streak: int = 0


class NvmlBackend:
    """Reads every GPU NVML sees: :meth:`open`, then :meth:`read` repeatedly, then :meth:`close`.

    ``monotonic_ns`` times GPM windows at each ``nvmlGpmSampleGet`` call.
    """

    def __init__(
        self, nvml: Any = None, monotonic_ns: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self._nvml = nvml
        self._monotonic_ns = monotonic_ns
        self.gpus: dict[int, dict[str, Any]] = {}
        self.reasons: dict[tuple[int, str], str] = {}
        self.unavailable = ""
        #: Bumped whenever gpus, reasons or unavailable change, so callers copy them only then.
        self.version = 0
        self._devices: list[_Device] = []
        self._initialized = False
        self._codes: dict[object, str] | None = None
        #: The bindings' nvmlMemory_v2 (0: they cannot ask for version 2); None: not known yet.
        self._memory_v2: int | None = None

    # -- errors -------------------------------------------------------------------------

    def _code_of(self, ret: object) -> str:
        """The NVML_ERROR_* suffix for a return code ("GPU_IS_LOST"), or "" if unknown."""
        if self._codes is None:
            self._codes = {
                getattr(self._nvml, n): n[len("NVML_ERROR_") :]
                for n in dir(self._nvml)
                if n.startswith("NVML_ERROR_")
            }
        try:
            return self._codes.get(ret, "")
        except TypeError:
            return ""

    def _code(self, err: BaseException) -> str:
        return self._code_of(getattr(err, "value", None))

    @staticmethod
    def _words(code: str) -> str:
        return {
            "NOT_SUPPORTED": "not supported on this GPU or driver",
            "FUNCTION_NOT_FOUND": "not available in this driver's NVML (an older driver)",
            "NO_PERMISSION": "no permission to read it (NVML: insufficient permissions)",
            "GPU_IS_LOST": "the GPU was lost mid-run (fell off the bus or was reset)",
            "UNKNOWN": "NVML answered 'unknown error' (retrying)",
            "GPU_NOT_FOUND": "the GPU disappeared mid-run",
            "RESET_REQUIRED": "the GPU needs a reset",
            "TIMEOUT": "NVML timed out reading it",
            "NO_DATA": "NVML has no data for it yet",
            "NOT_READY": "NVML is not ready to report it yet",
            "ARGUMENT_VERSION_MISMATCH": "this driver does not know the structure version "
            "nvidia-ml-py passed",
        }.get(code, f"NVML error {code.replace('_', ' ').lower() or 'of unknown kind'}")

    def _set_reason(self, gpu: int, metric: str, reason: str, level: int = logging.INFO) -> None:
        if self.reasons.get((gpu, metric)) != reason:
            self.reasons[(gpu, metric)] = reason
            self.version += 1
            _log_once(level, f"GPU {gpu} {metric}: {reason}")

    def _clear_reason(self, gpu: int, metric: str) -> None:
        if self.reasons.pop((gpu, metric), None) is not None:
            self.version += 1

    def _lose(self, dev: _Device, reason: str) -> None:
        dev.lost = True
        for m in METRIC_NAMES:
            self.reasons[(dev.index, m)] = reason
        self.gpus.setdefault(dev.index, {})["lost"] = reason
        self.version += 1
        _log_once(logging.WARNING, f"GPU {dev.index}: {reason}; no longer sampled")
        self._free_gpm(dev)

    def _failed(self, dev: _Device, metrics: tuple[str, ...], err: BaseException) -> None:
        """Handle an NVMLError from reading ``metrics``: lose the device, skip or note it."""
        code = self._code(err)
        if code in _LOST:
            self._lose(dev, self._words(code))
            return
        if code == "UNKNOWN":
            dev.pass_unknown += 1
        reason = self._words(code)
        for m in metrics:
            if code in _PERMANENT:
                dev.skip.add(m)
            self._set_reason(dev.index, m, reason)

    def _broken(self, dev: _Device, metrics: tuple[str, ...], err: BaseException) -> None:
        """A reading raised something other than an NVMLError: not asked again, said why.

        An old ``pynvml`` (a missing function or constant, another signature) or a bug here
        must cost that reading, never the sampler thread and every other number with it.
        """
        reason = f"could not be read with this pynvml ({type(err).__name__}: {err})"
        _log_once(logging.WARNING, f"GPU {dev.index} {', '.join(metrics)}: {reason}", True)
        for m in metrics:
            dev.skip.add(m)
            self._set_reason(dev.index, m, reason)

    # -- lifecycle ----------------------------------------------------------------------

    def _unavailable(self, reason: str) -> None:
        self.unavailable = reason
        self.version += 1
        # INFO, not WARNING: the reason already shows where the numbers would be (gauge,
        # profile notes); a WARNING would print to stderr in the user's first cell too.
        _log_once(logging.INFO, f"GPU telemetry unavailable: {reason}")

    def open(self) -> None:
        """Initialise NVML and find the GPUs. Sets :attr:`unavailable` instead of raising."""
        try:
            self._open()
        except Exception as err:  # an unforeseen binding or bug: said, never raised
            _log_once(logging.WARNING, "NVML could not be opened", True)
            self._unavailable(f"NVML could not be opened ({type(err).__name__}: {err})")

    def _open(self) -> None:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                self._unavailable("nvidia-ml-py (pynvml) is not installed")
                return
            self._nvml = pynvml
        nv = self._nvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as err:
            code = self._code(err)
            self._unavailable(
                {
                    "LIBRARY_NOT_FOUND": "NVML library not found (libnvidia-ml.so.1): "
                    "no NVIDIA driver on this machine",
                    "DRIVER_NOT_LOADED": "the NVIDIA driver is not loaded",
                    "NO_PERMISSION": "no permission to use NVML on this machine",
                    "LIB_RM_VERSION_MISMATCH": "NVML and the NVIDIA kernel driver versions "
                    "differ (driver updated without a reboot?)",
                }.get(code, f"NVML failed to start ({self._words(code)})")
            )
            return
        except OSError as err:  # a broken library file surfaces as an OSError from ctypes
            self._unavailable(f"NVML library could not be loaded ({err})")
            return
        self._initialized = True
        try:
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as err:
            self._unavailable(f"NVML could not count GPUs ({self._words(self._code(err))})")
            return
        if count == 0:
            self._unavailable("NVML sees no GPU on this machine")
            return
        for i in range(count):
            try:
                self._open_device(i)
            except Exception as err:  # this GPU only: the others are still sampled
                reason = f"cannot open GPU {i} ({type(err).__name__}: {err})"
                _log_once(logging.WARNING, reason, True)
                self.gpus.setdefault(i, {"index": i})["error"] = reason
                for m in METRIC_NAMES:
                    self.reasons[(i, m)] = reason
                self._devices = [d for d in self._devices if d.index != i]
        self.version += 1

    def _query(self, name: str, *args: Any) -> Any:
        """An NVML query at open whose failure only leaves a detail unknown: None then."""
        nv = self._nvml
        fn = getattr(nv, name, None)
        if fn is None:
            return None
        try:
            value = fn(*args)
        except nv.NVMLError:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def _open_device(self, i: int) -> None:
        nv = self._nvml
        info: dict[str, Any] = {"index": i}
        self.gpus[i] = info
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(i)
        except nv.NVMLError as err:
            reason = f"cannot open GPU {i}: {self._words(self._code(err))}"
            info["error"] = reason
            for m in METRIC_NAMES:
                self.reasons[(i, m)] = reason
            _log_once(logging.WARNING, reason)
            return
        dev = _Device(index=i, handle=handle)
        info["name"] = str(self._query("nvmlDeviceGetName", handle) or "")
        # The UUID and PCI bus id tie this NVML index to a CUDA device (the two number
        # their GPUs differently: see nbprof.telemetry.devices).
        info["uuid"] = str(self._query("nvmlDeviceGetUUID", handle) or "")
        pci = self._query("nvmlDeviceGetPciInfo", handle)
        bus = getattr(pci, "busId", b"") if pci is not None else b""
        info["pci_bus_id"] = bus.decode() if isinstance(bus, bytes) else str(bus)
        dev.arch = self._architecture(handle)
        info["architecture"] = _arch_name(nv, dev.arch)
        mode = self._query("nvmlDeviceGetMigMode", handle)
        # Pre-Ampere GPUs have no MIG: NOT_SUPPORTED means "off".
        dev.mig = bool(mode) and mode[0] == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1)
        info["mig"] = dev.mig
        if dev.mig:
            info["mig_uuids"] = self._mig_uuids(handle)
            reason = "MIG mode is on: NVML gives no whole-GPU utilization"
            for m in ("util_gpu", "util_mem"):
                dev.skip.add(m)
                self.reasons[(i, m)] = reason
            dev.fine_util = False
        self._open_gpm(dev)
        info["gpm"] = dev.gpm
        self._devices.append(dev)

    def _architecture(self, handle: Any) -> int | None:
        arch = self._query("nvmlDeviceGetArchitecture", handle)
        if isinstance(arch, int) and arch != _ARCH_UNKNOWN:
            return arch
        cc = self._query("nvmlDeviceGetCudaComputeCapability", handle)
        if cc:
            # Compute capability 9.x is Hopper; 10.x and later are newer still.
            major = int(cc[0])
            return _ARCH_HOPPER if major >= 9 else None
        return None

    def _mig_uuids(self, handle: Any) -> list[str]:
        """UUIDs of the MIG instances on a GPU (CUDA_VISIBLE_DEVICES=MIG-… names them)."""
        count = self._query("nvmlDeviceGetMaxMigDeviceCount", handle) or 0
        out: list[str] = []
        for k in range(int(count)):
            mig = self._query("nvmlDeviceGetMigDeviceHandleByIndex", handle, k)
            if mig is None:  # NOT_FOUND: an empty slot
                continue
            uuid = self._query("nvmlDeviceGetUUID", mig)
            if uuid:
                out.append(str(uuid))
        return out

    def _open_gpm(self, dev: _Device) -> None:
        nv = self._nvml
        i = dev.index
        if dev.mig:
            # Whole-GPU GPM samples are refused under MIG; per-instance sampling
            # (nvmlGpmMigSampleGet) would need one series per instance, not one per GPU.
            self._gpm_reason(dev, "MIG mode is on: per-instance GPM counters are not sampled")
            return
        missing = [name for name in _GPM_API if not hasattr(nv, name)]
        if missing:
            self._gpm_reason(dev, _old_bindings(nv))
            return
        try:
            support = nv.nvmlGpmQueryDeviceSupport(dev.handle)
            supported = bool(support.isSupportedDevice)
        except nv.NVMLError as err:
            code = self._code(err)
            if code in _LOST:
                self._lose(dev, self._words(code))
                return
            if code == "FUNCTION_NOT_FOUND":
                self._gpm_reason(
                    dev,
                    "no GPM: this NVIDIA driver is older than the GPM functions "
                    "(nvmlGpmQueryDeviceSupport not found); a newer driver has them",
                )
                return
            if code != "NOT_SUPPORTED":
                self._gpm_reason(dev, f"GPM counters unavailable: {self._words(code)}")
                return
            supported = False
        if not supported:
            self._gpm_reason(dev, self._gpm_unsupported(dev))
            return
        for col, const in GPM_METRICS.items():
            metric_id = getattr(nv, const, None)
            if metric_id is None:
                self.reasons[(i, col)] = "this nvidia-ml-py does not know the metric"
                continue
            dev.gpm_ids.append(metric_id)
            dev.gpm_cols.append(col)
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(dev.gpm_ids)
        for k, metric_id in enumerate(dev.gpm_ids):
            request.metrics[k].metricId = metric_id
        dev.gpm_request = request
        dev.gpm = True

    def _gpm_unsupported(self, dev: _Device) -> str:
        """Why GPM is refused, by what the GPU is: a Hopper refused is not "needs Hopper"."""
        if dev.arch is not None and dev.arch >= _ARCH_HOPPER:
            return (
                "the driver reports GPM unsupported here (MIG, vGPU, or profiling counters "
                "held by DCGM / Nsight)"
            )
        arch = _arch_name(self._nvml, dev.arch)
        if arch:
            return f"GPM counters need a Hopper or newer GPU (this one is {arch})"
        return "GPM counters need a Hopper or newer GPU (nvmlGpmQueryDeviceSupport: no)"

    def _gpm_reason(self, dev: _Device, reason: str) -> None:
        for col in GPM_METRICS:
            self.reasons[(dev.index, col)] = reason
        _log_once(logging.INFO, f"GPU {dev.index}: {reason}")

    def _free_gpm(self, dev: _Device) -> None:
        for attr in ("gpm_prev", "gpm_spare"):
            sample = getattr(dev, attr)
            setattr(dev, attr, None)
            if sample is not None:
                try:
                    self._nvml.nvmlGpmSampleFree(sample)
                except Exception:
                    logger.debug("freeing a GPM sample failed", exc_info=True)
        dev.gpm = False

    def close(self) -> None:
        """Free GPM samples and shut NVML down (pynvml counts inits, so others keep theirs)."""
        for dev in self._devices:
            self._free_gpm(dev)
        self._devices = []
        if self._initialized:
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                logger.debug("nvmlShutdown failed", exc_info=True)

    # -- reading ------------------------------------------------------------------------

    def read(self, wall_ns: int) -> Block:
        """One pass over every GPU: a row per GPU stamped ``wall_ns``, plus driver samples."""
        times: list[int] = []
        gpus: list[int] = []
        rows: list[np.ndarray] = []
        for dev in self._devices:
            if dev.lost:
                continue
            row = np.full(len(METRIC_NAMES), np.nan)
            dev.pass_ok = dev.pass_unknown = 0
            try:
                fine = self._read_device(dev, row, wall_ns)
            except Exception as err:  # a bug in one reading path: this GPU's pass only
                self._broken(dev, ("util_gpu",), err)
                fine = []
            if not dev.lost:
                self._count_unknown(dev)
            if dev.lost:
                continue
            if fine:
                # The driver's own utilization samples stand for util_gpu at their own
                # times; repeating it on this row would count that time twice.
                row[_COL["util_gpu"]] = np.nan
                for ts_ns, value in fine:
                    extra = np.full(len(METRIC_NAMES), np.nan)
                    extra[_COL["util_gpu"]] = value
                    times.append(ts_ns)
                    gpus.append(dev.index)
                    rows.append(extra)
            if np.isnan(row).all():
                continue  # nothing read this pass (retrying): no empty row
            times.append(wall_ns)
            gpus.append(dev.index)
            rows.append(row)
        if not rows:
            return Block.empty()
        order = np.argsort(np.asarray(times, dtype=np.int64), kind="stable")
        return Block(
            np.asarray(times, dtype=np.int64)[order],
            np.asarray(gpus, dtype=np.int64)[order],
            np.vstack(rows)[order],
        )

    def _count_unknown(self, dev: _Device) -> None:
        """Give a GPU up after passes in a row where nothing but UNKNOWN came back."""
        if dev.pass_ok:
            dev.unknown_streak = 0
        elif dev.pass_unknown:
            dev.unknown_streak += 1
            if dev.unknown_streak >= UNKNOWN_PASSES_TO_DROP:
                self._lose(
                    dev,
                    "NVML stopped answering for this GPU mid-run "
                    f"(unknown error, {dev.unknown_streak} passes in a row)",
                )

    def _read_device(self, dev: _Device, row: np.ndarray, wall_ns: int) -> list[tuple[int, float]]:
        nv = self._nvml
        h = dev.handle
        skip = dev.skip
        err_type = nv.NVMLError

        def scalar(metrics: tuple[str, ...], read: Callable[[], tuple[float, ...]]) -> None:
            if metrics[0] in skip or dev.lost:
                return
            try:
                values = read()
            except err_type as err:
                self._failed(dev, metrics, err)
                return
            except Exception as err:
                self._broken(dev, metrics, err)
                return
            dev.pass_ok += 1
            for m, v in zip(metrics, values, strict=True):
                if v == v:
                    row[_COL[m]] = v
                    self._clear_reason(dev.index, m)

        def util() -> tuple[float, float]:
            u = nv.nvmlDeviceGetUtilizationRates(h)
            return float(u.gpu), float(u.memory)

        scalar(("util_gpu", "util_mem"), util)
        scalar(("mem_used", "mem_total", "mem_reserved"), lambda: self._read_memory(dev))
        scalar(("power_w",), lambda: (nv.nvmlDeviceGetPowerUsage(h) / 1000.0,))
        scalar(("sm_clock_mhz",), lambda: (float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),))
        scalar(("temp_c",), lambda: (self._read_temperature(dev),))
        if dev.lost:
            return []
        fine = self._read_fine_util(dev, wall_ns) if dev.fine_util else []
        if dev.gpm and not dev.lost:
            self._read_gpm(dev, row)
        return fine

    def _read_memory(self, dev: _Device) -> tuple[float, float, float]:
        """(used, total, reserved): v2 where the driver has it, so ``used`` is what was
        allocated and an idle GPU reads near 0 as nvidia-smi shows it; v1's ``used`` also
        counts the memory the driver reserves for itself."""
        nv = self._nvml
        if dev.memory_v2:
            if self._memory_v2 is None:  # once: inspecting a signature costs a pass's worth
                v2 = getattr(nv, "nvmlMemory_v2", None)
                self._memory_v2 = (v2 or 0) if _takes(nv.nvmlDeviceGetMemoryInfo, "version") else 0
            version = self._memory_v2
            try:
                if not version:
                    raise TypeError("nvmlDeviceGetMemoryInfo takes no version")
                mem = nv.nvmlDeviceGetMemoryInfo(dev.handle, version=version)
                return float(mem.used), float(mem.total), float(mem.reserved)
            except nv.NVMLError as err:
                code = self._code(err)
                if code not in ("FUNCTION_NOT_FOUND", "ARGUMENT_VERSION_MISMATCH", "NOT_SUPPORTED"):
                    raise
                why = f"the driver has no nvmlDeviceGetMemoryInfo_v2 ({self._words(code)})"
            except TypeError:
                why = "this pynvml has no nvmlDeviceGetMemoryInfo version 2 (upgrade nvidia-ml-py)"
            dev.memory_v2 = False
            self._set_reason(
                dev.index, "mem_reserved", f"{why}: memory used includes the driver's reservation"
            )
        mem = nv.nvmlDeviceGetMemoryInfo(dev.handle)
        return float(mem.used), float(mem.total), math.nan

    def _read_temperature(self, dev: _Device) -> float:
        nv = self._nvml
        if dev.use_temperature_v and hasattr(nv, "nvmlDeviceGetTemperatureV"):
            try:
                return float(nv.nvmlDeviceGetTemperatureV(dev.handle, nv.NVML_TEMPERATURE_GPU))
            except nv.NVMLError as err:
                # Drivers before the versioned call answer FUNCTION_NOT_FOUND: fall back.
                if self._code(err) not in ("FUNCTION_NOT_FOUND", "NOT_SUPPORTED"):
                    raise
                dev.use_temperature_v = False
        return float(nv.nvmlDeviceGetTemperature(dev.handle, nv.NVML_TEMPERATURE_GPU))

    def _read_fine_util(self, dev: _Device, wall_ns: int) -> list[tuple[int, float]]:
        """The driver's buffered utilization samples since the last read (finer than 4 Hz)."""
        nv = self._nvml
        if dev.last_util_us == 0:
            # Only samples from now on: the buffer also holds seconds from before we started.
            dev.last_util_us = wall_ns // 1000
        try:
            value_type, samples = nv.nvmlDeviceGetSamples(
                dev.handle, nv.NVML_GPU_UTILIZATION_SAMPLES, dev.last_util_us
            )
        except nv.NVMLError as err:
            code = self._code(err)
            if code in _LOST:
                self._lose(dev, self._words(code))
            elif code in ("NOT_FOUND", "UNKNOWN"):
                pass  # no new samples since last time (or a hiccup: asked again next pass)
            else:
                # Fall back quietly to utilization rates: util_gpu is still there.
                dev.fine_util = False
                _log_once(
                    logging.INFO,
                    f"GPU {dev.index}: driver utilization samples unavailable "
                    f"({self._words(code)}); using nvmlDeviceGetUtilizationRates",
                )
            return []
        except Exception:
            dev.fine_util = False
            _log_once(logging.WARNING, f"GPU {dev.index}: nvmlDeviceGetSamples failed", True)
            return []
        out: list[tuple[int, float]] = []
        for s in samples:
            ts_us = int(s.timeStamp)
            if ts_us <= dev.last_util_us:
                continue
            if abs(ts_us * 1000 - wall_ns) > _DRIVER_CLOCK_TOLERANCE_NS:
                dev.fine_util = False
                _log_once(
                    logging.INFO,
                    f"GPU {dev.index}: driver sample timestamps are not on the wall clock; "
                    "using nvmlDeviceGetUtilizationRates",
                )
                return []
            out.append((ts_us * 1000, _sample_value(nv, value_type, s.sampleValue)))
            dev.last_util_us = max(dev.last_util_us, ts_us)
        return out

    def _read_gpm(self, dev: _Device, row: np.ndarray) -> None:
        nv = self._nvml
        prev = dev.gpm_prev
        try:
            # Timed here, at the call: the pass's earlier calls take a varying time.
            now = self._monotonic_ns()
            if prev is None or now - dev.gpm_prev_ns >= GPM_MIN_INTERVAL_NS:
                sample = dev.gpm_spare if dev.gpm_spare is not None else nv.nvmlGpmSampleAlloc()
                dev.gpm_spare = None
                try:
                    nv.nvmlGpmSampleGet(dev.handle, sample)
                except nv.NVMLError:
                    # Kept for the next try (and freed with the rest), not leaked per pass.
                    dev.gpm_spare = sample
                    raise
                dev.gpm_prev, dev.gpm_prev_ns = sample, now
                if prev is None:
                    return  # the first sample only opens a window
                request = dev.gpm_request
                request.sample1 = prev
                request.sample2 = sample
                dev.gpm_spare = prev
                nv.nvmlGpmMetricsGet(request)
                self._take_gpm(dev, request)
        except nv.NVMLError as err:
            code = self._code(err)
            if code in _LOST:
                self._lose(dev, self._words(code))
                return
            if code == "NOT_SUPPORTED":
                reason = self._gpm_unsupported(dev)
            else:
                reason = f"GPM read failed: {self._words(code)}"
            if code in _PERMANENT:
                self._free_gpm(dev)
            for col in dev.gpm_cols:
                self._set_reason(dev.index, col, reason)
            dev.gpm_last.clear()
            return
        except Exception as err:
            self._free_gpm(dev)
            self._broken(dev, tuple(dev.gpm_cols), err)
            dev.gpm_last.clear()
            return
        for col, value in dev.gpm_last.items():
            row[_COL[col]] = value

    def _take_gpm(self, dev: _Device, request: Any) -> None:
        nv = self._nvml
        success = nv.NVML_SUCCESS
        dev.gpm_last.clear()
        for k, col in enumerate(dev.gpm_cols):
            metric = request.metrics[k]
            ret = int(metric.nvmlReturn)
            if ret == success:
                value = float(metric.value)
                if math.isfinite(value):
                    dev.gpm_last[col] = value
                    self._clear_reason(dev.index, col)
                    continue
                self._set_reason(dev.index, col, "GPM returned a non-finite value")
            else:
                code = self._code_of(ret) or f"code {ret}"
                self._set_reason(dev.index, col, f"GPM: {self._words(code)}")


def library_reason(nvml: Any = None) -> str:
    """Why the NVML library cannot be loaded here, as pynvml itself finds it; "" if it can.

    Only loads the library (pynvml's own ``_LoadNvmlLibrary``: its search path, e.g.
    System32 then NVSMI on Windows), without ``nvmlInit``, which can take seconds on a
    driver without persistence mode and must not run on the kernel's main thread. pynvml has
    no public call for this; a module without that loader (an injected fake) answers "" and
    the sampler's own ``nvmlInit`` says why later, if it must.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py (pynvml) is not installed"
        nvml = pynvml
    # The old `pynvml` package defines these in pynvml.nvml; nvmlInit's globals are there.
    where = getattr(getattr(nvml, "nvmlInit", None), "__globals__", None) or vars(nvml)
    if where.get("nvmlLib") is not None:
        return ""
    load = where.get("_LoadNvmlLibrary")
    if not callable(load):
        return ""
    try:
        load()
    except nvml.NVMLError:
        return "NVML library not found (libnvidia-ml.so.1): no NVIDIA driver on this machine"
    except OSError as err:
        return f"NVML library could not be loaded ({err})"
    return ""


def _takes(fn: Any, parameter: str) -> bool:
    try:
        return parameter in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return True


def _arch_name(nv: Any, arch: int | None) -> str:
    """ "Hopper" for NVML_DEVICE_ARCH_HOPPER, from the bindings' own names; "" if unknown."""
    if arch is None:
        return ""
    for name in dir(nv):
        if name.startswith("NVML_DEVICE_ARCH_") and getattr(nv, name) == arch:
            word = name[len("NVML_DEVICE_ARCH_") :]
            if word != "UNKNOWN":
                return word.title()
    return ""


def _old_bindings(nv: Any) -> str:
    """The reason for "no GPM" when the imported pynvml lacks the GPM functions."""
    where = getattr(nv, "__file__", "") or ""
    if where.endswith("__init__.py"):
        # The old `pynvml` package (a folder) wins over nvidia-ml-py's pynvml.py.
        return (
            f"no GPM (old bindings: the 'pynvml' package at {where} shadows nvidia-ml-py; "
            "pip uninstall pynvml, then pip install -U nvidia-ml-py)"
        )
    return "no GPM (old bindings: upgrade nvidia-ml-py)"


def _sample_value(nv: Any, value_type: int, value: Any) -> float:
    """Read an ``nvmlValue_t`` union by its declared type."""
    field_by_type = {
        getattr(nv, "NVML_VALUE_TYPE_DOUBLE", 0): "dVal",
        getattr(nv, "NVML_VALUE_TYPE_UNSIGNED_INT", 1): "uiVal",
        getattr(nv, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2): "ulVal",
        getattr(nv, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3): "ullVal",
        getattr(nv, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4): "sllVal",
        getattr(nv, "NVML_VALUE_TYPE_SIGNED_INT", 5): "siVal",
        getattr(nv, "NVML_VALUE_TYPE_UNSIGNED_SHORT", 6): "usVal",
    }
    return float(getattr(value, field_by_type.get(value_type, "uiVal")))
