"""``nbprof demo``: show something real on any machine, in seconds, with no network.

What it shows (``auto``):

1. with a GPU (``torch.cuda.is_available()``): a small training workload, profiled live;
2. without one: a real GPU trace bundled with the package (by default
   :data:`DEFAULT_DATASET`), saying which trace it is, where it came from (repository,
   commit, licence) and on which GPU it was recorded. It is never downloaded.

``--dataset NAME`` diagnoses another registered trace (a registered trace that is not
bundled is read from ``NBPROF_TRACE_CORPUS`` or the cache, else downloaded once unless
``--offline``), and ``--cpu`` profiles a small model live on this machine's CPU, labelled as
a CPU profile: only when asked for, so it never stands in for a GPU's numbers.

It prints the text report and writes the standalone HTML dashboard (``-o PATH``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast

from nbprof import datasets
from nbprof.errors import NbprofError

if TYPE_CHECKING:
    from nbprof.job import Job
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

#: The demo's trace when it has no GPU: the finding a first look should see. nvidia-smi would
#: read 32%; the GPU idles more than half the time with work queued inside CUDA-graph
#: replays, and the host's ~150 ms a step in a device-to-host copy of a few hundred bytes
#: is not the cause: the copy waits on that same queue.
DEFAULT_DATASET = "dlrm-a100-queued-idle"
DEFAULT_OUTPUT = "nbprof-demo.html"
#: The width of the text report, which the demo's own lines match.
RULE_WIDTH = 88

Mode = Literal["auto", "gpu", "dataset", "cpu"]

CPU_LABEL = "LIVE CPU PROFILE (no GPU on this machine)"
CPU_EXPLAIN = (
    "This profiles a small torch model on the CPU: the numbers describe CPU work only, not a GPU."
)

#: Device -> (batch, image side) of the live workload. Small on the CPU so the demo takes
#: seconds on 2 cores; bigger on a GPU so kernels are not all launch overhead.
_SHAPES: dict[str, tuple[int, int]] = {"cuda": (128, 64), "cpu": (8, 32)}


@dataclass
class DemoResult:
    """What the demo did: which kind of profile, from where, and where the HTML went."""

    kind: Literal["gpu", "dataset", "cpu"]
    headline: str
    details: list[str]
    profile: Profile | Job
    html_path: Path
    seconds: float


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _workload(device: str) -> Any:
    """A small conv net, optimizer and batch; returns a callable running one training step."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, stride=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch, size = _SHAPES[device]
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    step()  # warm-up outside the profile: first-call allocations and kernel selection
    return step


def _workload_text(device: str, steps: int) -> str:
    batch, size = _SHAPES[device]
    return f"{steps} training steps of a small conv net (batch {batch}, {size}x{size} images)."


def _profile_live(device: str, steps: int) -> Profile:
    from nbprof.capture import profile

    step = _workload(device)
    with profile(sample=device == "cuda") as run:
        for _ in range(steps):
            step()
            run.step()
    if run.result is None:
        raise NbprofError("the live profile produced no result")
    return run.result


_SOURCE_WORDS: dict[str, str] = {
    "bundled": "bundled with nbprof",
    "corpus": datasets.CORPUS_ENV,
    "cache": "the download cache",
}


def _gpus_in(prof: Profile | Job) -> str:
    """The device names the trace itself records, e.g. ``8x Tesla V100-SXM2-32GB``."""
    if hasattr(prof, "ranks"):  # a multi-rank job: one row per rank
        names = [str(n) for n in prof.ranks["device_name"] if n]
    else:
        names = [d.name for d in prof.diagnosis.devices if d.name]
    if not names:
        return "no device names"
    counts = {n: names.count(n) for n in dict.fromkeys(names)}
    return ", ".join(f"{c}x {n}" if c > 1 else n for n, c in counts.items())


def _recorded_on(ds: datasets.Dataset, prof: Profile | Job) -> str:
    named = _gpus_in(prof)
    if named == ds.gpu:
        return f"Recorded on: {ds.gpu} (as the trace itself records)."
    return f"Recorded on: {ds.gpu} (the trace itself records {named})."


