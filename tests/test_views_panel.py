"""The diagnosis panel and the text report: verdict, numbers with their basis, findings."""

from __future__ import annotations

import re

import pytest
from views_data import HOSTILE, metrics, small_profile

from nbprof.analysis.model import Basis, Diagnosis, Verdict
from nbprof.views import panel, text


def test_verdict_is_the_headline() -> None:
    html = panel.render(small_profile())
    head = html.split("\n", 1)[0]
    assert 'class="nbp-verdict"' in head
    assert "Dominated by host-device copies" in head and "Copies dominate" in head


def test_four_cards_each_with_its_basis() -> None:
    html = panel.render(small_profile())
    cards = html.split('<div class="nbp-card">')[1:]
    assert len(cards) == 4
    expect = [
        ("nvidia-smi would report", "91.5", "read from the trace (union of kernel intervals"),
        ("SMs actually busy", "47.2", "estimated (grid size"),
        ("Tensor Cores working", "36.6", "estimated (kernel names)"),
        ("Achieved TFLOP/s", "123.2", "estimated (matmul FLOPs from input shapes"),
    ]
    for card, (q, v, basis) in zip(cards, expect, strict=True):
        assert q in card and f">{v}<" in card
        assert "<b>basis:</b> " + basis in card
    assert "of 989.0 peak" in cards[3] and "datasheet peak" in cards[3]


def test_every_secondary_number_carries_a_basis() -> None:
    html = panel.render(small_profile())
    rows = re.findall(r'<div title="basis: ([^"]*)"><span>([^<]*)</span> <span>([^<]*)<', html)
    assert len(rows) >= 10
    assert all(basis for basis, _, _ in rows)
    spans = re.findall(r'<span class="nbp-basis">· ([^<]*)</span>', html)
    assert len(spans) == len(rows)
    assert rows[0][1] == "GPU span" and spans[0] == "from trace"
    by_label = {label: basis for basis, label, _ in rows}
    assert by_label["GPU busy (kernels + copies + memsets)"] == (
        "read from the trace (kernels, memcpys and memsets)"
    )


def test_measured_sm_activity_replaces_the_estimate_when_sampled() -> None:
    p = small_profile()
    dm = p.diagnosis.devices[0]
    if not hasattr(dm, "sm_active_pct"):  # older model without the sampled fields
        return
    dm.sm_active_pct = 12.5
    dm.basis["sm_active_pct"] = Basis("measured", "NVML GPM SM activity, 10 samples")
    card = panel.render(p).split('<div class="nbp-card">')[2]
    assert ">12.5<" in card and "measured by hardware counters (NVML GPM" in card
    assert "from the trace: 47.2%" in card


def test_explanation_findings_with_fix_code_and_notes() -> None:
    p = small_profile(notes=["no GPU: CPU-only profile"])
    html = panel.render(p, extra_notes=["timeline note"])
    assert "Why these numbers differ" in html and "only 47.25 % of SMs" in html
    assert 'nbp-sev-high">high</span> Copies from pageable memory' in html
    assert "<code>pageable_memcpy_count</code> = 1" in html
    assert "<b>Fix:</b> Pin the host tensors" in html
    assert "<pre><code>loader = DataLoader(ds, pin_memory=True)" in html
    # high before info
    assert html.index("Copies from pageable") < html.index("A note")
    assert "<li>no GPU: CPU-only profile</li>" in html and "<li>timeline note</li>" in html


def test_partial_profile_after_an_exception_says_so() -> None:
    p = small_profile()
    p.error = ValueError("bad <b>input</b>")
    html = panel.render(p)
    assert "The profiled code raised an exception" in html
    assert "ValueError: bad &lt;b&gt;input&lt;/b&gt;" in html
    assert "raised ValueError" in text.render(p) and "partial" in text.render(p)


def test_one_block_per_device_later_ones_collapsed() -> None:
    p = small_profile()
    p.diagnosis.devices = [metrics(str(i), rank=i) for i in range(3)]
    html = panel.render(p)
    blocks = re.findall(r'<details class="nbp-device"( open)?><summary>rank (\d)', html)
    assert blocks == [(" open", "0"), (" open", "1"), ("", "2")]


