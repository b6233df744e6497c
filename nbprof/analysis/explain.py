"""Why nvidia-smi's utilization differs from what the GPU did, in this run's numbers."""

from __future__ import annotations

import logging

from nbprof.analysis.device import Signals
from nbprof.analysis.model import compute_units, utilization_tool
from nbprof.analysis.verdict import primary
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)


def explain(trace: Trace, signals: list[Signals]) -> str:
    if not signals:
        return (
            "This trace holds no GPU kernel, memcpy or memset events, so there is no GPU "
            "utilization to explain: nbprof can only describe the CPU side of this capture."
        )
    s = primary(signals)
    m = s.metrics
    busy = m.kernel_busy_pct or 0.0
    tool = utilization_tool(m.vendor)
    parts = [
        f"{tool}'s utilization counts the time during which at least one kernel was "
        f"running, however little of the GPU it used: here kernels ran {busy:.1f}% of the "
        f"{m.gpu_span_us / 1e3:.1f} ms GPU span"
        + (
            f" (NVML itself reported {m.nvml_util_pct:.0f}% over the same window)."
            if m.nvml_util_pct is not None
            else "."
        )
    ]
    units = compute_units(m.vendor)
    if m.sm_efficiency_pct is not None:
        parts.append(
            f"It says nothing about how many of the {m.sm_count} {units} those kernels kept "
            f"busy: weighting each kernel by the share of the {units} its grid can fill gives "
            f"an efficiency of {m.sm_efficiency_pct:.1f}%"
            + (
                f", and the warps resident per {units[:-1]} average {m.occupancy_pct:.0f}% of "
                f"the maximum "
                f"(occupancy)."
                if m.occupancy_pct is not None
                else "."
            )
        )
    else:
        parts.append(
            f"How much of each {units[:-1]} the kernels used cannot be read from this trace "
            f"({m.basis['sm_efficiency_pct'].how})."
        )
    if m.sm_active_pct is not None:
        parts.append(f"The hardware counters measured SM activity of {m.sm_active_pct:.0f}%.")
    if m.vendor != "nvidia":
        parts.append(
            f"This is {'an AMD' if m.vendor == 'amd' else 'a non-NVIDIA'} GPU, so NVIDIA "
            f"Tensor Core figures do not apply"
            + (
                f"; matrix-core (MFMA) kernels take {m.tensor_core_pct:.0f}% of kernel time."
                if m.tensor_core_pct is not None
                else "."
            )
        )
    elif m.tensor_core_pct is None:
        parts.append(
            "Whether the kernels used Tensor Cores cannot be told from this trace "
            f"({m.basis['tensor_core_pct'].how})."
        )
    else:
        tc_line = (
            "Tensor Cores, which deliver most of the GPU's arithmetic"
            + (
                f" ({s.peak.tflops.get('bf16') or s.peak.tflops.get('fp16')} dense TFLOP/s "
                f"in 16-bit against {s.peak.tflops.get('fp32')} in plain FP32 on the "
                f"{s.peak.model}),"
                if s.peak is not None and s.peak.tflops.get("fp32")
                else ","
            )
            + " "
            + f"ran {m.tensor_core_pct:.1f}% of kernel time "
            f"(basis: {m.tensor_core_basis})"
        )
        if m.tensor_active_pct is not None:
            tc_line += f", and the hardware measured {m.tensor_active_pct:.0f}% tensor activity"
        parts.append(tc_line + ".")
    eff = m.sm_efficiency_pct
    tc = m.tensor_core_pct if m.vendor == "nvidia" else None
    parts.append(closing(tool, busy, eff, tc, units[:-1]))
    return " ".join(parts)


#: SM efficiency at or above this fraction of the kernels' busy share: while kernels ran,
#: they filled the SMs (the rest of the span is idle time, not empty SMs).
FILLED = 0.8


def closing(tool: str, busy: float, eff: float | None, tc: float | None, unit: str) -> str:
    """What the numbers add up to, each claim made only where this run's numbers hold it:
    the GPU mostly waiting, SMs left empty while kernels ran, SMs filled but Tensor Cores
    idle, or all three agreeing."""
    if busy < 50.0:
        return (
            f"Here even {tool}'s number is low ({busy:.0f}%): the GPU spent most of the span "
            "waiting for work, and the verdict and findings say on what."
        )
    if eff is not None and eff < FILLED * busy:
        return (
            f"So {tool} can read {busy:.0f}% while only {eff:.0f}% of the {unit} capacity was "
            "in use."
        )
    if tc is not None and tc < 50.0:
        filled = (
            f", with the {unit}s filled whenever kernels ran ({eff:.0f}% of the span, kernels "
            f"busy {busy:.0f}%),"
            if eff is not None
            else ""
        )
        return (
            f"So {tool} can read {busy:.0f}%{filled} while the Tensor Cores work only "
            f"{tc:.0f}% of kernel time: busy is not the same as fast."
        )
    return (
        f"Here utilization, {unit} efficiency and Tensor Core use broadly agree: kernels ran "
        f"{busy:.0f}% of the span and filled the {unit}s while they ran."
        if eff is not None
        else f"Here kernels ran {busy:.0f}% of the span: the GPU did real work for most of it."
    )
