"""Colours, labels and small text helpers shared by the views (no metrics here).

Numbers are formatted by :mod:`nbprof.units`, verdicts named by :mod:`nbprof.vocab`.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from nbprof import units
from nbprof.errors import plain_text

#: Event class key -> (label, colour). The order fixes the class ids the timeline embeds.
#: One palette for light and dark themes, legend and bars alike: every colour keeps a
#: contrast of at least 2.9:1 against white and 3.2:1 against JupyterLab's dark background
#: (#111111) (tests/test_views_colours.py), and any two classes a GPU lane can show differ
#: by CIEDE2000 >= 10 with normal vision and simulated protanopia, deuteranopia and
#: tritanopia, painted over either background (tests/test_views_timeline_palette.py; the
#: GPU colours were searched for under those constraints, then named by hue: violet
#: Tensor Cores, blue compute, brown memory, red communication, greys for the unknown).
#: Green is not used for a class that reads as a problem.
CLASSES: dict[str, tuple[str, str]] = {
    "tensor_core": ("Tensor Core GEMM", "#8f4ca0"),
    "compute": ("other compute", "#3898ff"),
    "memory": ("memory-bound / elementwise", "#ba705c"),
    "communication": ("communication", "#d3000a"),
    # Kernels whose names give no evidence of what they do: neutral, not a verdict.
    "other": ("other (unrecognised kernel names)", "#8c928e"),
    "kernel": ("kernel (class unknown)", "#8f9a8c"),
    "copy_htod": ("memcpy HtoD", "#197875"),
    "copy_dtoh": ("memcpy DtoH", "#47ac0e"),
    "copy_dtod": ("memcpy DtoD / PtoP", "#0659ff"),
    "copy_other": ("memcpy (other)", "#728dac"),
    "memset": ("memset", "#bf2969"),
    "cpu_op": ("CPU op (top level)", "#5f83b3"),
    "runtime_launch": ("runtime: launch", "#8a7cc0"),
    "runtime_sync": ("runtime: synchronize", "#d9534f"),
    "runtime_other": ("runtime: other", "#8c8c8c"),
    "step": ("profiler step", "#8f8f8f"),
    "annotation": ("user annotation", "#6f9a6a"),
    "gpu_annotation": ("GPU user annotation", "#5e9a86"),
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

#: Idle gap cause (analysis' idle_gaps.cause) -> (label, colour of the shading). Gaps are
#: drawn hatched and translucent (see GAP_HATCH), so they never read as a bar of the same
#: hue, and the host-wait orange is far from the HtoD copies' teal.
GAP_CAUSES: dict[str, tuple[str, str]] = {
    "host_wait": ("GPU waited for the host", "#e08a00"),
    "kernel_wait": ("kernel-to-kernel gap", "#6a8caf"),
    "other": ("idle (other)", "#9a9a9a"),
}
#: Hatch pattern of each gap cause's shading (Bokeh hatch names), so causes differ by
#: texture as well as by colour.
GAP_HATCH: dict[str, str] = {"host_wait": "/", "kernel_wait": ".", "other": " "}

#: Severity badge colours, by meaning: red for high, orange for medium, slate (not green,
#: which reads as "fine") for low, grey for information. White text on each is >= 4.5:1.
SEVERITY_COLOURS: dict[str, str] = {
    "high": "#c62828",
    "medium": "#a75400",
    "low": "#4f6272",
    "info": "#5f6b76",
}

#: span_breakdown keys (analysis' disjoint shares of the GPU span) in words.
SPAN_PARTS: dict[str, str] = {
    "compute": "kernels",
    "exposed_comm": "exposed collectives",
    "possible_comm": "possibly communication, alone",
    "copy_only": "copies alone",
    "sync": "idle: host blocked, nothing queued",
    "dependency": "idle: work queued behind work outside the trace",
    "comm_wait": "idle: work queued behind a collective",
    "kernel_wait": "idle: between queued kernels",
    "capture": "idle: graph capture",
    "input": "idle: DataLoader",
    "setup": "idle: set-up calls",
    "host": "idle: host between kernels",
    "unknown": "idle: launch unknown",
}

#: Findings are listed most severe first; an unknown severity sorts last.
SEVERITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2, "info": 3}


#: Text safe for a terminal: nbprof's one escaping of names (nbprof.errors.plain_text).
plain = plain_text


_RETURN_TYPE = re.compile(r"^(?:(?:__global__|static|inline|void|auto)\s+)+")
_NAMESPACE = re.compile(r"\b(?:[A-Za-z_]\w*::)+")


_WHITESPACE = {ord(c): " " for c in "\t\n\x0b\x0c\r"}


def wrap(text: str, width: int, *, first: str = "", indent: str = "") -> list[str]:
    """``text`` as plain lines of at most ``width`` characters (at least one line)."""
    return textwrap.wrap(
        # Whitespace is wrapped over as textwrap always did; only the rest is escaped.
        plain(str(text).translate(_WHITESPACE)),
        width=width,
        initial_indent=first,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def clip(line: str, width: int) -> str:
    """``line`` cut to ``width`` characters, an ellipsis marking the cut."""
    return line if len(line) <= width else line[: width - 1] + "…"


def _split_top(s: str, sep: str) -> list[str]:
    """``s`` split at each ``sep`` outside <>, () and [] (template argument lists)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _fold(s: str) -> str:
    """Template arguments nested below the first level folded to "<…>"."""
    out, depth = [], 0
    for ch in s:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
            continue
        if ch == ">":
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


