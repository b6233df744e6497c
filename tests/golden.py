"""Tiny hand-built Kineto traces for golden tests, and a plain reference reader.

``KinetoBuilder`` writes a trace whose every number a test can write down as a formula.
``simple_read`` is a deliberately naive reader (plain ``json`` and loops) used two ways:
as the independent implementation corpus tests compare nbprof against, and to build a
:class:`~nbprof.trace.model.Trace` when ``nbprof.trace.read`` is not importable.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nbprof.trace.model import TABLES, Trace, empty_table

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


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

    def runtime(self, name: str, ts: float, dur: float, *, cat: str = "cuda_runtime") -> int:
        corr = self._next_corr()
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": self.tid,
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
        nbytes: int,
        *,
        kind: str = "HtoD",
        src: str = "Pageable",
        dst: str = "Device",
        launch_ts: float | None = None,
        stream: int = 7,
        device: int = 0,
    ) -> None:
        lts = ts - 5.0 if launch_ts is None else launch_ts
        corr = self.runtime("cudaMemcpyAsync", lts, 2.0)
        self.events.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": f"Memcpy {kind} ({src} -> {dst})",
                "pid": device,
                "tid": stream,
                "ts": self.base_us + ts,
                "dur": dur,
                "args": {"device": device, "stream": stream, "correlation": corr, "bytes": nbytes},
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


# -- the plain reference reader --------------------------------------------------------
_KERNEL = {"kernel", "Kernel"}
_MEMCPY = {"gpu_memcpy", "Memcpy"}
_MEMSET = {"gpu_memset", "Memset"}
_RUNTIME = {"cuda_runtime", "Runtime", "cuda_driver", "cuda_sync"}
_CPU_OP = {"cpu_op", "Operator", "user_annotation"}


def load_events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        return {}, doc
    return doc, doc.get("traceEvents", [])


def _dims_prod(blocks: Any) -> int:
    if isinstance(blocks, list):
        return int(math.prod(int(b) for b in blocks))
    return int(blocks) if blocks is not None else -1


def simple_read(path: Path) -> Trace:
    """A naive single-file reader: enough of the Trace contract for analysis tests."""
    doc, events = load_events(path)
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    t0 = min((float(e["ts"]) for e in xs), default=0.0)
    base = doc.get("baseTimeNanoseconds")
    origin_ns = int(t0 * 1000) if t0 > 1e14 else (int(base + t0 * 1000) if base else None)
    rank = int((doc.get("distributedInfo") or {}).get("rank", 0))
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in TABLES}
    runtime_by_corr: dict[int, dict[str, Any]] = {}
    for e in xs:
        cat, a = e.get("cat"), e.get("args") or {}
        ts, dur = float(e["ts"]) - t0, float(e.get("dur", 0.0))
        if cat in _RUNTIME:
            r = {
                "rank": rank,
                "pid": int(e["pid"]) if isinstance(e["pid"], int) else -1,
                "tid": int(e["tid"]) if isinstance(e["tid"], int) else -1,
                "name": e["name"],
                "ts": ts,
                "dur": dur,
                "correlation": int(a.get("correlation", -1)),
                "cat": cat,
            }
            rows["runtime"].append(r)
            runtime_by_corr[r["correlation"]] = r
        elif cat in _CPU_OP:
            name = e["name"]
            if cat == "user_annotation" and name.startswith("ProfilerStep#"):
                rows["steps"].append(
                    {
                        "rank": rank,
                        "step": int(name.split("#")[1]),
                        "name": name,
                        "ts": ts,
                        "dur": dur,
                    }
                )
                continue
            if cat == "user_annotation":
                continue
            rows["cpu_ops"].append(
                {
                    "rank": rank,
                    "pid": int(e["pid"]) if isinstance(e["pid"], int) else -1,
                    "tid": int(e["tid"]) if isinstance(e["tid"], int) else -1,
                    "name": e["name"],
                    "ts": ts,
                    "dur": dur,
                    "external_id": int(a.get("External id", -1)),
                    "flops": float(a.get("flops", a.get("Flops", math.nan))),
                    "input_dims": json.dumps(a["Input Dims"]) if "Input Dims" in a else "",
                    "input_types": json.dumps(a["Input type"]) if "Input type" in a else "",
                    "depth": 0,
                }
            )
        elif cat in _KERNEL | _MEMCPY | _MEMSET:
            common = {
                "rank": rank,
                "device": str(a.get("device", e["pid"])),
                "stream": int(a.get("stream", e.get("tid", -1)) or 0),
                "name": e["name"],
                "ts": ts,
                "dur": dur,
                "correlation": int(a.get("correlation", -1)),
            }
            if cat in _KERNEL:
                occ = a.get("est. achieved occupancy %")
                bps = a.get("blocks per SM")
                common.update(
                    grid=_dims_prod(a["grid"]) if "grid" in a else -1,
                    block=_dims_prod(a["block"]) if "block" in a else -1,
                    registers=int(a.get("registers per thread", -1)),
                    shared_mem=int(a.get("shared memory", -1)),
                    occupancy=float(occ) if occ is not None else math.nan,
                    blocks_per_sm=float(bps) if bps is not None else math.nan,
                )
                rows["kernels"].append(common)
            elif cat in _MEMCPY:
                name = e["name"]
                kind = name.split()[1] if len(name.split()) > 1 else ""
                src = dst = ""
                if "(" in name and "->" in name:
                    inner = name[name.index("(") + 1 : name.rindex(")")]
                    src, dst = (s.strip() for s in inner.split("->"))
                common.update(bytes=int(a.get("bytes", -1)), kind=kind, src=src, dst=dst)
                rows["memcpy"].append(common)
            else:
                common.update(bytes=int(a.get("bytes", -1)))
                rows["memset"].append(common)
    frames: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        if name in ("kernels", "memcpy", "memset"):
            continue
        frames[name] = _frame(name, rows[name])
    cpu = frames["cpu_ops"]
    for gpu_table in ("kernels", "memcpy", "memset"):
        for r in rows[gpu_table]:
            rt = runtime_by_corr.get(r["correlation"])
            r["launch_ts"] = rt["ts"] if rt else math.nan
            r["launch_name"] = rt["name"] if rt else ""
            r["op"], r["op_index"] = _innermost_op(cpu, rt)
        frames[gpu_table] = _frame(gpu_table, rows[gpu_table])
    dev_rows = []
    for p in doc.get("deviceProperties", []) or []:
        name = str(p.get("name", ""))
        vendor = "amd" if ("AMD" in name or "Instinct" in name) else "nvidia"
        dev_rows.append(
            {
                "rank": rank,
                "device": str(p.get("id", 0)),
                "name": name,
                "vendor": vendor,
                "sm_count": int(p.get("numSms", -1)),
                "compute_capability": f"{p.get('computeMajor')}.{p.get('computeMinor')}",
                "total_memory": int(p.get("totalGlobalMem", -1)),
                "max_threads_per_sm": int(p.get("maxThreadsPerMultiprocessor", -1)),
            }
        )
    frames["devices"] = _frame("devices", dev_rows)
    return Trace(
        source=str(path), event_count=len(events), origin_ns=origin_ns, metadata={}, **frames
    )


def _innermost_op(cpu: pd.DataFrame, rt: dict[str, Any] | None) -> tuple[str, int]:
    if rt is None or cpu.empty:
        return "", -1
    m = cpu[
        (cpu["tid"] == rt["tid"])
        & (cpu["ts"] <= rt["ts"])
        & (cpu["ts"] + cpu["dur"] >= rt["ts"] + rt["dur"])
    ]
    if m.empty:
        return "", -1
    # The innermost op starts last among those enclosing the launch.
    idx = m["ts"].idxmax()
    return str(cpu.at[idx, "name"]), int(idx)


def _frame(name: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
    if not rows:
        return empty_table(name)
    empty = empty_table(name)
    df = pd.DataFrame(rows)
    for c in empty.columns:
        if c not in df:
            df[c] = pd.Series([None] * len(df))
    return df[list(empty.columns)].astype(empty.dtypes.to_dict())


def read_trace(path: Path) -> Trace:
    """``nbprof.trace.read`` when it exists, else the plain reader above."""
    try:
        from nbprof.trace import read
    except ImportError:
        return simple_read(path)
    return read(path)