def _licence_line(ds: datasets.Dataset) -> str:
    text = datasets.licence_path(ds.name)
    if text is None:
        return f"Licence: {ds.licence} (the repository's own licence file at that commit)."
    return f"Licence: {ds.licence}; its text ships with nbprof: {text}."


def run(
    mode: Mode = "auto",
    *,
    dataset: str | None = None,
    output: str | os.PathLike[str] = DEFAULT_OUTPUT,
    download: bool = True,
    timeout: float = 10.0,
    steps: int = 5,
    out: TextIO | None = None,
) -> DemoResult:
    """Run the demo; prints to ``out`` (stdout by default) and writes the HTML dashboard.

    ``mode``: ``auto`` (GPU live, else the bundled default trace), or force one of
    ``gpu``, ``dataset``, ``cpu`` (a live CPU profile: only when asked for). ``dataset``
    names a registered trace (implies ``dataset`` mode under ``auto``). ``download=False``
    never uses the network (a bundled trace never does).
    """
    out = out if out is not None else sys.stdout
    t0 = time.perf_counter()
    no_gpu = False

    if mode == "auto":
        if dataset is not None:
            mode = "dataset"
        elif _cuda_available():
            mode = "gpu"
        else:
            # The default ships inside the package: no network, and a broken install is an
            # error that says so rather than a CPU profile passed off as the demo.
            no_gpu = True
            mode = "dataset"

    if mode == "gpu":
        if not _cuda_available():
            raise NbprofError("--gpu: torch.cuda.is_available() is False on this machine")
        prof: Profile | Job = _profile_live("cuda", steps)
        import torch

        kind: Literal["gpu", "dataset", "cpu"] = "gpu"
        headline = f"LIVE GPU PROFILE on {torch.cuda.get_device_name()}"
        details = [_workload_text("cuda", steps)]
    elif mode == "dataset":
        ds = datasets.info(dataset or DEFAULT_DATASET)
        p = datasets.path(ds.name, download=download, timeout=timeout)
        where = _SOURCE_WORDS.get(datasets.source(ds.name) or "", "downloaded just now")
        from nbprof.loading import load

        prof = load(p)
        prof.notes.append(f"Recorded trace {ds.name}: {ds.title}; from {ds.origin}.")
        kind = "dataset"
        headline = f"REAL GPU TRACE (recorded, not live): {ds.title}"
        details = [
            *(
                ["No GPU on this machine: this diagnoses a trace recorded on one."]
                if no_gpu
                else []
            ),
            f"Dataset {ds.name}"
            + (
                " (the default; `nbprof demo --list` shows the others)."
                if ds.name == DEFAULT_DATASET
                else "."
            ),
            _recorded_on(ds, prof),
            f"From: {ds.origin}.",
            _licence_line(ds),
            f"Read from: {p} ({where}).",
            ds.description,
        ]
    else:
        prof = _profile_live("cpu", steps)
        prof.notes.insert(0, f"{CPU_LABEL}. {CPU_EXPLAIN}")
        kind = "cpu"
        headline = CPU_LABEL
        details = [CPU_EXPLAIN, _workload_text("cpu", steps)]

    html_path = Path(output).expanduser().resolve()
    html_path.parent.mkdir(parents=True, exist_ok=True)
    report = prof.text()
    prof.to_html(html_path)
    seconds = time.perf_counter() - t0

    rule = "=" * RULE_WIDTH
    print(rule, file=out)
    print(textwrap.fill(f"nbprof demo: {headline}", RULE_WIDTH, subsequent_indent="    "), file=out)
    for line in details:
        print(_wrap(line), file=out)
    print(rule, file=out)
    print(report.rstrip(), file=out)
    if kind == "cpu":
        print(rule, file=out)
        print(_cpu_summary(cast("Profile", prof)), file=out)  # a CPU run is one Profile
    print(rule, file=out)
    print(f"Dashboard written to {html_path}", file=out)
    print("  (a standalone HTML file: open it in a browser; it works offline)", file=out)
    return DemoResult(kind, headline, details, prof, html_path, seconds)


