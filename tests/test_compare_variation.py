"""A change within the run-to-run variation is no change, and a FLOP rate that speaks for a
sliver of the GPU's work is not judged: hand-built pairs with the test's own arithmetic,
then two traces of one workload from the corpus."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from golden import KinetoBuilder

import nbprof
from nbprof.analysis.compare import FLOP_COVER_PCT
from nbprof.views.compare import judgement

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
STEP_US = 1000.0


def steps_run(tmp_path: Path, name: str, kernel_us: list[float]) -> Path:
    """One ProfilerStep of 1 ms per value, each launching one kernel of that length 10 µs
    after the step starts."""
    b = KinetoBuilder()
    for i, us in enumerate(kernel_us):
        s = i * STEP_US
        b.step(i + 1, s, STEP_US)
        b.kernel(ADD, s + 10, us, launch_ts=s + 2)
    return b.write(tmp_path, f"{name}.json")


def welch_same(b: list[float], a: list[float]) -> bool:
    """|mean a − mean b| < 2 standard errors of the difference (Welch)."""
    se = math.sqrt(statistics.variance(b) / len(b) + statistics.variance(a) / len(a))
    return abs(statistics.mean(a) - statistics.mean(b)) < 2 * se


# Two runs of one workload: the kernel's length wanders from step to step.
RUN_A = [400.0, 500.0, 450.0, 550.0, 420.0, 480.0]
RUN_B = [410.0, 520.0, 440.0, 540.0, 460.0, 470.0]
# The workload changed: every kernel 300 µs longer.
RUN_C = [d + 300.0 for d in RUN_A]


def _busy_per_step(kernel_us: list[float]) -> list[float]:
    # Each step's GPU piece runs from its kernel's start to the next step's: 1000 µs, of
    # which the kernel ran its length; the last step has no next one and is left out.
    return [d / STEP_US * 100 for d in kernel_us[:-1]]


def test_a_change_within_the_step_to_step_variation_is_no_change(tmp_path: Path) -> None:
    a, b = steps_run(tmp_path, "a", RUN_A), steps_run(tmp_path, "b", RUN_B)
    m = nbprof.compare(a, b).diff.metric("kernel_busy_pct")
    # Whole runs: 2,800 and 2,840 µs of kernels over spans of 5,480 and 5,470 µs.
    assert m.before == pytest.approx(2800 / (5000 + 480) * 100)
    assert m.after == pytest.approx(2840 / (5000 + 470) * 100)
    assert m.delta > 0.05  # visible at the precision shown ...
    # ... but per step 40-55% either way: well inside two standard errors.
    assert welch_same(_busy_per_step(RUN_A), _busy_per_step(RUN_B))
    assert m.within_noise is True and m.better is None and judgement(m) == "same"


def test_a_change_beyond_the_variation_is_judged(tmp_path: Path) -> None:
    a, c = steps_run(tmp_path, "a", RUN_A), steps_run(tmp_path, "c", RUN_C)
    cmp = nbprof.compare(a, c)
    m = cmp.diff.metric("kernel_busy_pct")
    assert not welch_same(_busy_per_step(RUN_A), _busy_per_step(RUN_C))
    assert m.within_noise is False and m.better is True and judgement(m) == "better"
    text = " ".join(cmp.text().split())
    assert "within the step-to-step variation (under two standard errors" in text


def test_without_two_whole_steps_nothing_is_tested_and_the_legend_says_so(
    tmp_path: Path,
) -> None:
    a = steps_run(tmp_path, "a", RUN_A[:2])
    c = steps_run(tmp_path, "c", RUN_C[:2])
    cmp = nbprof.compare(a, c)
    m = cmp.diff.metric("kernel_busy_pct")
    assert m.within_noise is None and m.better is True  # one whole step each: untested
    text = " ".join(cmp.text().split())
    assert "judged at the precision shown only, with too few whole steps" in text
    assert "variation: kernels busy (nvidia-smi), GPU busy incl. copies, memsets," in text


def flops_run(tmp_path: Path, name: str, mm_us: float, other_us: float) -> Path:
    """Two 2 ms steps, each an aten::mm (1024x1024 by 1024x1024 in bf16: 2.1 GFLOP)
    launching a GEMM of ``mm_us``, then ``other_us`` of an elementwise kernel no op
    counts FLOPs for."""
    b = KinetoBuilder()
    dims = [[1024, 1024], [1024, 1024]]
    for i in range(2):
        s = i * 2000.0
        b.step(i + 1, s, 2000.0)
        b.cpu_op("aten::mm", s + 1, 2, dims=dims, types=["c10::BFloat16"] * 2)
        b.kernel(GEMM, s + 10, mm_us, launch_ts=s + 2)
        b.kernel(ADD, s + 10 + mm_us, other_us, launch_ts=s + 4)  # after the mm returned
    return b.write(tmp_path, f"{name}.json")


def test_a_flop_rate_covering_a_sliver_of_kernel_time_is_not_judged(tmp_path: Path) -> None:
    # The GEMM is 10 µs of 1,000 µs of kernel time per step: FLOPs known for 1.0% of it.
    before = flops_run(tmp_path, "before", 10.0, 990.0)
    after = flops_run(tmp_path, "after", 8.0, 900.0)
    cmp = nbprof.compare(before, after)
    m = cmp.diff.metric("achieved_tflops")
    cover = cmp.diff.metric("flops_coverage_pct")
    assert cover.before == pytest.approx(10 / 1000 * 100)
    assert cover.after == pytest.approx(8 / 908 * 100)
    assert cover.before < FLOP_COVER_PCT
    # Same FLOPs over a shorter span: the rate rises, which is not "better" here.
    assert m.after > m.before and m.better is None and judgement(m) == ""
    assert m.note == (
        "before: FLOPs known for 1.0% of kernel time; after: FLOPs known for 0.9% of kernel time"
    )
    text = " ".join(cmp.text().split())
    assert "achieved TFLOP/s not judged: before: FLOPs known for 1.0% of kernel time" in text
    assert (
        cmp.to_json()["metrics"][
            [x["name"] for x in cmp.to_json()["metrics"]].index("achieved_tflops")
        ]["note"]
        == m.note
    )


def test_a_flop_rate_covering_most_kernel_time_is_judged(tmp_path: Path) -> None:
    # The GEMM is 600 of 1,000 µs, then 400 of 800: FLOPs known for 60% and 50%.
    before = flops_run(tmp_path, "before", 600.0, 400.0)
    after = flops_run(tmp_path, "after", 400.0, 400.0)
    m = nbprof.compare(before, after).diff.metric("achieved_tflops")
    assert m.note == "" and m.better is True


# -- two traces of one workload, from the corpus ------------------------------------------

RESNET = "kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
RESNET_4 = "kineto-tbplugin__resnet50_num_workers_4__worker0.1623212756351.pt.trace.json.gz"
_GPU = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def cut(doc: dict[str, Any], first: int, last: int, path: Path) -> Path:
    """The trace's ProfilerSteps ``first`` to ``last`` (0-based, inclusive) as a trace of
    their own: the host events inside them, the GPU work their launches started, every
    metadata event."""
    ev = doc["traceEvents"]
    steps = sorted(
        (
            e
            for e in ev
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
        ),
        key=lambda e: e["ts"],
    )
    t0, t1 = steps[first]["ts"], steps[last]["ts"] + steps[last]["dur"]
    keep, launched = [], set()
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in _GPU:
            continue
        if e.get("ph") in ("X", "f", "s") and not t0 <= float(e["ts"]) < t1:
            continue
        keep.append(e)
        corr = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and corr is not None:
            launched.add(corr)
    keep += [
        e
        for e in ev
        if e.get("ph") == "X"
        and e.get("cat") in _GPU
        and (e.get("args") or {}).get("correlation") in launched
    ]
    path.write_text(json.dumps({**doc, "traceEvents": keep}))
    return path


@pytest.mark.corpus
def test_corpus_two_halves_of_one_run_show_no_change(corpus: Path, tmp_path: Path) -> None:
    """ResNet-50 on a V100, steps of 176.1, 174.0, 176.9 ms and 181.3, 176.5, 164.3 ms: the
    same workload twice. Every metric moves a little (kernels < 10 µs 62.4% -> 62.4%, kernels
    busy 62.4% -> 63.4%), none beyond the variation between steps."""
    with gzip.open(corpus / RESNET, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    first = cut(doc, 0, 2, tmp_path / "first.json")
    second = cut(doc, 3, 5, tmp_path / "second.json")
    d = nbprof.compare(first, second).diff
    assert d.step_time.change == "within_noise"
    moved = [m for m in d.metrics if m.delta is not None and abs(m.delta) > 0]
    assert len(moved) > 10
    judged = [(m.name, m.before, m.after) for m in d.metrics if m.better is not None]
    assert judged == []
    busy = d.metric("kernel_busy_pct")
    assert busy.within_noise is True and busy.delta is not None and busy.delta > 0.5


@pytest.mark.corpus
def test_corpus_dataloader_fix_is_judged_and_the_noise_is_not(corpus: Path) -> None:
    """num_workers 0 -> 4: the DataLoader's idle share falls from 28.5% to 0.3% of the
    span, far beyond its step-to-step spread; the share of kernels under 10 µs (62.3% ->
    62.6%) moves less than its own (46.5% in the first step, about 62.5% in the others)."""
    cmp = nbprof.compare(corpus / RESNET, corpus / RESNET_4)
    d = cmp.diff
    inp = d.metric("span_input_pct")
    assert inp.better is True and inp.within_noise is False
    short = d.metric("short_kernel_pct")
    assert short.delta is not None and short.delta > 0.05
    assert short.within_noise is True and judgement(short) == "same"


@pytest.mark.corpus
def test_corpus_dlrm_ranks_flop_rates_are_not_judged(corpus: Path) -> None:
    """Two DLRM ranks of one job: their FLOP-counted ops (the MLPs' addmm) launch 4.5% and
    1.6% of kernel time; embedding lookups and all-to-alls, the rest, have no FLOP count."""
    ranks = sorted((corpus / "param__dlrm_kineto_8ranks").glob("*.json.gz"))
    d = nbprof.compare(ranks[2], ranks[3]).diff
    m = d.metric("achieved_tflops")
    assert m.before is not None and m.after is not None and m.before != m.after
    assert m.better is None and m.note.startswith("before: FLOPs known for 4.5% of kernel time")