def test_cpu_only_profile() -> None:
    p = small_profile(notes=["no CUDA: profiled the CPU only"])
    p.__dict__["diagnosis"] = Diagnosis(
        source={}, devices=[], verdict=Verdict("cpu_only", ""), findings=[]
    )
    html = panel.render(p)
    assert "CPU only (no GPU activity)" in html and "nbp-card" not in html
    assert "no CUDA: profiled the CPU only" in html
    out = text.render(p)
    assert "CPU only" in out and "no CUDA" in out


def test_analysis_failure_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbprof.result import Profile

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no")

    monkeypatch.setattr("nbprof.analysis.analyze", boom)
    p = Profile(small_profile().trace)
    assert "Analysis failed: RuntimeError: no" in panel.render(p)
    assert "Analysis failed: RuntimeError: no" in text.render(p)


def test_panel_escapes_everything_from_the_trace() -> None:
    html = panel.render(small_profile(hostile=True))
    for h in HOSTILE:
        assert h not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_text_report_content_and_width() -> None:
    out = text.render(small_profile())
    lines = out.splitlines()
    assert all(len(line) <= text.WIDTH for line in lines)
    assert lines[0].startswith("nbprof · hand-built.json")
    assert "Verdict: Dominated by host-device copies. Copies dominate" in out
    assert re.search(r"nvidia-smi would report\s+91\.5%", out)
    assert "basis: read from the trace (union of kernel intervals ÷ GPU span)" in out
    assert re.search(r"Tensor Cores working\s+36\.6%", out)
    assert re.search(r"FLOP/s achieved\s+123\.2 TFLOP/s of 989\.0 TFLOP/s peak", out)
    assert "[HIGH] Copies from pageable memory" in out and "fix: Pin the host tensors" in out
    assert "loader = DataLoader(ds, pin_memory=True)" in out
    assert "Top kernels" in out and "ncclDevKernel_AllReduce_Sum_f32_RING_LL" in out
    # every key number line is followed by its basis
    for i, line in enumerate(lines):
        if re.match(
            r"  (nvidia-smi would report|SMs actually busy|Tensor Cores working|FLOP/s achieved) ",
            line,
        ):
            assert lines[i + 1].strip().startswith("basis: ")


def test_text_report_neutralises_terminal_control_characters() -> None:
    p = small_profile()
    p.diagnosis.top_kernels.loc[0, "name"] = "evil\x1b[2J\x07kernel"
    out = text.render(p)
    assert "\x1b" not in out and "\x07" not in out and "evil\\x1b[2J\\x07kernel" in out


def test_missing_nvml_readings_are_explained() -> None:
    p = small_profile(samples=True)
    p.samples.reasons = {
        (0, "tensor_util"): "GPM needs Hopper or newer",
        (0, "sm_util"): "GPM needs Hopper or newer",
    }
    html = panel.render(p)
    assert (
        "Not sampled on GPU 0: SM activity, Tensor Core activity (GPM needs Hopper or newer)"
        in html
    )
    assert "Not sampled on GPU 0: SM activity" in text.render(p)
    p.samples.unavailable = "NVML library not found"
    assert "No NVML samples: NVML library not found" in text.render(p)


def test_long_unbroken_strings_wrap_inside_cards_and_tables() -> None:
    """A basis like "(xmma/wgmma/nvjet/884/1688/...)" has no space to break at."""
    css = panel.CSS.replace("\n", "")
    rule = re.search(r"([^{}]*)\{overflow-wrap:anywhere", css)
    assert rule is not None
    selectors = rule.group(1)
    for cls in (".nbp-card", ".nbp-kv", ".nbp-topk", ".nbp-verdict", ".nbp-finding"):
        assert f".nbprof {cls}" in selectors, cls
    assert "word-break:break-all" not in css  # breaks every word mid-way, not only long ones


