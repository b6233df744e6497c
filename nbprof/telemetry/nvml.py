"""The NVML backend: one sampling pass over every GPU, errors turned into plain reasons.

Everything here runs on the sampler thread. Nothing raises out of :meth:`NvmlBackend.open`,
:meth:`NvmlBackend.read` or :meth:`NvmlBackend.close`: a missing library, a missing driver, a
permission problem, MIG mode, an unsupported metric or a GPU that falls off the bus each
become a sentence in :attr:`NvmlBackend.reasons` (per GPU and metric) or
:attr:`NvmlBackend.unavailable` (process-wide), logged once, never once per sample.

The ``nvml`` module is injected (``pynvml`` from nvidia-ml-py by default) so tests can pass a
fake with the same names, structures and error classes.

GPM (Hopper and newer): each metric is computed by ``nvmlGpmMetricsGet`` from two GPM samples
taken at least :data:`GPM_MIN_INTERVAL_NS` apart (shorter windows are noisy); when the
sampling period is shorter, the last complete window's values are carried forward. Each
metric's own ``nvmlReturn`` is checked: one unsupported counter does not hide the others.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbprof.telemetry.model import METRICS

logger = logging.getLogger(__name__)

#: The metric columns, in the order of the ``values`` arrays a read returns.
METRIC_NAMES: tuple[str, ...] = tuple(METRICS)
_COL = {m: i for i, m in enumerate(METRIC_NAMES)}

#: GPM windows shorter than this are not computed (NVML's counters are too coarse).
GPM_MIN_INTERVAL_NS = 100_000_000

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

# Driver-buffered samples whose timestamps stray further than this from time.time_ns() are
# not on the wall clock after all; they are then ignored rather than misplaced on a timeline.
_DRIVER_CLOCK_TOLERANCE_NS = 60_000_000_000

# NVML return codes by name, so this module works with any module that mirrors pynvml.
_LOST = ("GPU_IS_LOST", "UNKNOWN", "GPU_NOT_FOUND", "RESET_REQUIRED")
_PERMANENT = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_PERMISSION", "ARGUMENT_VERSION_MISMATCH")

_logged: set[str] = set()


def _log_once(level: int, message: str) -> None:
    """Log each distinct message once per process: a sampler at 4 Hz must not flood the log."""
    if message not in _logged:
        _logged.add(message)
        logger.log(level, message)


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
    #: GPM metric ids queried, in the order of ``gpm_cols``.
    gpm_ids: list[int] = field(default_factory=list)
    gpm_cols: list[str] = field(default_factory=list)
    gpm_prev: Any = None
    gpm_prev_ns: int = 0
    gpm_spare: Any = None
    gpm_request: Any = None
    gpm_last: dict[str, float] = field(default_factory=dict)
    #: metrics not to query again (unsupported, no permission, MIG).
    skip: set[str] = field(default_factory=set)
    fine_util: bool = True
    last_util_us: int = 0
    use_temperature_v: bool = True


class NvmlBackend:
    """Reads every GPU NVML sees: :meth:`open`, then :meth:`read` repeatedly, then :meth:`close`."""

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml
        self.gpus: dict[int, dict[str, Any]] = {}
        self.reasons: dict[tuple[int, str], str] = {}
        self.unavailable = ""
        #: Bumped whenever gpus, reasons or unavailable change, so callers copy them only then.
        self.version = 0
        self._devices: list[_Device] = []
        self._initialized = False
        self._codes: dict[object, str] | None = None

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
            return self._codes.get(ret, "")  # type: ignore[arg-type]
        except TypeError:
            return ""

    def _code(self, err: BaseException) -> str:
        return self._code_of(getattr(err, "value", None))

    @staticmethod
    def _words(code: str) -> str:
        return {
            "NOT_SUPPORTED": "not supported on this GPU or driver",
            "FUNCTION_NOT_FOUND": "not available in this driver's NVML",
            "NO_PERMISSION": "no permission to read it (NVML: insufficient permissions)",
            "GPU_IS_LOST": "the GPU was lost mid-run (fell off the bus or was reset)",
            "UNKNOWN": "NVML stopped answering for this GPU mid-run (unknown error)",
            "GPU_NOT_FOUND": "the GPU disappeared mid-run",
            "RESET_REQUIRED": "the GPU needs a reset",
            "TIMEOUT": "NVML timed out reading it",
            "NO_DATA": "NVML has no data for it yet",
            "NOT_READY": "NVML is not ready to report it yet",
        }.get(code, f"NVML error {code.replace('_', ' ').lower() or 'of unknown kind'}")

    def _set_reason(self, gpu: int, metric: str, reason: str, level: int = logging.INFO) -> None:
        if self.reasons.get((gpu, metric)) != reason:
            self.reasons[(gpu, metric)] = reason
            self.version += 1
            _log_once(level, f"GPU {gpu} {metric}: {reason}")

    def _clear_reason(self, gpu: int, metric: str) -> None:
        if self.reasons.pop((gpu, metric), None) is not None:
            self.version += 1

    def _lose(self, dev: _Device, err: BaseException) -> None:
        dev.lost = True
        reason = self._words(self._code(err))
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
            self._lose(dev, err)
            return
        reason = self._words(code)
        for m in metrics:
            if code in _PERMANENT:
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
            self._open_device(i)
        self.version += 1

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
        for key, fn in (("name", "nvmlDeviceGetName"), ("uuid", "nvmlDeviceGetUUID")):
            try:
                value = getattr(nv, fn)(handle)
                info[key] = value.decode() if isinstance(value, bytes) else str(value)
            except nv.NVMLError:
                info[key] = ""
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(handle)
            dev.mig = current == nv.NVML_DEVICE_MIG_ENABLE
        except nv.NVMLError:
            dev.mig = False  # pre-Ampere GPUs have no MIG: NOT_SUPPORTED means "off"
        info["mig"] = dev.mig
        if dev.mig:
            reason = "MIG mode is on: NVML gives no whole-GPU utilization"
            for m in ("util_gpu", "util_mem"):
                dev.skip.add(m)
                self.reasons[(i, m)] = reason
            dev.fine_util = False
        self._open_gpm(dev)
        info["gpm"] = dev.gpm
        self._devices.append(dev)

    def _open_gpm(self, dev: _Device) -> None:
        nv = self._nvml
        i = dev.index
        if dev.mig:
            # Whole-GPU GPM samples are refused under MIG; per-instance sampling
            # (nvmlGpmMigSampleGet) would need one series per instance, not one per GPU.
            self._gpm_reason(dev, "MIG mode is on: per-instance GPM counters are not sampled")
            return
        try:
            support = nv.nvmlGpmQueryDeviceSupport(dev.handle)
            supported = bool(support.isSupportedDevice)
        except nv.NVMLError as err:
            code = self._code(err)
            if code in _LOST:
                self._lose(dev, err)
                return
            supported = False
            if code not in ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND"):
                self._gpm_reason(dev, f"GPM counters unavailable: {self._words(code)}")
                return
        if not supported:
            self._gpm_reason(
                dev, "GPM counters need a Hopper or newer GPU (nvmlGpmQueryDeviceSupport: no)"
            )
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

    def read(self, wall_ns: int, mono_ns: int) -> Block:
        """One pass over every GPU: a row per GPU stamped ``wall_ns``, plus driver samples."""
        times: list[int] = []
        gpus: list[int] = []
        rows: list[np.ndarray] = []
        for dev in self._devices:
            if dev.lost:
                continue
            row = np.full(len(METRIC_NAMES), np.nan)
            fine = self._read_device(dev, row, wall_ns, mono_ns)
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

    def _read_device(
        self, dev: _Device, row: np.ndarray, wall_ns: int, mono_ns: int
    ) -> list[tuple[int, float]]:
        nv = self._nvml
        h = dev.handle
        skip = dev.skip
        err_type = nv.NVMLError

        def scalar(metrics: tuple[str, ...], read: Any) -> None:
            if metrics[0] in skip:
                return
            try:
                values = read()
            except err_type as err:
                self._failed(dev, metrics, err)
                return
            for m, v in zip(metrics, values, strict=True):
                row[_COL[m]] = v
                self._clear_reason(dev.index, m)

        def util() -> tuple[float, float]:
            u = nv.nvmlDeviceGetUtilizationRates(h)
            return float(u.gpu), float(u.memory)

        def memory() -> tuple[float, float]:
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            return float(mem.used), float(mem.total)

        scalar(("util_gpu", "util_mem"), util)
        if dev.lost:
            return []
        scalar(("mem_used", "mem_total"), memory)
        scalar(("power_w",), lambda: (nv.nvmlDeviceGetPowerUsage(h) / 1000.0,))
        scalar(("sm_clock_mhz",), lambda: (float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),))
        self._read_temperature(dev, row)
        if dev.lost:
            return []
        fine = self._read_fine_util(dev, wall_ns) if dev.fine_util else []
        if dev.lost:
            return []
        if dev.gpm:
            self._read_gpm(dev, row, mono_ns)
        return fine

    def _read_temperature(self, dev: _Device, row: np.ndarray) -> None:
        nv = self._nvml
        if "temp_c" in dev.skip:
            return
        try:
            if dev.use_temperature_v and hasattr(nv, "nvmlDeviceGetTemperatureV"):
                try:
                    value = nv.nvmlDeviceGetTemperatureV(dev.handle, nv.NVML_TEMPERATURE_GPU)
                except nv.NVMLError as err:
                    # Drivers before the versioned call answer FUNCTION_NOT_FOUND: fall back.
                    if self._code(err) not in ("FUNCTION_NOT_FOUND", "NOT_SUPPORTED"):
                        raise
                    dev.use_temperature_v = False
                    value = nv.nvmlDeviceGetTemperature(dev.handle, nv.NVML_TEMPERATURE_GPU)
            else:
                value = nv.nvmlDeviceGetTemperature(dev.handle, nv.NVML_TEMPERATURE_GPU)
        except nv.NVMLError as err:
            self._failed(dev, ("temp_c",), err)
            return
        row[_COL["temp_c"]] = float(value)
        self._clear_reason(dev.index, "temp_c")

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
                self._lose(dev, err)
            elif code == "NOT_FOUND":
                pass  # no new samples since last time
            else:
                # Fall back quietly to utilization rates: util_gpu is still there.
                dev.fine_util = False
                _log_once(
                    logging.INFO,
                    f"GPU {dev.index}: driver utilization samples unavailable "
                    f"({self._words(code)}); using nvmlDeviceGetUtilizationRates",
                )
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

    def _read_gpm(self, dev: _Device, row: np.ndarray, mono_ns: int) -> None:
        nv = self._nvml
        prev = dev.gpm_prev
        try:
            if prev is None or mono_ns - dev.gpm_prev_ns >= GPM_MIN_INTERVAL_NS:
                sample = dev.gpm_spare if dev.gpm_spare is not None else nv.nvmlGpmSampleAlloc()
                dev.gpm_spare = None
                try:
                    nv.nvmlGpmSampleGet(dev.handle, sample)
                except nv.NVMLError:
                    # Kept for the next try (and freed with the rest), not leaked per pass.
                    dev.gpm_spare = sample
                    raise
                dev.gpm_prev, dev.gpm_prev_ns = sample, mono_ns
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
                self._lose(dev, err)
                return
            reason = f"GPM read failed: {self._words(code)}"
            if code in _PERMANENT:
                self._free_gpm(dev)
            for col in dev.gpm_cols:
                self._set_reason(dev.index, col, reason)
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
