"""Tiny hand-built Kineto traces for golden tests.

``KinetoBuilder`` writes a trace whose every number a test can write down as a formula;
``load_events`` reads a trace with plain ``json`` for references computed independently
of nbprof's reader.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbprof.trace.model import Trace


@dataclass
class KinetoBuilder:
    """Builds a Kineto JSON trace event by event; times are µs from ``base_us``."""

    base_us: float = 1_700_000_000_000_000.0
    pid: int = 100
    tid: int = 100
    device_name: str = "NVIDIA H100 80GB HBM3"
    sm_count: int = 132
    major: int = 9
    minor: int = 0
    total_memory: int = 85_000_000_000
    with_devices: bool = True
    events: list[dict[str, Any]] = field(default_factory=list)
    _corr: int = 1000
    _ext: int = 1

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def cpu_op(
        self,
        name: str,
        ts: float,
        dur: float,
        *,
        tid: int | None = None,
        flops: float | None = None,
        dims: list[Any] | None = None,
        types: list[str] | None = None,
        cat: str = "cpu_op",
    ) -> int:
        self._ext += 1
        args: dict[str, Any] = {"External id": self._ext}
        if flops is not None:
            args["flops"] = flops
        if dims is not None:
            args["Input Dims"] = dims
        if types is not None:
            args["Input type"] = types
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": self.tid if tid is None else tid,
                "ts": self.base_us + ts,
                "dur": dur,
                "args": args,
            }
        )
        return self._ext

    def runtime(
        self, name: str, ts: float, dur: float, *, cat: str = "cuda_runtime", tid: int | None = None
    ) -> int:
        corr = self._next_corr()
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": self.tid if tid is None else tid,
                "ts": self.base_us + ts,
                "dur": dur,
                "args": {"correlation": corr},
            }
        )
        return corr

    def kernel(
        self,
        name: str,
        ts: float,
        dur: float,
        *,
        launch_ts: float | None = None,
        launch_dur: float = 2.0,
        stream: int = 7,
        device: int = 0,
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1),
        occupancy: float | None = None,
    ) -> None:
        """A kernel, launched by a ``cudaLaunchKernel`` at ``launch_ts`` (default ts - 5)."""
        lts = ts - 5.0 if launch_ts is None else launch_ts
        corr = self.runtime("cudaLaunchKernel", lts, launch_dur)
        args: dict[str, Any] = {
            "device": device,
            "stream": stream,
            "correlation": corr,
            "grid": list(grid),
            "block": list(block),
            "registers per thread": 32,
            "shared memory": 0,
        }
        if occupancy is not None:
            args["est. achieved occupancy %"] = occupancy
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": device,
                "tid": stream,
                "ts": self.base_us + ts,
                "dur": dur,
                "args": args,
            }
        )

    def memcpy(
        self,
        ts: float,
        dur: float,
        nbytes: int | None,
        *,
        kind: str = "HtoD",
        src: str = "Pageable",
        dst: str = "Device",
        launch_ts: float | None = None,
        launch_dur: float = 2.0,
        call: str = "cudaMemcpyAsync",
        stream: int = 7,
        device: int = 0,
    ) -> None:
        """A copy, issued by ``call`` at ``launch_ts`` (default ts - 5) lasting ``launch_dur``;
        ``nbytes=None`` writes no byte count."""
        lts = ts - 5.0 if launch_ts is None else launch_ts
        corr = self.runtime(call, lts, launch_dur)
        args: dict[str, Any] = {"device": device, "stream": stream, "correlation": corr}
        if nbytes is not None:
            args["bytes"] = nbytes
        self.events.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": f"Memcpy {kind} ({src} -> {dst})",
                "pid": device,
                "tid": stream,
                "ts": self.base_us + ts,
                "dur": dur,
                "args": args,
            }
        )

    def memset(self, ts: float, dur: float, nbytes: int, *, stream: int = 7) -> None:
        corr = self.runtime("cudaMemsetAsync", ts - 5.0, 2.0)
        self.events.append(
            {
                "ph": "X",
                "cat": "gpu_memset",
                "name": "Memset (Device)",
                "pid": 0,
                "tid": stream,
                "ts": self.base_us + ts,
                "dur": dur,
                "args": {"device": 0, "stream": stream, "correlation": corr, "bytes": nbytes},
            }
        )

    def stream_wait(self, ts: float, stream: int, wait_on_stream: int, *, device: int = 0) -> None:
        """A ``cudaStreamWaitEvent`` call at ``ts``, and the ``cuda_sync`` "Stream Wait Event"
        record newer Kineto writes with it (on the device's row, ``tid`` the waiting stream)."""
        corr = self.runtime("cudaStreamWaitEvent", ts, 1.0)
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Wait Event",
                "pid": device,
                "tid": stream,
                "ts": self.base_us + ts,
                "dur": 1.0,
                "args": {
                    "cuda_sync_kind": "Stream Wait Event",
                    "wait_on_stream": wait_on_stream,
                    "wait_on_cuda_event_record_corr_id": -1,
                    "stream": stream,
                    "correlation": corr,
                    "device": device,
                },
            }
        )

    def python_frame(self, name: str, ts: float, dur: float) -> None:
        """A ``with_stack=True`` Python frame (``python_function``), e.g.
        ``torchvision/transforms/transforms.py(95): __call__``."""
        self.cpu_op(name, ts, dur, cat="python_function")

    def step(self, n: int, ts: float, dur: float) -> None:
        self.cpu_op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def document(self) -> dict[str, Any]:
        if not self.with_devices:
            return {"schemaVersion": 1, "traceEvents": self.events}
        return {
            "schemaVersion": 1,
            "deviceProperties": [
                {
                    "id": 0,
                    "name": self.device_name,
                    "totalGlobalMem": self.total_memory,
                    "computeMajor": self.major,
                    "computeMinor": self.minor,
                    "maxThreadsPerMultiprocessor": 2048,
                    "numSms": self.sm_count,
                }
            ],
            "traceEvents": self.events,
        }

    def write(self, directory: Path, name: str = "trace.json") -> Path:
        path = Path(directory) / name
        path.write_text(json.dumps(self.document()))
        return path


# -- plain reading, for references computed independently of nbprof's reader ------------


def load_events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The document and its event list, by plain ``json`` (no nbprof code involved)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        return {}, doc
    return doc, doc.get("traceEvents", [])


def read_trace(path: Path) -> Trace:
    """A trace through nbprof's own reader, as ``nbprof.load`` does."""
    from nbprof.trace import read

    return read(path, progress=False)
