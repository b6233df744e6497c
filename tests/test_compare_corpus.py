"""nbprof.compare on real traces: the DataLoader pair, a trace against itself, two GPUs.

The pair is PyTorch Kineto's TensorBoard-plugin sample: ResNet50 training on a V100,
batch 32, with ``num_workers=0`` and with ``num_workers=4`` (6 ProfilerSteps each).
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean

import pytest
from golden import load_events

import nbprof
from nbprof.analysis.names import op_group

pytestmark = pytest.mark.corpus

WORKERS_0 = "kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
WORKERS_4 = "kineto-tbplugin__resnet50_num_workers_4__worker0.1623212756351.pt.trace.json.gz"
A100_ALEXNET = "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _step_durations(path: Path) -> list[float]:
    """ProfilerStep#N durations (µs), read with plain json, not nbprof's reader."""
    _, events = load_events(path)
    return [float(e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]


def _op_total(path: Path, prefix: str) -> float:
    _, events = load_events(path)
    return sum(float(e["dur"]) for e in events if str(e.get("name", "")).startswith(prefix))


@pytest.fixture(scope="module")
def dataloader_pair(corpus: Path) -> nbprof.Comparison:
    return nbprof.compare(corpus / WORKERS_0, corpus / WORKERS_4)


def test_the_dataloader_fix_input_bound_to_compute_bound(
    dataloader_pair: nbprof.Comparison, corpus: Path
) -> None:
    d = dataloader_pair.diff
    assert d.before.verdict.bottleneck == "input_bound"
    assert d.after.verdict.bottleneck == "compute_bound"
    # The raw files: steps of 176078, 173992, 176918, 181259, 176468, 164261 µs (mean
    # 174.83 ms) before and 181565, 123884, 126824, 126272, 163461, 116146 µs (mean
    # 139.69 ms) after: 1.25x less time per step.
    before, after = _step_durations(corpus / WORKERS_0), _step_durations(corpus / WORKERS_4)
    assert len(before) == len(after) == 6 == d.before.steps == d.after.steps
    st = d.step_time
    assert st.before_ms == pytest.approx(mean(before) / 1e3)
    assert st.after_ms == pytest.approx(mean(after) / 1e3)
    assert st.ratio == pytest.approx(mean(before) / mean(after))
    assert st.ratio == pytest.approx(1.25, abs=0.01)
    # 35 ms apart against a step-to-step standard error of about 11 ms: a real change.
    assert st.change == "faster" and st.within_noise is False
    # The medians (176.27 and 126.55 ms) are given beside it.
    assert st.median_ratio == pytest.approx(176.273 / 126.548, rel=1e-4)
    assert d.warnings == []  # same V100, same 6 steps, same batch
    assert (d.before.batch_size, d.after.batch_size) == (32, 32)


def test_the_dataloader_is_named_with_its_numbers(
    dataloader_pair: nbprof.Comparison, corpus: Path
) -> None:
    d = dataloader_pair.diff
    dl = d.metric("dataloader_pct")
    # The DataLoader's __next__ took 415.8 of the 1049 ms of steps before (39.6%), and
    # 8.5 of 838 ms after (1.0%).
    assert dl.before == pytest.approx(39.6, abs=0.1) and dl.after == pytest.approx(1.0, abs=0.1)
    assert dl.better is True
    # The GPU sat idle, nothing queued, while __next__ ran: 28.5% of the 996.5 ms span
    # (284 ms, within the 415.8 ms the DataLoader took) before, 0.35% of 801.6 ms after.
    waited = d.metric("span_input_pct")
    assert waited.before == pytest.approx(28.5, abs=0.05)
    assert waited.after == pytest.approx(0.35, abs=0.01) and waited.better is True
    loader_us = _op_total(corpus / WORKERS_0, LOADER)
    assert waited.before / 100 * d.before.device.gpu_span_us <= loader_us  # type: ignore[union-attr]
    summary = dataloader_pair.summary
    assert summary.startswith(
        "The GPU waited on the DataLoader for 28.5% of the span before and 0.3% after"
    )
    assert "the mean step went from 174.8 ms to 139.7 ms, 1.25x faster" in summary
    assert "the GPU is now compute-bound (it was starved by the input pipeline)" in summary
    # The biggest mover among the CPU ops is the DataLoader's __next__, matched across the
    # single-process and the multiprocessing iterator: 415.8 ms / 6 steps -> 8.5 ms / 6.
    top = d.ops.iloc[0]
    assert top["name"] == op_group(LOADER)
    loader_after = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    assert top["before_us"] == pytest.approx(_op_total(corpus / WORKERS_0, LOADER) / 6)
    assert top["after_us"] == pytest.approx(_op_total(corpus / WORKERS_4, loader_after) / 6)
    assert top["change"] == "decreased"
    busy = d.metric("kernel_busy_pct")
    assert busy.before == pytest.approx(59.4, abs=0.05) and busy.after == pytest.approx(
        74.2, abs=0.05
    )
    assert busy.better is True


def test_a_corpus_trace_against_itself(corpus: Path) -> None:
    cmp = nbprof.compare(corpus / WORKERS_0, corpus / WORKERS_0)
    d = cmp.diff
    for m in d.metrics:
        assert m.delta in (0.0, None) and m.better is None, m
    assert (d.kernels["delta_us"] == 0).all() and set(d.kernels["change"]) == {"unchanged"}
    assert (d.ops["delta_us"] == 0).all() and set(d.ops["change"]) == {"unchanged"}
    assert d.step_time.ratio == 1.0 and d.step_time.change == "same"
    assert cmp.summary == (
        "The GPU waited on the DataLoader for 28.5% of the span in both; the mean step is "
        "the same, 174.8 ms; the GPU is still starved by the input pipeline."
    )


def test_another_gpu_is_not_a_code_improvement(corpus: Path) -> None:
    cmp = nbprof.compare(corpus / WORKERS_4, corpus / A100_ALEXNET)
    assert any(w.startswith("Different GPUs") for w in cmp.warnings)
    assert any("Only the before run has ProfilerStep markers" in w for w in cmp.warnings)
    assert cmp.summary.startswith(
        "On different GPUs (Tesla V100-DGXS-32GB before, NVIDIA A100-PG509-200 after)"
    )
    assert "with the hardware change" in cmp.summary