def test_verdict_confidence_and_basis_are_shown_when_analysis_gives_them() -> None:
    p = small_profile()
    p.diagnosis.verdict = Verdict(
        "memory_bound",
        "64% of kernel time is in kernels nbprof cannot classify.",
        confidence="low",
        basis="kernel_classes",
    )
    html = panel.render(p)
    assert '<div class="nbp-conf"><b>low confidence</b> · decided by: kernel classes' in html
    out = text.render(p)
    assert "low confidence · decided by: kernel classes, from kernel names" in out


def test_verdicts_without_confidence_fields_still_render() -> None:
    class Old:  # a verdict from before analysis recorded confidence and basis
        bottleneck = "idle"
        summary = "GPU mostly idle."

    assert panel.confidence_text(Old()) == ("", "")
    p = small_profile()
    p.diagnosis.verdict = Old()  # type: ignore[assignment]
    assert "nbp-conf" not in panel.render(p)
    assert "confidence" not in text.render(p)


def test_other_class_has_a_neutral_colour_and_a_legend_entry() -> None:
    from nbprof.views._style import CLASSES

    label, colour = CLASSES["other"]
    assert label == "other (unrecognised kernel names)"
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    assert max(r, g, b) - min(r, g, b) < 16  # a grey: no hue to read as a class
    assert colour not in {c for k, (_, c) in CLASSES.items() if k != "other"}
    assert "other (unrecognised kernel names)" in panel.legend_html(["other", "memory"])


def test_amd_cards_name_matrix_cores_and_tiny_rates_read_in_gflops() -> None:
    p = small_profile()
    dm = p.diagnosis.devices[0]
    dm.vendor = "amd"
    dm.achieved_tflops = 3.7e-05
    html = panel.render(p)
    assert "Matrix cores working" in html and "Tensor Cores working" not in html
    assert ">0.0370<small> GFLOP/s" in html and "e-05" not in html


def test_a_tiny_rate_in_gflops_names_the_peak_unit_too() -> None:
    p = small_profile()
    dm = p.diagnosis.devices[0]
    dm.achieved_tflops, dm.peak_tflops = 0.018, 156.0
    assert ">18.0<small> GFLOP/s of 156.0 TFLOP/s peak" in panel.render(p)


def test_dict_evidence_reads_as_a_list_not_as_python() -> None:
    p = small_profile()
    p.diagnosis.findings[0].evidence = {"idle_cpu_work": {"aten::linear": 74.4, "<b>x</b>": 4.5}}
    html = panel.render(p)
    assert (
        "aten::linear (74.4); &lt;b&gt;x&lt;/b&gt; (4.5)" in html
        and "{" not in html.split("idle_cpu_work")[1].split("</div>")[0]
    )
    # The text report (nbprof analyze) reads it the same way.
    assert "idle_cpu_work=aten::linear (74.4); <b>x</b> (4.5)" in text.render(p)


def test_words_stay_apart_when_a_sanitiser_strips_the_styles() -> None:
    """Untrusted notebooks drop the CSS: labels, values and legend items must still read."""
    html = panel.render(small_profile()) + panel.legend_html(["compute", "memory"], ["host_wait"])
    html = re.sub(r"<style.*?</style>", "", html, flags=re.S)
    html = re.sub(r"</?(div|h[1-6]|p|li|ul|tr|pre|details|summary|table)\b[^>]*>", "\n", html)
    lines = [ln.strip() for ln in re.sub(r"<[^>]+>", "", html).splitlines() if ln.strip()]
    assert any(re.fullmatch(r"GPU span \S+ \S+ · from trace", ln) for ln in lines), lines
    assert not any(re.search(r"[a-z](other compute|memory-bound|idle:)", ln) for ln in lines)


