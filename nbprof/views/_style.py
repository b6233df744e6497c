"""Colours, labels and small text helpers shared by the views (no metrics here)."""

from __future__ import annotations

import html
import math
import re
from typing import Any

#: Event class key -> (label, colour). The order fixes the class ids the timeline embeds.
#: Colours stay distinguishable for the common forms of colour blindness (after ColorBrewer
#: Paired/Dark2) and readable on a white canvas.
CLASSES: dict[str, tuple[str, str]] = {
    "tensor_core": ("Tensor Core GEMM", "#6a3d9a"),
    "compute": ("other compute", "#1f78b4"),
    "memory": ("memory-bound / elementwise", "#33a02c"),
    "communication": ("communication", "#e31a1c"),
    # Kernels whose names give no evidence of what they do: neutral, not a verdict.
    "other": ("other (unrecognised kernel names)", "#bdbdbd"),
    "kernel": ("kernel (class unknown)", "#8c8c8c"),
    "copy_htod": ("memcpy HtoD", "#ff7f00"),
    "copy_dtoh": ("memcpy DtoH", "#d4a017"),
    "copy_dtod": ("memcpy DtoD / PtoP", "#b15928"),
    "copy_other": ("memcpy (other)", "#a6761d"),
    "memset": ("memset", "#e7298a"),
    "cpu_op": ("CPU op (top level)", "#80b1d3"),
    "runtime_launch": ("runtime: launch", "#bebada"),
    "runtime_sync": ("runtime: synchronize", "#fb8072"),
    "runtime_other": ("runtime: other", "#d9d9d9"),
    "step": ("profiler step", "#b3b3b3"),
    "annotation": ("user annotation", "#ccebc5"),
    "gpu_annotation": ("GPU user annotation", "#a6dba0"),
}
CLASS_IDS: dict[str, int] = {k: i for i, k in enumerate(CLASSES)}

#: Which hover fields apply to an event class: kernels have a grid and an occupancy, copies
#: and memsets a size, runtime calls a category, CPU ops and markers only a name and a time.
TIP_KINDS: dict[str, str] = {
    **dict.fromkeys(("tensor_core", "compute", "memory", "communication", "other"), "kernel"),
    "kernel": "kernel",
    **dict.fromkeys(("copy_htod", "copy_dtoh", "copy_dtod", "copy_other", "memset"), "gpu"),
    **dict.fromkeys(("runtime_launch", "runtime_sync", "runtime_other"), "runtime"),
    **dict.fromkeys(("cpu_op", "step", "annotation", "gpu_annotation"), "cpu"),
}

#: Idle gap cause (analysis' idle_gaps.cause) -> (label, colour of the shading).
GAP_CAUSES: dict[str, tuple[str, str]] = {
    "host_wait": ("GPU waited for the host", "#fdae6b"),
    "kernel_wait": ("kernel-to-kernel gap", "#9ecae1"),
    "other": ("idle (other)", "#cccccc"),
}

BOTTLENECK_LABELS: dict[str, str] = {
    "compute_bound": "Compute-bound",
    "memory_bound": "Memory-bound",
    "host_bound": "Host-bound",
    "launch_bound": "Launch-bound",
    "input_bound": "Starved by the input pipeline",
    "sync_bound": "Stalled on synchronizations",
    "transfer_bound": "Dominated by host-device copies",
    "communication_bound": "Communication-bound",
    "idle": "GPU mostly idle",
    "insufficient_gpu_work": "Too little GPU work to judge",
    "cpu_only": "CPU only (no GPU activity)",
}

#: span_breakdown keys (analysis' disjoint shares of the GPU span) in words.
SPAN_PARTS: dict[str, str] = {
    "compute": "kernels",
    "exposed_comm": "exposed collectives",
    "copy_only": "copies alone",
    "sync": "idle: host blocked / just released",
    "dependency": "idle: work queued behind a dependency",
    "kernel_wait": "idle: between queued kernels",
    "capture": "idle: graph capture",
    "input": "idle: DataLoader",
    "setup": "idle: set-up calls",
    "host": "idle: host between kernels",
    "unknown": "idle: launch unknown",
}

