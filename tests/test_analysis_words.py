"""What the diagnosis says: a short headline with the deciding numbers beneath it, claims
made from this run's numbers only, GEMMs called compute-bound only where the shapes say so,
and unknown values said as unknown."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from golden import HEADLINE_WORDS, KinetoBuilder, assert_plain_verdict, read_trace

from nbprof.analysis import analyze
from nbprof.analysis.explain import FILLED, closing
from nbprof.analysis.model import Diagnosis

BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_kernel"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def diagnose(b: KinetoBuilder, tmp_path: Path) -> Diagnosis:
    d = analyze(read_trace(b.write(tmp_path)))
    assert_plain_verdict(d.verdict)
    return d


# -- GEMMs with few rows --------------------------------------------------------------------


def decode_step(shapes: bool) -> KinetoBuilder:
    """A decode step on an H100: 16 tokens through a 4096x4096 bf16 projection, 20 times
    (20 µs of GEMM each: 33.7 MB of weights and activations at 1.7 TB/s), each followed by
    a 5 µs elementwise kernel launched after the projection's op; back to back."""
    b = KinetoBuilder()
    bf = ["c10::BFloat16"] * 3
    for i in range(20):
        t = 100.0 + i * 25.0
        dims = [[16, 4096], [4096, 4096], [4096]] if shapes else None
        b.cpu_op("aten::linear", t - 100, 4, dims=dims, types=bf if shapes else None)
        b.kernel(BF16_GEMM, t, 20, launch_ts=t - 99, launch_dur=1, grid=(132, 1, 1))
        b.kernel(ELEMENTWISE, t + 20, 5, launch_ts=t - 95, launch_dur=1, grid=(132, 1, 1))
    return b


def test_a_decode_sized_gemm_with_shapes_is_memory_bound(tmp_path: Path) -> None:
    d = diagnose(decode_step(shapes=True), tmp_path)
    # 2·16·4096·4096 FLOPs over (16·4096 + 4096² + 4096 + 16·4096)·2 bytes (input, weight,
    # bias, output; the weight dominates): 15.9 FLOP/B, far below the H100's bf16 ridge
    # point of 989.5 TFLOP/s ÷ 3.35 TB/s = 295 FLOP/B.
    flops = 2 * 16 * 4096 * 4096
    nbytes = (16 * 4096 + 4096 * 4096 + 4096 + 16 * 4096) * 2
    r = d.ops_roofline
    assert r["intensity"].iloc[0] == pytest.approx(flops / nbytes)
    assert flops / nbytes < 989.5 / 3.35
    assert r["bound"].iloc[0] == "memory"
    v = d.verdict
    assert (v.bottleneck, v.confidence) == ("memory_bound", "high")
    assert "FLOP-counted ops below the roofline ridge point: 80% of kernel time" in v.text


def test_a_gemm_known_by_name_alone_is_not_called_compute_bound_firmly(tmp_path: Path) -> None:
    # The same kernels as a graph replay records them: no op, no shapes.
    v = diagnose(decode_step(shapes=False), tmp_path).verdict
    assert v.bottleneck == "compute_bound" and v.basis == "kernel_classes"
    assert v.confidence == "low"
    said = [f for f in v.facts if f.startswith("GEMM kernels known by name only")]
    assert said and "80% of kernel time" in said[0] and "cannot be told" in said[0]


def _without_shapes(doc: dict[str, Any]) -> dict[str, Any]:
    for e in doc["traceEvents"]:
        a = e.get("args")
        if a:
            for k in ("Input Dims", "Input type", "Concrete Inputs"):
                a.pop(k, None)
    return doc