def short_name(name: str, limit: int = 72) -> str:
    """What a person reads a kernel by: its function name and first-level template
    arguments, without return type, namespaces, call arguments or deeper templates.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
    at::detail::Array<char*, 3> >(int, ...)`` reads ``vectorized_elementwise_kernel<4,
    CUDAFunctor_add<…>, Array<…>>``. Names of up to 40 characters are kept as they are.
    """
    s = " ".join(str(name).split())
    if len(s) <= 40:
        return s
    s = _RETURN_TYPE.sub("", s).replace("(anonymous namespace)::", "")
    # Call arguments of a C++ signature: the last top-level "(...)" group (a plain name
    # such as "Memcpy HtoD (Pageable -> Device)" keeps its parentheses).
    if s.endswith(")") and ("<" in s or "::" in s):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i].rstrip() or s
                break
    lt = s.find("<")
    base, args = (s, "") if lt < 0 or not s.endswith(">") else (s[:lt], s[lt + 1 : -1])
    base = _NAMESPACE.sub("", base).strip() or base.strip()
    if args:
        items = [_fold(_NAMESPACE.sub("", a)) for a in _split_top(args, ",")]
        kept: list[str] = []
        for item in items:
            if len(base) + sum(len(k) + 2 for k in kept) + len(item) + 6 > limit and kept:
                kept.append("…")
                break
            kept.append(item)
        s = f"{base}<{', '.join(kept)}>"
    else:
        s = base
    return s if len(s) <= limit else s[: limit - 1] + "…"


def fmt_evidence(v: Any) -> str:
    """A finding's evidence value: floats to 4 significant digits, mappings as a list."""
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, dict):  # e.g. {op name: share}: read as a list, not as Python
        return "; ".join(f"{k} ({fmt_evidence(x)})" for k, x in v.items())
    return str(v)


def fmt_breakdown(parts: dict[str, float], *, least: float = 0.05) -> str:
    """The span breakdown as "kernels 59.4% · idle: DataLoader 28.5% · …", largest first;
    shares under ``least`` percent are left out."""
    items = sorted(((v, k) for k, v in parts.items() if v >= least), reverse=True)
    return " · ".join(f"{SPAN_PARTS.get(k, k)} {units.pct(v)}" for v, k in items) or units.NA


def fmt_copy(c: dict[str, Any]) -> str:
    """One copy kind as "12 copies, 115.6 MB at 10.1 GB/s"."""
    n = int(c["count"])
    rate = f" at {units.bandwidth(c['gbps'])}" if c.get("gbps") is not None else ""
    size = units.size(c["bytes"]) if c.get("bytes") is not None else "bytes unknown"
    return f"{n:,} cop{'y' if n == 1 else 'ies'}, {size}{rate}"