def _wrap(line: str) -> str:
    # Paths and URLs stay whole (a broken path cannot be pasted).
    return textwrap.fill(
        line,
        RULE_WIDTH,
        initial_indent="  ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _cpu_summary(prof: Profile, top: int = 8) -> str:
    """What the CPU did: top-level ops by total time, straight from the trace's CPU ops."""
    ops = prof.cpu_ops
    if ops.empty:
        return "The CPU profile recorded no ops."
    top_level = ops[ops["depth"] == 0]
    total = top_level.groupby("name")["dur"].agg(["count", "sum"])
    total = total.sort_values("sum", ascending=False).head(top)
    lines = ["What the CPU did (top-level ops by total time, read from the trace; CPU, not GPU):"]
    lines.append(f"  {'total ms':>10} {'calls':>6}  op")
    for name, row in total.iterrows():
        label = str(name) if len(str(name)) <= 60 else str(name)[:59] + "…"
        lines.append(f"  {row['sum'] / 1000:>10.2f} {int(row['count']):>6}  {label}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nbprof demo",
        description=(
            "Show nbprof's report on something real: a small workload profiled live on a "
            "GPU; without one, a real GPU trace bundled with nbprof (no network). "
            "--dataset picks another registered trace, --cpu profiles the CPU live."
        ),
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--dataset",
        metavar="NAME",
        choices=datasets.names(),
        help="diagnose this registered real GPU trace (see --list)",
    )
    src.add_argument(
        "--cpu",
        action="store_true",
        help="profile a small model live on this machine's CPU (CPU numbers, not a GPU's)",
    )
    src.add_argument("--gpu", action="store_true", help="profile a small model on the GPU")
    p.add_argument(
        "-o",
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="PATH",
        help=f"where to write the HTML dashboard (default: ./{DEFAULT_OUTPUT})",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="never download a trace (bundled ones never are; this is for other --dataset NAMEs)",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="list the bundled and downloadable traces, and which are here; then exit",
    )
    p.add_argument("--steps", type=int, default=5, help="steps of the live workload (default 5)")
    return p


def _print_list(out: TextIO) -> None:
    """Bundled and downloadable traces, and which of them this machine has at hand."""
    all_names = datasets.names()
    groups = (
        ("Bundled (inside the nbprof package, never downloaded):",
         [n for n in all_names if datasets.info(n).bundled]),
        (f"Downloadable (pinned by commit and SHA-256; read from {datasets.CORPUS_ENV} when "
         f"set, else fetched once into {datasets.cache_dir()}):",
         [n for n in all_names if not datasets.info(n).bundled]),
    )  # fmt: skip
    print("Real GPU traces for `nbprof demo --dataset NAME`:", file=out)
    for title, group in groups:
        print(f"\n{title}", file=out)
        if not group:
            print("  (none in this version)", file=out)
        for name in group:
            ds = datasets.info(name)
            try:
                src = datasets.source(name)
                here = f"here: {_SOURCE_WORDS[src]}" if src else "not here: downloads on first use"
            except datasets.DatasetError as e:
                here = f"here but unusable: {e}"
            default = "  [default]" if name == DEFAULT_DATASET else ""
            print(f"  {name}{default}  ({ds.size / 1e6:.2f} MB; {here})", file=out)
            print(f"      {ds.title}; recorded on {ds.gpu}", file=out)
            print(f"      {ds.origin}", file=out)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nbprof demo``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.list:
        _print_list(sys.stdout)
        return 0
    mode: Mode = "gpu" if args.gpu else "cpu" if args.cpu else "auto"
    try:
        run(
            mode,
            dataset=args.dataset,
            output=args.output,
            download=not args.offline,
            steps=max(1, args.steps),
        )
    except NbprofError as e:
        print(f"nbprof demo: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