def test_an_amd_device_is_read_with_rocm_smi_and_matrix_cores() -> None:
    p = small_profile()
    d = p.diagnosis
    d.devices = [metrics(vendor="amd", name="AMD Instinct MI250X")]
    html, out = panel.render(p), text.render(p)
    assert "rocm-smi would report" in html and "rocm-smi would report" in out
    assert "nvidia-smi would report" not in html + out
    assert "Matrix cores working" in html and "Matrix cores working" in out
    assert "Tensor Cores working" not in html + out


def test_tiny_flop_rates_read_in_gflops_in_panel_and_text() -> None:
    p = small_profile()
    p.diagnosis.devices = [metrics(achieved_tflops=3.7e-05)]
    html, out = panel.render(p), text.render(p)
    assert ">0.0370<" in html and "GFLOP/s" in html
    assert re.search(r"FLOP/s achieved\s+0\.0370 GFLOP/s of 989\.0 TFLOP/s peak", out)
    assert "e-05" not in html + out


def test_amd_devices_have_cus_not_sms_in_both_views() -> None:
    p = small_profile()
    p.diagnosis.devices[0].vendor = "amd"
    html, out = panel.render(p), text.render(p)
    assert "CUs actually busy" in html and "SMs actually busy" not in html
    assert "(132 CUs" in html and "132 CUs" in out and "SMs actually busy" not in out


def test_new_numbers_are_shown_with_their_basis_in_both_views() -> None:
    p = small_profile()
    dm = p.diagnosis.devices[0]
    dm.window_us, dm.launch_to_start_us, dm.exposed_comm_pct = 2500.0, 6.5, 12.5
    dm.copies = [
        {"kind": "HtoD pageable", "count": 12, "bytes": 115_600_000, "us": 11_400.0, "gbps": 10.1},
        {"kind": "DtoD", "count": 3, "bytes": None, "us": 9.0, "gbps": None},
    ]
    dm.span_breakdown = {"compute": 59.4, "input": 28.5, "host": 12.1}
    dm.basis["window_us"] = Basis("trace", "first to last event of any kind")
    dm.basis["copies"] = Basis("trace", "per direction and host memory")
    html, out = panel.render(p), text.render(p)
    rows = re.findall(r'<div title="basis: ([^"]*)"><span>([^<]*)</span> <span>([^<]*)<', html)
    by_label = {label: (basis, value) for basis, label, value in rows}
    assert by_label["profiled window (any event)"] == (
        "read from the trace (first to last event of any kind)",
        "2.5 ms ",
    )
    assert by_label["copies HtoD pageable"][1].startswith("12 copies, 115.6 MB at 10.1 GB/s")
    assert by_label["copies DtoD"][1].startswith("3 copies, bytes unknown")
    assert by_label["launch-to-start delay (median)"][1].startswith("6.5 µs")
    where = "kernels 59.4% · idle: DataLoader 28.5% · idle: host between kernels 12.1%"
    assert by_label["where the GPU span went"][1].startswith(where)
    for shown in ("2.5 ms", "12 copies, 115.6 MB at 10.1 GB/s", "6.5 µs", "12.5% span"):
        assert shown in out
    assert re.sub(r"\s+", " ", out).count(where) == 1
    # No blended copy rate any more: each kind has its own.
    assert "host-device copy rate" not in html and "copy rate" not in out


def test_every_verdict_basis_and_bottleneck_has_words() -> None:
    from nbprof.analysis import verdict
    from nbprof.analysis.model import TENSOR_CORE_BASES, VERDICT_BASES

    codes = {basis for _, basis, _ in verdict.STALLS.values()}
    codes |= {"no_gpu_events", "little_gpu_work", "graph_capture", "kernel_busy"}
    codes |= {"hardware_counters", "roofline", "kernel_classes", "launch_gaps"}
    assert codes <= set(VERDICT_BASES)
    # Every code the type admits has words; "" and "none" (nothing decided) show none.
    assert set(VERDICT_BASES) - {"", "none"} <= set(panel.VERDICT_BASIS_WORDS)
    assert set(TENSOR_CORE_BASES) <= set(panel.TENSOR_CORE_BASIS_WORDS)
    # Every bottleneck's words: tests/test_vocab.py.