@pytest.mark.corpus
def test_corpus_bert_small_gemms_are_memory_bound_by_their_shapes(
    corpus: Path, tmp_path: Path
) -> None:
    """BERT-small inference on an H100, 141 tokens: its bf16 projections (141x512 by
    512x512, ...) do 2·141·512·512 FLOPs on about 2·(2·141·512 + 512²) bytes, under 100
    FLOP/B against a ridge point of 295: bound by reading their weights."""
    path = corpus / "tracelens__bert-small-inference-h100.json.gz"
    d = analyze(read_trace(path))
    r = d.ops_roofline
    assert r["op"].tolist() == ["aten::linear"] and r["dtype"].tolist() == ["bf16"]
    assert r["intensity"].iloc[0] < 989.5 / 3.35 and r["bound"].iloc[0] == "memory"
    from nbprof.analysis import analyze_signals
    from nbprof.analysis.verdict import compute_vs_memory

    (s,) = analyze_signals(read_trace(path))[1]
    with_shapes = compute_vs_memory(s)
    assert (with_shapes.kind, with_shapes.confidence) == ("memory_bound", "high")
    # Without shapes (as a graph replay's trace is) the GEMM names alone would say
    # compute-bound: said, but not firmly, and with what the trace cannot tell.
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = _without_shapes(json.load(f))
    bare = tmp_path / "bert_no_shapes.json"
    bare.write_text(json.dumps(doc))
    (s2,) = analyze_signals(read_trace(bare))[1]
    blind = compute_vs_memory(s2)
    assert (blind.kind, blind.confidence) == ("compute_bound", "low")
    assert any("cannot be told" in f for f in blind.facts)


# -- headlines and facts --------------------------------------------------------------------


def _corpus_items(corpus: Path) -> list[Path]:
    return sorted(corpus.glob("*.json.gz")) + sorted(p for p in corpus.iterdir() if p.is_dir())


@pytest.mark.corpus
def test_corpus_headlines_are_one_short_sentence_with_the_numbers_beneath(corpus: Path) -> None:
    import nbprof

    for path in _corpus_items(corpus):
        v = nbprof.load(path).diagnosis.verdict  # a Profile's, or a folder's Job's
        assert_plain_verdict(v)
        assert len(v.summary.split()) <= HEADLINE_WORDS, path.name
        assert v.facts, path.name  # the deciding numbers are listed


@pytest.mark.corpus
def test_corpus_job_headline_says_who_the_others_wait_for(corpus: Path) -> None:
    import nbprof

    job = nbprof.load(corpus / "param__dlrm_kineto_8ranks")
    v = job.diagnosis.verdict
    # The host's 48% of the job's GPU time outweighs collectives alone (40%, 39 points of
    # it waiting for rank 7, which started its window late): host-bound, and the facts
    # name who the others wait for.
    assert v.summary.startswith("Host-bound across the job: for 48% of the job's GPU time")
    assert len(v.summary.split()) <= HEADLINE_WORDS
    facts = " | ".join(v.facts)
    assert "most of that for a rank that started late | rank 7 arrives last" in facts