#: Findings are listed most severe first; an unknown severity sorts last.
SEVERITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2, "info": 3}

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def esc(value: object) -> str:
    """HTML-escape anything (trace names, analysis text) for element content or attributes."""
    return html.escape(str(value), quote=True)


def plain(value: object) -> str:
    """Text safe for a terminal: control characters (ANSI escapes, bells) become '?'."""
    return _CONTROL.sub("?", str(value))


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_CALL_ARGS = re.compile(r"\((?:[^()]|\([^()]*\))*\)\s*$")


def short_name(name: str, limit: int = 90) -> str:
    """A kernel name with its C++ template and call arguments folded to "<…>" / "(…)"."""
    s = str(name)
    if len(s) <= limit:
        return s
    prev = None
    while prev != s:  # innermost first, so nested templates fold to one "<…>"
        prev = s
        s = _TEMPLATE_ARGS.sub("\x00", s)
    s = s.replace("\x00", "<…>")
    s = _CALL_ARGS.sub("(…)", s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def fmt_pct(v: float | None) -> str:
    return "n/a" if v is None or _nan(v) else f"{v:.1f} %"


def fmt_us(v: float | None) -> str:
    """A duration in µs, in the unit a person reads best."""
    if v is None or _nan(v):
        return "n/a"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3f} s"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.2f} ms"
    return f"{v:.1f} µs"


def fmt_bytes(v: float | None) -> str:
    if v is None or _nan(v) or v < 0:
        return "n/a"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(v) < 1000 or unit == "GB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1000
    return f"{v:.1f} TB"  # pragma: no cover - unreachable


def fmt_tflops(v: float) -> str:
    """TFLOP/s: two decimals without trailing zeros, two significant digits when tiny."""
    if abs(v) < 0.1:
        return f"{v:.2g}"
    return f"{v:,.2f}".rstrip("0").rstrip(".")


def fmt_flops_rate(tflops: float) -> tuple[str, str]:
    """(number, unit): GFLOP/s under 0.1 TFLOP/s, where "3.7e-05 TFLOP/s" would not read."""
    if abs(tflops) < 0.1:
        return f"{tflops * 1000:.2g}", "GFLOP/s"
    return fmt_tflops(tflops), "TFLOP/s"


def fmt_evidence(v: Any) -> str:
    """A finding's evidence value: floats to 4 significant digits, mappings as a list."""
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, dict):  # e.g. {op name: share}: read as a list, not as Python
        return "; ".join(f"{k} ({fmt_evidence(x)})" for k, x in v.items())
    return str(v)


def fmt_num(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None or _nan(v) else f"{v:,.{digits}f}"


def _nan(v: float) -> bool:
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return True


def fmt_breakdown(parts: dict[str, float], *, least: float = 0.05) -> str:
    """The span breakdown as "kernels 59.4% · idle: DataLoader 28.5% · …", largest first;
    shares under ``least`` percent are left out."""
    items = sorted(((v, k) for k, v in parts.items() if v >= least), reverse=True)
    return " · ".join(f"{SPAN_PARTS.get(k, k)} {v:.1f}%" for v, k in items) or "n/a"


def fmt_copy(c: dict[str, Any]) -> str:
    """One copy kind as "12 copies, 115.6 MB at 10.1 GB/s"."""
    n = int(c["count"])
    rate = f" at {c['gbps']:,.1f} GB/s" if c.get("gbps") is not None else ""
    size = fmt_bytes(c["bytes"]) if c.get("bytes") is not None else "bytes unknown"
    return f"{n:,} cop{'y' if n == 1 else 'ies'}, {size}{rate}"
