"""nbprof's vocabulary: each verdict declared once, with every word the views say it in.

A verdict (the ``bottleneck`` of schema ``nbprof.analysis/1``) is one :class:`Term`: its
name, the label a panel or report heads it with, the short form of a table column, the
phrase of a sentence ("the GPU is now ..."), its tag colour, and the metric that measures
it (what a comparison watches to say whether it went away). The type, the rules'
tables, the views and docs/json.md all read these records, so adding a verdict means one
record here and its rule in :mod:`nbprof.analysis.verdict`; tests/test_vocab.py fails
while any part lacks it.

:data:`STALLS` are the idle and exposed causes of the GPU span that decide a verdict on
their own (see :mod:`nbprof.analysis.verdict`), in the order the rules break ties in.

Importing this module imports nothing else of nbprof's, so anything may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The verdict's name as the JSON spells it: one per :data:`VERDICTS` record, in order
#: (a test ties the two).
Bottleneck = Literal[
    "compute_bound", "memory_bound", "host_bound", "launch_bound", "input_bound",
    "sync_bound", "transfer_bound", "communication_bound", "idle", "insufficient_gpu_work",
    "cpu_only",
]  # fmt: skip


@dataclass(frozen=True)
class Measure:
    """What measures a verdict: a metric of ``nbprof.compare/1`` and how a comparison's
    summary says it moved (``{b}``: the value, ``{how}``: "before and X after" or "in
    both")."""

    metric: str
    moved: str


#: The measure of any verdict: how much of the GPU span kernels ran. A comparison falls
#: back on it when a verdict's own measure did not move.
KERNEL_BUSY = Measure("kernel_busy_pct", "kernels ran {b} of the GPU span {how}")


@dataclass(frozen=True)
class Term:
    """One verdict and the words for it."""

    name: str
    #: Heads the panel and the reports: "Starved by the input pipeline".
    label: str
    #: A rank table's verdict column: "input".
    short: str
    #: Completes "the GPU is now ...": "starved by the input pipeline".
    phrase: str
    #: What it means, for docs/json.md.
    means: str
    #: Tag colour: the timeline's hues (memory-bound brown like memory-bound kernels, not
    #: green), dark enough for white text (at least 4.5:1, tests/test_views_colours.py).
    colour: str
    measure: Measure = KERNEL_BUSY


_VERDICTS = (
    Term(
        "compute_bound", "Compute-bound", "compute", "compute-bound",
        "the kernels themselves are the limit, on the arithmetic side (Tensor Cores, FLOPs)",
        "#7a22b8", Measure("tensor_core_pct", "Tensor Cores ran {b} of kernel time {how}"),
    ),
    Term(
        "memory_bound", "Memory-bound", "memory", "memory-bound",
        "the kernels themselves are the limit, on the memory side (DRAM bandwidth)",
        "#8a5526",
    ),
    Term(
        "host_bound", "Host-bound", "host", "host-bound",
        "the GPU waits on Python/framework work between kernels that are not tiny",
        "#a75400",
        Measure("span_host_pct", "the GPU waited on the host for {b} of the span {how}"),
    ),
    Term(
        "launch_bound", "Launch-bound", "launch", "launch-bound",
        "many tiny kernels: the launch calls themselves are the limit",
        "#a75400", Measure("launch_us_per_kernel", "each kernel's launch call took {b} {how}"),
    ),
    Term(
        "input_bound", "Starved by the input pipeline", "input",
        "starved by the input pipeline",
        "the GPU sits idle while the DataLoader fetches or the host preprocesses on the CPU",
        "#c62828",
        Measure("span_input_pct", "the GPU waited on the DataLoader for {b} of the span {how}"),
    ),
    Term(
        "sync_bound", "Stalled on synchronizations", "sync", "stalled on synchronizations",
        "the host blocks on the GPU (blocking device-to-host copies and .item() included)",
        "#c62828",
        Measure("span_sync_pct", "the GPU sat idle on syncs for {b} of the span {how}"),
    ),
    Term(
        "transfer_bound", "Dominated by host-device copies", "copies",
        "dominated by host-device copies", "for much of the span only copies run, no kernel",
        "#0a7d85", Measure("span_copy_only_pct", "only copies ran for {b} of the span {how}"),
    ),
    Term(
        "communication_bound", "Communication-bound", "comm", "communication-bound",
        "collectives run with no compute kernel beside them (exposed communication)",
        "#a3244c",
        Measure("exposed_comm_pct", "collectives ran alone for {b} of the span {how}"),
    ),
    Term(
        "idle", "GPU mostly idle", "idle", "mostly idle",
        "the GPU is idle for most of the span, in set-up calls, behind a dependency, or for "
        "no one cause", "#5f6b76",
    ),
    Term(
        "insufficient_gpu_work", "Too little GPU work to judge", "too little",
        "given too little work to judge",
        "too little GPU activity to judge (a CUDA-graph capture, a few microsecond kernels)",
        "#5f6b76",
    ),
    Term(
        "cpu_only", "CPU only (no GPU activity)", "cpu only",
        "unused (no GPU activity recorded)", "the trace holds no GPU activity", "#5f6b76",
    ),
)  # fmt: skip

#: Every verdict by name, in the order of :data:`Bottleneck`.
VERDICTS: dict[str, Term] = {t.name: t for t in _VERDICTS}

#: The colour of a verdict nbprof does not know (from another version's JSON).
UNKNOWN_COLOUR = "#5f6b76"


def term(name: str) -> Term:
    """The record of verdict ``name``; one spelled out from its name when it is unknown
    (a JSON document of another version)."""
    known = VERDICTS.get(name)
    if known is not None:
        return known
    words = name.replace("_", " ")
    return Term(name, words, words, words, words, UNKNOWN_COLOUR)


@dataclass(frozen=True)
class Stall:
    """A cause of lost GPU time (a ``span_breakdown`` key) that decides a verdict alone."""

    key: str
    verdict: Bottleneck
    #: The verdict's ``basis`` code (one of :data:`nbprof.analysis.model.VerdictBasis`).
    basis: str
    #: What it means, in a clause of the verdict's sentence.
    meaning: str


#: In the order ties between equal shares are broken in.
STALLS: tuple[Stall, ...] = (
    Stall(
        "exposed_comm", "communication_bound", "exposed_communication",
        "collectives ran with no compute kernel beside them",
    ),
    Stall(
        "input", "input_bound", "dataloader_gaps",
        "the GPU sat idle while the host ran the input pipeline (DataLoader, CPU preprocessing)",
    ),
    Stall(
        "sync", "sync_bound", "sync_gaps",
        "the GPU sat idle, nothing queued, while the host was blocked waiting on it",
    ),
    Stall("copy_only", "transfer_bound", "copy_time", "only copies ran"),
    Stall(
        "kernel_wait", "launch_bound", "kernel_gaps",
        "work was queued back to back but each kernel was too short to cover the GPU's own "
        "launch delay before the next",
    ),
    Stall(
        "host", "host_bound", "host_gaps",
        "nothing was queued while the host ran Python/framework code between kernels",
    ),
    Stall(
        "setup", "idle", "one_time_setup",
        "the host was in set-up calls (allocation, context creation, loading kernel code)",
    ),
    Stall(
        "possible_comm", "communication_bound", "exposed_communication",
        "only kernels that behave as communication kernels do ran (possibly communication)",
    ),
    Stall(
        "dependency", "idle", "queued_idle",
        "work was queued but waited on work outside the trace (nothing ran on any stream)",
    ),
)  # fmt: skip
