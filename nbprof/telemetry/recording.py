"""Recording samples to JSON lines, reading them back, and replaying them in real time.

File format ``nbprof-nvml-samples`` version 1 (UTF-8, one JSON object per line):

1. A header::

     {"format": "nbprof-nvml-samples", "version": 1, "created_ns": 1764460000000000000,
      "source": "live", "period_s": 0.25, "metrics": ["util_gpu", ...],
      "gpus": {"0": {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-...", "gpm": true}},
      "reasons": [[0, "fp16_util", "GPM: not supported on this GPU or driver"]],
      "unavailable": "",
      "cuda_devices": {"0": {"gpu": 0, "uuid": "…", "how": "UUID GPU-… (CUDA and NVML agree)"}}}

   ``metrics`` lists the metric names of :data:`nbprof.telemetry.model.METRICS` the writer
   knew; ``reasons`` is ``[gpu, metric, reason]`` for each metric that is missing and why;
   ``unavailable`` is the process-wide reason there are no samples at all ("" if there are);
   ``cuda_devices`` (optional) which NVML GPU each CUDA device of the run was, when a
   capture said (see :mod:`nbprof.telemetry.devices`): ``gpu`` is an NVML index, never a
   CUDA one.

2. One line per sample row::

     {"t": 1764460000250000000, "gpu": 0, "util_gpu": 100.0, "sm_util": 31.5, ...}

   ``t`` is ``time.time_ns()`` (see docs/clocks.md for the clock), ``gpu`` the NVML
   index; a metric that was not available at that time is simply absent.

3. Optionally, when the state changes mid-run (a GPU is lost, a metric starts failing)::

     {"t": 1764460012000000000, "state": {"gpus": {...}, "reasons": [...], "unavailable": ""}}

   which replaces the header's ``gpus``/``reasons``/``unavailable`` (and ``cuda_devices``,
   when it has the key) from time ``t`` on.

A truncated last line (the kernel was killed mid-write) is skipped with a warning; any other
malformed line is a :class:`nbprof.TraceError` naming the file, the line and the reason.
"""

from __future__ import annotations

import bisect
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeGuard

import numpy as np
import orjson

from nbprof._files import read_regular
from nbprof.errors import TraceError
from nbprof.telemetry.model import Samples
from nbprof.telemetry.nvml import METRIC_NAMES, Block
from nbprof.telemetry.sampler import (
    DEFAULT_PERIOD_S,
    OnTick,
    Sampler,
    Subscription,
    Tick,
    _to_samples,
    get_sampler,
    latest_of,
)

logger = logging.getLogger(__name__)

FORMAT = "nbprof-nvml-samples"
VERSION = 1
#: Name of the replay thread.
REPLAY_THREAD_NAME = "nbprof-replay"


