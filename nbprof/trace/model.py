"""The in-memory trace: columnar tables, one per kind of event.

Every reader produces a :class:`Trace`; analysis and views only ever read one. Times are
microseconds (float64) *relative to* :attr:`Trace.origin_ns`, so nanosecond precision
survives even when the file holds epoch timestamps (1.7e15 µs loses sub-µs digits in a
float64).

Column contract (every frame has at least these, in this order; extra columns are allowed):

``kernels``  rank:int32, device:str, stream:int64, name:str, ts:float64, dur:float64,
             correlation:int64 (-1 unknown), grid:int64 (total blocks, -1 unknown),
             block:int64 (threads per block, -1 unknown), registers:int64 (-1),
             shared_mem:int64 (bytes, -1), occupancy:float64 (Kineto's
             "est. achieved occupancy %", NaN unknown), blocks_per_sm:float64 (NaN),
             launch_ts:float64 (start of the runtime/driver call that launched it, NaN),
             launch_name:str ("" unknown), op:str (innermost CPU op enclosing the
             launch, "" unknown), op_index:int64 (row in ``cpu_ops``, -1 unknown)
``memcpy``   rank, device, stream, name, ts, dur, correlation, bytes:int64 (-1),
             kind:str ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "" unknown),
             src:str / dst:str ("Pageable", "Pinned", "Device", "" unknown),
             launch_ts, launch_name, op, op_index
``memset``   rank, device, stream, name, ts, dur, correlation, bytes, launch_ts,
             launch_name, op, op_index
``runtime``  rank, pid:int64, tid:int64, name, ts, dur, correlation, cat:str
             ("cuda_runtime", "cuda_driver", "cuda_sync", ...)
``cpu_ops``  rank, pid, tid, name, ts, dur, external_id:int64 (-1), flops:float64 (NaN),
             input_dims:str (raw JSON text, "" none), input_types:str (raw JSON, ""),
             depth:int32 (nesting depth on its thread, 0 = top level)
``annotations`` rank, pid, tid, name, ts, dur, on_gpu:bool (gpu_user_annotation); also
             the DataLoader's ``python_function`` frame (``dataloader.py(N): __next__``)
``steps``    rank, step:int64, name, ts, dur (from ProfilerStep#N; none → empty frame)
``devices``  rank, device:str, name:str, vendor:str ("nvidia", "amd", "unknown"),
             sm_count:int64 (-1), compute_capability:str ("" unknown),
             total_memory:int64 (bytes, -1), max_threads_per_sm:int64 (-1)
``counters`` rank, device, name, ts, metric:str, value:float64 (per-kernel hardware
             counters, e.g. CUPTI range-profiler args; empty when absent)
``comms``    rank, pid, tid, name, ts, dur, source:str ("kernel", "op", "annotation"),
             device:str ("" for host records), correlation:int64 (-1), collective:str
             (PyTorch's "Collective name", "" unknown), pg:str ("Process Group Name" or
             "Process Group ID", "" unknown), pg_ranks:str (raw JSON text, ""),
             group_size:int64 (-1), seq:int64 (-1), in_nelems:int64 (-1),
             out_nelems:int64 (-1), dtype:str (""), input_dims:str, input_types:str (raw
             JSON, ""): what the trace says about each collective call, from the host
             records of it (``record_param_comms`` ops, ``nccl:all_reduce``-style
             annotations) and from the metadata newer PyTorch writes on collective kernels
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

KERNEL_COLUMNS: tuple[str, ...] = (
    "rank", "device", "stream", "name", "ts", "dur", "correlation", "grid", "block",
    "registers", "shared_mem", "occupancy", "blocks_per_sm", "launch_ts", "launch_name",
    "op", "op_index",
)  # fmt: skip
MEMCPY_COLUMNS: tuple[str, ...] = (
    "rank", "device", "stream", "name", "ts", "dur", "correlation", "bytes", "kind", "src",
    "dst", "launch_ts", "launch_name", "op", "op_index",
)  # fmt: skip
MEMSET_COLUMNS: tuple[str, ...] = (
    "rank", "device", "stream", "name", "ts", "dur", "correlation", "bytes", "launch_ts",
    "launch_name", "op", "op_index",
)  # fmt: skip
RUNTIME_COLUMNS: tuple[str, ...] = (
    "rank", "pid", "tid", "name", "ts", "dur", "correlation", "cat",
)  # fmt: skip
CPU_OP_COLUMNS: tuple[str, ...] = (
    "rank", "pid", "tid", "name", "ts", "dur", "external_id", "flops", "input_dims",
    "input_types", "depth",
)  # fmt: skip
ANNOTATION_COLUMNS: tuple[str, ...] = ("rank", "pid", "tid", "name", "ts", "dur", "on_gpu")
STEP_COLUMNS: tuple[str, ...] = ("rank", "step", "name", "ts", "dur")
DEVICE_COLUMNS: tuple[str, ...] = (
    "rank", "device", "name", "vendor", "sm_count", "compute_capability", "total_memory",
    "max_threads_per_sm",
)  # fmt: skip
COUNTER_COLUMNS: tuple[str, ...] = ("rank", "device", "name", "ts", "metric", "value")
COMM_COLUMNS: tuple[str, ...] = (
    "rank", "pid", "tid", "name", "ts", "dur", "source", "device", "correlation", "collective",
    "pg", "pg_ranks", "group_size", "seq", "in_nelems", "out_nelems", "dtype", "input_dims",
    "input_types",
)  # fmt: skip

TABLES: dict[str, tuple[str, ...]] = {
    "kernels": KERNEL_COLUMNS,
    "memcpy": MEMCPY_COLUMNS,
    "memset": MEMSET_COLUMNS,
    "runtime": RUNTIME_COLUMNS,
    "cpu_ops": CPU_OP_COLUMNS,
    "annotations": ANNOTATION_COLUMNS,
    "steps": STEP_COLUMNS,
    "devices": DEVICE_COLUMNS,
    "counters": COUNTER_COLUMNS,
    "comms": COMM_COLUMNS,
}


def empty_table(name: str) -> pd.DataFrame:
    """An empty frame with the contract's columns for table ``name``."""
    return pd.DataFrame({c: pd.Series(dtype=_DTYPES.get(c, "object")) for c in TABLES[name]})