def test_tensor_core_and_span_shares_are_labelled_apart(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(50):
        b.kernel(BF16_GEMM, i * 100.0, 60, launch_ts=i * 100.0 - 20, grid=(132, 1, 1))
        b.kernel(ELEMENTWISE, i * 100.0 + 60, 30, launch_ts=i * 100.0 - 19, grid=(132, 1, 1))
    v = diagnose(b, tmp_path).verdict
    tc = [f for f in v.facts if f.startswith("Tensor Core kernels")]
    busy = [f for f in v.facts if f.startswith("kernels busy")] or [v.summary]
    # 60 of every 90 µs of kernel time on Tensor Cores; kernels busy 90 of every 100 µs.
    assert tc == ["Tensor Core kernels: 67% of kernel time"]
    assert "90% of the span" in busy[0]


# -- claims from this run's numbers -----------------------------------------------------------


@pytest.mark.parametrize(
    ("busy", "eff", "tc", "says", "never"),
    [
        # Kernels ran 59% of the span and filled the SMs while they ran (58.5% > 0.8·59):
        # the SMs are said filled *while kernels ran*, never "well filled" over the span.
        (59.4, 58.5, 0.0, "filled whenever kernels ran (58% of the span", "broadly agree"),
        # SMs 30% used while kernels ran 90% of the span: no claim they were filled.
        (90.0, 30.0, 0.0, "only 30% of the SM capacity", "filled"),
        (95.0, 90.0, 80.0, "broadly agree", "only"),
        (30.0, 29.0, 90.0, "even nvidia-smi's number is low (30%)", "filled"),
    ],
)
def test_the_closing_claim_follows_the_numbers(
    busy: float, eff: float, tc: float, says: str, never: str
) -> None:
    text = closing("nvidia-smi", busy, eff, tc, "SM")
    assert says in text and never not in text
    assert "well filled" not in text


@pytest.mark.corpus
def test_corpus_explanations_claim_filled_sms_only_where_they_were(corpus: Path) -> None:
    for path in sorted(corpus.glob("*.json.gz")):
        d = analyze(read_trace(path))
        if not d.devices:
            continue
        m = max(d.devices, key=lambda x: x.gpu_span_us * (x.kernel_busy_pct or 0))
        busy, eff = m.kernel_busy_pct or 0.0, m.sm_efficiency_pct
        if "filled" in d.explanation:
            assert eff is not None and eff >= FILLED * busy, path.name
        assert "well filled" not in d.explanation, path.name
        if "broadly agree" in d.explanation:
            assert (m.tensor_core_pct or 0) >= 50 or m.vendor != "nvidia", path.name


# -- unknown is said as unknown -------------------------------------------------------------


def test_occupancy_kineto_did_not_compute_is_left_out(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(ELEMENTWISE, 0, 10, occupancy=50.0)
    b.kernel(ELEMENTWISE, 20, 30, occupancy=0.0)  # Kineto's "not computed"
    b.kernel(ELEMENTWISE, 60, 20, occupancy=100.0)
    m = diagnose(b, tmp_path).devices[0]
    assert m.occupancy_pct == pytest.approx((50 * 10 + 100 * 20) / (10 + 20))
    assert "1 more have 0" in m.basis["occupancy_pct"].how


def test_occupancy_never_computed_is_unknown_not_zero(tmp_path: Path) -> None:
    from nbprof.result import Profile
    from nbprof.views import panel

    b = KinetoBuilder()
    b.kernel(ELEMENTWISE, 0, 10, occupancy=0.0)
    b.kernel(ELEMENTWISE, 20, 30, occupancy=0.0)
    trace = read_trace(b.write(tmp_path))
    d = analyze(trace)
    m = d.devices[0]
    assert m.occupancy_pct is None
    assert m.basis["occupancy_pct"].how.startswith("not computed")
    html = panel.render(Profile(trace))
    assert "not computed" in html and "0.0 %" not in html.split("achieved occupancy")[1][:120]


def test_a_device_without_properties_says_unknown_not_a_question_mark(tmp_path: Path) -> None:
    from nbprof.result import Profile
    from nbprof.views import panel, text

    b = KinetoBuilder(with_devices=False)
    for i in range(30):
        b.kernel(ELEMENTWISE, i * 100.0, 50)
    p = Profile(read_trace(b.write(tmp_path)))
    html = panel.render(p)
    assert "(unknown SMs" in html and "?" not in html.split("nbp-device")[1].split("</summary>")[0]
    assert "unknown GPU" in text.render(p)


@pytest.mark.corpus
def test_corpus_triton_kernel_occupancy_was_not_computed(corpus: Path) -> None:
    # HTA's Triton example: one kernel, its est. achieved occupancy written as 0.
    d = analyze(read_trace(corpus / "hta__triton_example__triton_example.json.gz"))
    m = d.devices[0]
    assert m.occupancy_pct is None and m.basis["occupancy_pct"].how.startswith("not computed")