def _state_json(
    gpus: dict[int, dict[str, Any]],
    reasons: dict[tuple[int, str], str],
    unavailable: str,
    cuda_devices: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``gpus``/``reasons``/``unavailable`` keys, as the header and state lines write them."""
    out: dict[str, Any] = {
        "gpus": {str(k): v for k, v in sorted(gpus.items())},
        "reasons": [[g, m, r] for (g, m), r in sorted(reasons.items())],
        "unavailable": unavailable,
    }
    if cuda_devices:
        out["cuda_devices"] = cuda_devices
    return out


def _header(
    gpus: dict[int, dict[str, Any]],
    reasons: dict[tuple[int, str], str],
    unavailable: str,
    period_s: float | None,
    source: str = "live",
    cuda_devices: dict[str, dict[str, Any]] | None = None,
) -> bytes:
    return orjson.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "created_ns": time.time_ns(),
            "source": source,
            "period_s": period_s,
            "metrics": list(METRIC_NAMES),
            **_state_json(gpus, reasons, unavailable, cuda_devices),
        },
        default=str,
    )


def _row_lines(time_ns: np.ndarray, gpu: np.ndarray, values: np.ndarray) -> bytes:
    out = bytearray()
    for t, g, row in zip(time_ns.tolist(), gpu.tolist(), values.tolist(), strict=True):
        rec: dict[str, Any] = {"t": t, "gpu": g}
        for m, v in zip(METRIC_NAMES, row, strict=True):
            if v == v:  # NaN is "not available": absent from the line
                rec[m] = v
        out += orjson.dumps(rec)
        out += b"\n"
    return bytes(out)


def write_jsonl(samples: Samples, path: str | os.PathLike[str]) -> Path:
    """Write a :class:`Samples` to ``path`` in the format above; returns the path."""
    p = Path(path)
    f = samples.frame
    with p.open("wb") as fh:
        fh.write(
            _header(
                samples.gpus,
                samples.reasons,
                samples.unavailable,
                None,
                samples.source,
                samples.cuda_devices,
            )
        )
        fh.write(b"\n")
        values = f[list(METRIC_NAMES)].to_numpy(dtype=np.float64)
        fh.write(
            _row_lines(
                f["time_ns"].to_numpy(dtype=np.int64), f["gpu"].to_numpy(dtype=np.int64), values
            )
        )
    return p


# -- reading -------------------------------------------------------------------------------


@dataclass
class _State:
    time_ns: int
    gpus: dict[int, dict[str, Any]]
    reasons: dict[tuple[int, str], str]
    unavailable: str
    cuda_devices: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Recording:
    """A parsed sample file: rows in time order and the state timeline."""

    path: Path
    time_ns: np.ndarray
    gpu: np.ndarray
    values: np.ndarray
    states: list[_State] = field(default_factory=list)
    period_s: float | None = None

    def state_at(self, time_ns: float) -> _State:
        times = [s.time_ns for s in self.states]
        i = max(0, bisect.bisect_right(times, time_ns) - 1)
        return self.states[i]


def _parse_state(path: Path, lineno: int, obj: dict[str, Any], t: int) -> _State:
    try:
        gpus = {int(k): dict(v) for k, v in (obj.get("gpus") or {}).items()}
        reasons = {(int(g), str(m)): str(r) for g, m, r in obj.get("reasons") or []}
        unavailable = str(obj.get("unavailable") or "")
        cuda = {str(k): dict(v) for k, v in (obj.get("cuda_devices") or {}).items()}
    except (TypeError, ValueError, AttributeError) as err:
        raise TraceError(str(path), f"line {lineno}: malformed gpus/reasons ({err})") from None
    return _State(t, gpus, reasons, unavailable, cuda)


#: The values a sample's time (int64 ns) and GPU index (NVML counts GPUs from 0) can take.
_I64 = range(-(2**63), 2**63)
_GPU_INDEX = range(0, 2**31)


def _is_int(v: object, valid: range) -> TypeGuard[int]:
    # bool is an int to Python, but `"t": true` is no time.
    return isinstance(v, int) and not isinstance(v, bool) and v in valid


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Parse a sample file; a clear :class:`~nbprof.TraceError` when it is not one."""
    p = Path(path)
    try:
        raw = read_regular(p)  # a FIFO would block, a device never end: refused
    except TraceError as err:
        raise TraceError(str(p), f"cannot read the sample file ({err.reason})") from None
    lines = raw.split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise TraceError(str(p), "empty file: no nbprof-nvml-samples header")
    try:
        header = orjson.loads(lines[0])
    except orjson.JSONDecodeError:
        raise TraceError(str(p), "line 1 is not JSON: not an nbprof sample file") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceError(str(p), f'line 1 is not an nbprof sample header (format "{FORMAT}")')
    if header.get("version") != VERSION:
        raise TraceError(
            str(p), f"sample format version {header.get('version')!r}; this nbprof reads {VERSION}"
        )
    states = [_parse_state(p, 1, header, -(2**63))]
    col = {m: k for k, m in enumerate(METRIC_NAMES)}
    times: list[int] = []
    gpus: list[int] = []
    rows: list[list[float]] = []
    nan = math.nan
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            if lineno == len(lines):
                logger.warning("%s: last line is truncated; ignored", p)
                break
            raise TraceError(str(p), f"line {lineno} is not JSON") from None
        if not isinstance(obj, dict) or not _is_int(obj.get("t"), _I64):
            raise TraceError(
                str(p), f'line {lineno}: expected an object with an integer "t" (ns since 1970)'
            )
        if "state" in obj:
            state = _parse_state(p, lineno, obj["state"] or {}, obj["t"])
            if not state.cuda_devices:  # a state line need not repeat the CUDA match
                state.cuda_devices = states[-1].cuda_devices
            states.append(state)
            continue
        g = obj.get("gpu")
        if not _is_int(g, _GPU_INDEX):
            raise TraceError(str(p), f'line {lineno}: expected an integer "gpu" (an NVML index)')
        row = [nan] * len(METRIC_NAMES)
        for key, v in obj.items():
            k = col.get(key)
            if k is None:
                continue  # "t", "gpu", or a metric a newer writer knows
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise TraceError(str(p), f"line {lineno}: {key} is not a number")
            row[k] = float(v)
        times.append(obj["t"])
        gpus.append(g)
        rows.append(row)
    t = np.asarray(times, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    values = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(METRIC_NAMES))
    period = header.get("period_s")
    return Recording(
        path=p,
        time_ns=t[order],
        gpu=np.asarray(gpus, dtype=np.int64)[order],
        values=values[order],
        states=states,
        period_s=float(period) if isinstance(period, int | float) else None,
    )


def replay(path: str | os.PathLike[str]) -> Samples:
    """Every sample in a recorded file, labelled ``"replay: <file name>"``.

    Reasons and GPUs are the file's final state (a GPU lost mid-run says so).
    """
    rec = read_recording(path)
    last = rec.states[-1]
    out = _to_samples(
        [Block(rec.time_ns, rec.gpu, rec.values)],
        last.gpus,
        last.reasons,
        last.unavailable,
        f"replay: {rec.path.name}",
    )
    out.cuda_devices = last.cuda_devices
    return out


# -- recording -----------------------------------------------------------------------------


class Recorder:
    """Appends every sampling pass of a sampler to a JSON-lines file, until closed.

    Rows are written on the sampler thread as they arrive (so a killed kernel still leaves
    a readable file); :meth:`close` unsubscribes and closes the file. A context manager.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        period_s: float = DEFAULT_PERIOD_S,
        *,
        sampler: Sampler | None = None,
    ) -> None:
        self.path = Path(path)
        self._sampler = sampler if sampler is not None else get_sampler()
        self._period_s = period_s
        self._lock = threading.Lock()
        self._fh: IO[bytes] | None = self.path.open("wb")
        self._header_written = False
        self.rows_written = 0
        self._sub: Subscription = self._sampler.subscribe(period_s, self._on_tick)

    def _write_header(self) -> None:
        gpus, reasons, unavailable = self._sampler.state()
        assert self._fh is not None
        self._fh.write(_header(gpus, reasons, unavailable, self._period_s) + b"\n")
        self._header_written = True

    def _on_tick(self, tick: Tick) -> None:
        with self._lock:
            if self._fh is None:
                return
            if not self._header_written:
                self._write_header()
            elif tick.state_changed:
                state = _state_json(*self._sampler.state())
                self._fh.write(orjson.dumps({"t": tick.time_ns, "state": state}, default=str))
                self._fh.write(b"\n")
            b = tick.block
            if len(b):
                self._fh.write(_row_lines(b.time_ns, b.gpu, b.values))
                self.rows_written += len(b)
            self._fh.flush()

    def close(self) -> Path:
        """Stop recording (idempotent); returns the file's path."""
        self._sub.close()
        with self._lock:
            if self._fh is not None:
                if not self._header_written:
                    self._write_header()
                self._fh.close()
                self._fh = None
        return self.path

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record(
    path: str | os.PathLike[str],
    period_s: float = DEFAULT_PERIOD_S,
    *,
    sampler: Sampler | None = None,
) -> Recorder:
    """Start recording the process-wide sampler to ``path``; close the result to stop.

    ``with nbprof.telemetry.record("run.jsonl"): train()``
    """
    return Recorder(path, period_s, sampler=sampler)


# -- replaying in real time ----------------------------------------------------------------


class ReplaySource:
    """Plays a recorded file in real time (or ``speed`` times faster) like a live sampler.

    Same reading interface as :class:`~nbprof.telemetry.Subscription` (``samples``,
    ``latest``, ``close``, ``on_tick``), so a gauge shows it the same way, labelled as a
    replay. ``speed=math.inf`` delivers everything at once. With ``autostart=False`` no
    thread runs and :meth:`advance` moves the cursor (deterministic tests).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        speed: float = 1.0,
        on_tick: OnTick | None = None,
        *,
        step_s: float = 0.1,
        monotonic: Callable[[], float] = time.monotonic,
        autostart: bool = True,
    ) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed!r}")
        self.recording = read_recording(path)
        self.speed = float(speed)
        self.on_tick = on_tick
        self.period_s = self.recording.period_s or DEFAULT_PERIOD_S
        label = f"×{speed:g}" if math.isfinite(speed) else "all at once"
        self.source = f"replay: {self.recording.path.name} ({label})"
        self._step_s = step_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cursor = 0  # rows delivered
        self._stop = threading.Event()
        self.done = threading.Event()
        self._thread: threading.Thread | None = None
        self.closed = False
        if len(self.recording.time_ns) == 0:
            self.done.set()
        if autostart:
            self.start()

    @property
    def first_ns(self) -> int:
        t = self.recording.time_ns
        return int(t[0]) if len(t) else 0

    def start(self) -> None:
        if self._thread is not None or self.closed:
            return
        self._thread = threading.Thread(target=self._run, name=REPLAY_THREAD_NAME, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0 = self._monotonic()
        try:
            while not self._stop.is_set():
                elapsed = self._monotonic() - t0
                self.advance(self.first_ns + elapsed * self.speed * 1e9)
                if self.done.is_set():
                    return
                self._stop.wait(self._step_s)
        except Exception:
            logger.exception("replay stopped on an unexpected error")

    def advance(self, to_ns: float) -> Tick | None:
        """Deliver every row with ``time_ns <= to_ns``; calls ``on_tick`` if any arrived."""
        rec = self.recording
        with self._lock:
            start = self._cursor
            if math.isinf(to_ns):
                end = len(rec.time_ns)
            else:
                end = int(np.searchsorted(rec.time_ns, int(to_ns), side="right"))
            end = max(end, start)
            self._cursor = end
            if end >= len(rec.time_ns):
                self.done.set()
        if end == start:
            return None
        block = Block(rec.time_ns[start:end], rec.gpu[start:end], rec.values[start:end])
        before = rec.state_at(int(rec.time_ns[start - 1])) if start else rec.states[0]
        after = rec.state_at(int(rec.time_ns[end - 1]))
        tick = Tick(int(rec.time_ns[end - 1]), block, before is not after or start == 0)
        cb = self.on_tick
        if cb is not None:
            try:
                cb(tick)
            except Exception:
                logger.exception("a replay subscriber failed")
        return tick

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until the whole file has been delivered."""
        return self.done.wait(timeout_s)

    def samples(self, since_ns: int | None = None) -> Samples:
        rec = self.recording
        with self._lock:
            end = self._cursor
        start = 0 if since_ns is None else int(np.searchsorted(rec.time_ns[:end], since_ns))
        state = rec.state_at(int(rec.time_ns[end - 1])) if end else rec.states[0]
        blocks = [Block(rec.time_ns[start:end], rec.gpu[start:end], rec.values[start:end])]
        out = _to_samples(blocks, state.gpus, state.reasons, state.unavailable, self.source)
        out.cuda_devices = state.cuda_devices
        return out

    def latest(self) -> Samples:
        return latest_of(self.samples())

    def close(self) -> None:
        """Stop playing (idempotent); samples delivered so far stay readable."""
        self.closed = True
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(5.0)

    def __enter__(self) -> ReplaySource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "FORMAT",
    "VERSION",
    "Recorder",
    "Recording",
    "ReplaySource",
    "read_recording",
    "record",
    "replay",
    "write_jsonl",
]