_DTYPES: dict[str, str] = {
    "rank": "int32", "stream": "int64", "ts": "float64", "dur": "float64",
    "correlation": "int64", "grid": "int64", "block": "int64", "registers": "int64",
    "shared_mem": "int64", "occupancy": "float64", "blocks_per_sm": "float64",
    "launch_ts": "float64", "op_index": "int64", "bytes": "int64", "pid": "int64",
    "tid": "int64", "external_id": "int64", "flops": "float64", "depth": "int32",
    "on_gpu": "bool", "step": "int64", "sm_count": "int64", "total_memory": "int64",
    "max_threads_per_sm": "int64", "value": "float64", "group_size": "int64", "seq": "int64",
    "in_nelems": "int64", "out_nelems": "int64",
}  # fmt: skip


@dataclass
class Trace:
    """A loaded profiler trace (one file, or a folder of per-rank files).

    ``origin_ns`` is the wall-clock time (ns since the Unix epoch, the clock Kineto writes)
    of ``ts == 0``; ``None`` when the file gives no way to know it.
    """

    source: str
    event_count: int
    origin_ns: int | None
    kernels: pd.DataFrame = field(default_factory=lambda: empty_table("kernels"))
    memcpy: pd.DataFrame = field(default_factory=lambda: empty_table("memcpy"))
    memset: pd.DataFrame = field(default_factory=lambda: empty_table("memset"))
    runtime: pd.DataFrame = field(default_factory=lambda: empty_table("runtime"))
    cpu_ops: pd.DataFrame = field(default_factory=lambda: empty_table("cpu_ops"))
    annotations: pd.DataFrame = field(default_factory=lambda: empty_table("annotations"))
    steps: pd.DataFrame = field(default_factory=lambda: empty_table("steps"))
    devices: pd.DataFrame = field(default_factory=lambda: empty_table("devices"))
    counters: pd.DataFrame = field(default_factory=lambda: empty_table("counters"))
    comms: pd.DataFrame = field(default_factory=lambda: empty_table("comms"))
    #: Top-level keys of the file other than ``traceEvents`` (per rank for a folder).
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Plain-language notes the reader made (e.g. "no kernel events: CPU-only trace").
    notes: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> list[int]:
        frames = (self.kernels, self.devices, self.cpu_ops)
        found: set[int] = set()
        for f in frames:
            found.update(int(r) for r in f["rank"].unique())
        return sorted(found) or [0]

    def __repr__(self) -> str:
        return (
            f"Trace({self.source!r}, events={self.event_count}, kernels={len(self.kernels)}, "
            f"memcpy={len(self.memcpy)}, memset={len(self.memset)}, "
            f"cpu_ops={len(self.cpu_ops)}, ranks={len(self.ranks)})"
        )
