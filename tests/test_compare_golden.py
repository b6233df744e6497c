"""nbprof.compare on hand-built pairs of traces: answers written as formulas.

Each pair is two tiny Kineto traces whose kernels, steps and CPU ops a test can add up by
hand; the comparison must find exactly those kernel-time changes, new and gone kernels,
step-time ratio and metric deltas, and say what makes a pair unfair (another GPU, other
step counts, other batch sizes).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from golden import KinetoBuilder

import nbprof
from nbprof.analysis.compare import KERNEL_COLUMNS, METRICS, SCHEMA
from nbprof.analysis.model import DeviceMetrics
from nbprof.analysis.names import kernel_group, op_group

SGEMM_V100 = "volta_sgemm_128x64_nn"
SGEMM_A100 = "ampere_sgemm_64x32_nn"  # the same GEMM as cuBLAS picks it on another GPU
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, "
    "at::detail::Array<char*, 3>)"
)
GONE = "triton_poi_fused_mul_0"
NEW = "triton_red_fused_sum_1"
A100 = "NVIDIA A100-SXM4-80GB"


def run(
    tmp_path: Path,
    name: str,
    kernels: list[tuple[str, float]],
    *,
    step_us: float,
    steps: int = 2,
    device: str = "NVIDIA H100 80GB HBM3",
    ops: list[tuple[str, float]] = (),  # type: ignore[assignment]
    batch: int | None = None,
) -> Path:
    """``steps`` ProfilerSteps of ``step_us``; in each, the ``kernels`` back to back from
    10 µs in with 10 µs gaps, and the top-level CPU ``ops`` from 0 µs in, one after another."""
    b = KinetoBuilder(device_name=device)
    for i in range(steps):
        s = i * step_us
        if step_us:
            b.step(i + 1, s, step_us)
        t = s
        for op, dur in ops:
            dims = [[batch, 3, 8, 8], [4, 3, 3, 3]] if batch and op == "aten::conv2d" else None
            b.cpu_op(op, t, dur, dims=dims)
            t += dur
        t = s + 10
        for k, dur in kernels:
            b.kernel(k, t, dur)
            t += dur + 10
    return b.write(tmp_path, f"{name}.json")


def pair(tmp_path: Path, **after_kw: object) -> nbprof.Comparison:
    """Before: per 1000 µs step, SGEMM 300 µs, ADD 100 µs, GONE 50 µs.
    After: per 800 µs step, SGEMM (another tile) 200 µs, ADD 100 µs, NEW 80 µs."""
    before = run(tmp_path, "before", [(SGEMM_V100, 300), (ADD, 100), (GONE, 50)], step_us=1000)
    kw: dict[str, object] = {"step_us": 800, **after_kw}
    after = run(tmp_path, "after", [(SGEMM_A100, 200), (ADD, 100), (NEW, 80)], **kw)  # type: ignore[arg-type]
    return nbprof.compare(before, after)


# -- kernel names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (SGEMM_V100, SGEMM_A100),  # another generation, another tile
        ("volta_h884gemm_64x64_ldg8_nn", "ampere_h16816gemm_128x128_ldg8_stages_32x5_nn"),
        ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
         "sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize64x128x64_stage3_warpsize1x2x1_tensor16x8x16_kernel"),
        ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", "fmha_cutlassF_f16_aligned_32x128_rf_sm90"),
        (ADD, ADD.replace("<4,", "<2,").replace("char*, 3", "char*, 2")),
        ("triton_poi_fused_add_0", "triton_poi_fused_add_7"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclKernel_AllReduce_RING_LL_Sum_float"),  # noqa: E501
    ],
)  # fmt: skip
def test_the_same_kernel_matches_across_runs_and_gpus(a: str, b: str) -> None:
    assert kernel_group(a) == kernel_group(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (ADD, ADD.replace("AddFunctor", "MulFunctor")),  # what the kernel computes differs
        ("volta_sgemm_128x64_nn", "volta_sgemm_128x64_tn"),  # another transpose
        ("volta_sgemm_128x64_nn", "volta_h884gemm_128x64_nn"),  # FP32 SIMT vs FP16 TC
        ("triton_poi_fused_add_0", "triton_red_fused_add_0"),
    ],
)
def test_different_kernels_stay_apart(a: str, b: str) -> None:
    assert kernel_group(a) != kernel_group(b)


def test_group_names_read_as_names() -> None:
    assert kernel_group(SGEMM_V100) == "sgemm_NxN_nn"
    assert kernel_group(ADD) == (
        "at::native::vectorized_elementwise_kernel<N, at::native::AddFunctor<float>, "
        "at::detail::Array<char*, N>>"
    )
    assert kernel_group("void at::native::(anonymous namespace)::f<float>(int)") == (
        "at::native::(anonymous namespace)::f<float>"
    )
    assert op_group("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") == op_group(
        "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    )
    assert op_group("ReluBackward0") == op_group("ReluBackward1") == "ReluBackward"
    assert op_group("aten::conv2d") == "aten::conv2d"


# -- a hand-built pair -------------------------------------------------------------------


def test_known_kernel_time_changes_new_and_gone(tmp_path: Path) -> None:
    k = pair(tmp_path).kernels
    assert list(k.columns) == list(KERNEL_COLUMNS)
    rows = {r.name: r for r in k.itertuples(index=False)}
    sgemm = rows[kernel_group(SGEMM_V100)]
    # Per step (2 steps each side): 300 µs -> 200 µs, one call each.
    assert (sgemm.before_us, sgemm.after_us, sgemm.delta_us) == (300.0, 200.0, -100.0)
    assert (sgemm.before_count, sgemm.after_count, sgemm.change) == (1.0, 1.0, "decreased")
    assert sgemm.example == SGEMM_A100
    add = rows[kernel_group(ADD)]
    assert (add.before_us, add.after_us, add.change) == (100.0, 100.0, "unchanged")
    gone = rows[kernel_group(GONE)]
    assert (gone.before_us, gone.after_us, gone.after_count, gone.change) == (50, 0, 0, "gone")
    new = rows[kernel_group(NEW)]
    assert (new.before_us, new.after_us, new.before_count, new.change) == (0, 80, 0, "new")
    # Biggest movers first: |-100| > |+80| > |-50| > 0.
    assert list(k["name"]) == [kernel_group(x) for x in (SGEMM_V100, NEW, GONE, ADD)]


def test_step_time_ratio_and_metric_deltas(tmp_path: Path) -> None:
    cmp = pair(tmp_path)
    st = cmp.step_time
    assert (st.before_ms, st.after_ms) == (1.0, 0.8)
    assert st.ratio == pytest.approx(1000 / 800)
    assert st.statistic == "mean_step" and st.change == "faster"
    assert st.within_noise is False  # identical steps: no variation at all
    d = cmp.diff
    # Before: kernels [s+10, s+310], [s+320, s+420], [s+430, s+480] for s = 0, 1000:
    # span 10 .. 1480, busy 2 x 450. After, s = 0, 800: span 10 .. 1210, busy 2 x 380.
    busy_b, busy_a = 900 / 1470 * 100, 760 / 1200 * 100
    m = d.metric("kernel_busy_pct")
    assert (m.before, m.after) == (pytest.approx(busy_b), pytest.approx(busy_a))
    assert m.delta == pytest.approx(busy_a - busy_b) and m.better is True
    span = d.metric("gpu_span_us")  # per step
    assert (span.before, span.after) == (pytest.approx(1470 / 2), pytest.approx(1200 / 2))
    assert span.better is True
    count = d.metric("kernel_count")
    assert (count.before, count.after, count.delta, count.better) == (3, 3, 0, None)
    assert d.warnings == []
    assert cmp.summary == (
        f"Kernels ran {busy_b:.1f}% of the GPU span before and {busy_a:.1f}% after; the mean "
        "step went from 1.0 ms to 800.0 µs, 1.25x faster; the GPU is still "
        f"{nbprof.analysis.compare.state(d.after.verdict.bottleneck)}."
    )


def test_a_trace_against_itself_changes_nothing(tmp_path: Path) -> None:
    path = run(tmp_path, "same", [(SGEMM_V100, 300), (ADD, 100)], step_us=1000, ops=[("x", 5)])
    cmp = nbprof.compare(path, path)
    d = cmp.diff
    for m in d.metrics:
        assert m.delta in (0.0, None), m
        assert m.better is None, m
    assert set(d.kernels["change"]) == {"unchanged"}
    assert (d.kernels["delta_us"] == 0).all() and (d.ops["delta_us"] == 0).all()
    assert set(d.ops["change"]) == {"unchanged"}
    assert d.step_time.ratio == 1.0 and d.step_time.change == "same"
    assert d.warnings == []
    assert "the mean step is the same, 1.0 ms" in cmp.summary
    assert "the GPU is still" in cmp.summary


def test_different_gpus_are_said_and_never_credited_to_the_code(tmp_path: Path) -> None:
    cmp = pair(tmp_path, device=A100)
    (w,) = cmp.warnings
    assert "Different GPUs" in w and "NVIDIA H100 80GB HBM3" in w and A100 in w
    assert cmp.summary.startswith(f"On different GPUs (NVIDIA H100 80GB HBM3 before, {A100} ")
    assert "1.25x faster (with the hardware change)" in cmp.summary
    assert "WARNING: Different GPUs" in cmp.text()
    # The kernel groups still match across the two GPUs' names.
    assert kernel_group(SGEMM_V100) in set(cmp.kernels["name"])


def test_different_step_counts_compare_per_step(tmp_path: Path) -> None:
    kernels = [(SGEMM_V100, 300), (ADD, 100)]
    before = run(tmp_path, "two", kernels, step_us=1000, steps=2)
    after = run(tmp_path, "five", kernels, step_us=1000, steps=5)
    cmp = nbprof.compare(before, after)
    (w,) = cmp.warnings
    assert "Different numbers of steps (2 before, 5 after)" in w
    assert cmp.diff.per == "step"
    # Totals differ 2.5x; per step nothing changed.
    assert set(cmp.kernels["change"]) == {"unchanged"}
    assert list(cmp.kernels["before_us"]) == list(cmp.kernels["after_us"]) == [300.0, 100.0]
    count = cmp.diff.metric("kernel_count")
    assert (count.before, count.after) == (2.0, 2.0)
    assert cmp.step_time.change == "same"


def test_different_batch_sizes_are_said_with_per_sample_times(tmp_path: Path) -> None:
    kernels = [(SGEMM_V100, 300)]
    before = run(tmp_path, "b32", kernels, step_us=1000, ops=[("aten::conv2d", 20)], batch=32)
    after = run(tmp_path, "b64", kernels, step_us=1600, ops=[("aten::conv2d", 20)], batch=64)
    cmp = nbprof.compare(before, after)
    assert (cmp.diff.before.batch_size, cmp.diff.after.batch_size) == (32, 64)
    assert cmp.diff.before.batch_basis.kind == "estimated"
    (w,) = cmp.warnings
    # 1.0 ms / 32 samples and 1.6 ms / 64 samples.
    assert "Different batch sizes (32 before, 64 after" in w
    assert f"{1.0 / 32:.3g} ms before and {1.6 / 64:.3g} ms after" in w


def test_without_steps_the_gpu_span_is_compared(tmp_path: Path) -> None:
    before = run(tmp_path, "b", [(SGEMM_V100, 300), (ADD, 100)], step_us=0, steps=1)
    after = run(tmp_path, "a", [(SGEMM_V100, 100), (ADD, 100)], step_us=0, steps=1)
    cmp = nbprof.compare(before, after)
    st = cmp.step_time
    # Spans: 10 .. 420 (300 + 10 + 100) and 10 .. 220.
    assert (st.statistic, st.before_ms, st.after_ms) == ("gpu_span", 0.41, 0.21)
    assert st.ratio == pytest.approx(410 / 210)
    assert cmp.diff.per == "run"
    assert "the GPU span went from 410.0 µs to 210.0 µs, 1.95x faster" in cmp.summary
    sgemm = cmp.kernels.iloc[0]
    assert (sgemm.before_us, sgemm.after_us) == (300.0, 100.0)


def test_top_level_cpu_ops_compare_by_normalized_name(tmp_path: Path) -> None:
    kernels = [(SGEMM_V100, 300)]
    loader_b = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    loader_a = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    before = run(tmp_path, "b", kernels, step_us=1000, ops=[(loader_b, 400), ("aten::mm", 30)])
    after = run(tmp_path, "a", kernels, step_us=1000, ops=[(loader_a, 10), ("Optimizer.step", 5)])
    ops = nbprof.compare(before, after).ops
    rows = {r.name: r for r in ops.itertuples(index=False)}
    loader = rows[op_group(loader_b)]
    assert (loader.before_us, loader.after_us, loader.delta_us) == (400, 10, -390)
    assert loader.change == "decreased"
    assert rows["aten::mm"].change == "gone" and rows["Optimizer.step"].change == "new"
    assert ops["name"].iloc[0] == op_group(loader_b)


def test_an_input_bound_run_fixed(tmp_path: Path) -> None:
    # Before: each step opens with a 600 µs DataLoader __next__ the GPU waits on, then six
    # 100 µs kernels 10 µs apart (a 1260 µs step); after, the batch is ready in 10 µs.
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    steps, kernels = 4, 6

    def build(name: str, fetch: float) -> tuple[Path, float]:
        b = KinetoBuilder()
        step = fetch + 10 + kernels * 110
        for i in range(steps):
            s = i * step
            b.step(i + 1, s, step)
            b.cpu_op(loader, s, fetch)
            t = s + fetch + 10
            for _ in range(kernels):
                b.kernel(SGEMM_V100, t, 100, launch_ts=t - 5)
                t += 110
        return b.write(tmp_path, f"{name}.json"), step

    (slow, step_b), (fast, step_a) = build("slow", 600), build("fast", 10)
    cmp = nbprof.compare(slow, fast)
    d = cmp.diff
    assert d.before.verdict.bottleneck == "input_bound"
    assert d.after.verdict.bottleneck != "input_bound"
    dl = d.metric("dataloader_pct")
    # DataLoader time ÷ step time.
    assert dl.before == pytest.approx(600 / step_b * 100)
    assert dl.after == pytest.approx(10 / step_a * 100)
    assert dl.better is True
    # Between steps the GPU idles from the last kernel's end to the next step's first
    # kernel: before 620 µs (10 µs host, the 600 µs fetch, 10 µs launching), three times,
    # in a span from 610 to 3 x 1270 + 1260 µs; after 30 µs (10 µs of it the fetch) in
    # a span from 20 to 3 x 680 + 670 µs.
    input_b, input_a = 3 * 600 / (3 * 1270 + 1260 - 610) * 100, 3 * 10 / (3 * 680 + 670 - 20) * 100
    waited = d.metric("span_input_pct")
    assert (waited.before, waited.after) == (pytest.approx(input_b), pytest.approx(input_a))
    assert cmp.summary.startswith(
        f"The GPU waited on the DataLoader for {input_b:.1f}% of the span before and "
        f"{input_a:.1f}% after"
    )
    assert f"{step_b / step_a:.2f}x faster" in cmp.summary
    assert "(it was starved by the input pipeline)" in cmp.summary
    assert waited.better is True


# -- the schema and the views ------------------------------------------------------------


def test_json_follows_the_schema(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(pair(tmp_path).to_json()))  # plain JSON, no numpy types
    assert doc["schema"] == SCHEMA == "nbprof.compare/1"
    assert {"schema", "before", "after", "step_time_ms", "metrics", "kernels", "ops",
            "summary"} <= doc.keys()  # fmt: skip
    for side in ("before", "after"):
        assert {"source", "device", "verdict"} <= doc[side].keys()
        assert doc[side]["device"]["name"] == "NVIDIA H100 80GB HBM3"
        assert doc[side]["verdict"]["bottleneck"]
    assert doc["step_time_ms"]["before"] == 1.0 and doc["step_time_ms"]["after"] == 0.8
    assert doc["step_time_ms"]["ratio"] == pytest.approx(1.25)
    # Every declared metric, in order, each with its basis per side.
    assert [m["name"] for m in doc["metrics"]] == [m.name for m in METRICS]
    for m in doc["metrics"]:
        assert {"name", "before", "after", "delta", "better"} <= m.keys()
    busy = next(m for m in doc["metrics"] if m["name"] == "kernel_busy_pct")
    assert busy["basis"]["before"]["kind"] == "trace"
    row = doc["kernels"][0]
    assert set(row) >= {"name", "before_us", "after_us", "before_count", "after_count", "change"}
    assert (row["before_us"], row["after_us"], row["change"]) == (300.0, 200.0, "decreased")


def test_every_metric_reads_a_real_device_metric() -> None:
    # A declaration whose reader names no DeviceMetrics field would always compare None.
    fields = set(DeviceMetrics.__dataclass_fields__)
    for m in METRICS:
        if m.read is None:
            assert m.name in fields, m.name
        assert (m.basis or m.name) in fields | {"idle"}, m.name


def test_text_view(tmp_path: Path) -> None:
    out = pair(tmp_path).text()
    assert "What changed: Kernels ran" in out
    assert "Mean step: 1.0 ms -> 800.0 µs, 1.25x faster" in out
    assert re.search(r"kernels busy \(nvidia-smi\)\s+61\.2%\s+63\.3%\s+\+2\.1 pts\s+better", out)
    assert "new: triton_red_fused_sum_N" in out and "gone: triton_poi_fused_mul_N" in out
    assert all(len(line) <= 88 for line in out.splitlines())


HOSTILE = "<img src=x onerror=alert(1)>\x1b[31m"


def test_names_from_the_traces_are_escaped(tmp_path: Path) -> None:
    before = run(tmp_path, "b", [(HOSTILE, 100)], step_us=1000, ops=[(HOSTILE, 10)])
    after = run(tmp_path, "a", [(SGEMM_V100, 100)], step_us=1000, ops=[("aten::mm", 10)])
    cmp = nbprof.compare(before, after)
    page = cmp.to_html()
    assert "<img src=x" not in page
    assert html.escape("<img src=x onerror=alert(1)>") in page
    assert "\x1b" not in cmp.text()


def test_html_page_and_bundle(tmp_path: Path) -> None:
    cmp = pair(tmp_path)
    out = tmp_path / "cmp.html"
    page = cmp.to_html(out)
    assert out.read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>") and "cdn.bokeh.org" not in page
    # Both timelines, one document: two main plots, each with its own section.
    assert page.count('nbp-cmp-timeline nbp-cmp-before"') == 1
    assert page.count('nbp-cmp-timeline nbp-cmp-after"') == 1
    assert _timelines(page) == 2
    # The shared scale (a CustomJSTicker in the packed document) and the link between the
    # two (compare_page.mjs, in the page's one deflated script).
    from nbprof.views import assets

    assert _pack_text(page).count('"type":"object","name":"CustomJSTicker"') >= 1
    assert assets.scripts("compare_page.mjs") in page
    assert "nbprof.compare = compare" in assets.bundle("compare_page.mjs")
    bundle = cmp._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle["text/plain"] == cmp.text()
    assert 'class="nbprof nbp-compare"' in bundle["text/html"]


def test_timelines_share_one_time_scale(tmp_path: Path) -> None:
    from nbprof.views import compare as view
    from nbprof.views import timeline

    # Before: a 50 µs set-up op at 0, then two 1000 µs steps from 300 µs. After: two
    # 800 µs steps from 0. Each run's time scale starts at its first step.
    b = KinetoBuilder()
    b.cpu_op("setup", 0, 50)
    for i in range(2):
        b.step(i + 1, 300 + 1000 * i, 1000)
        b.kernel(SGEMM_V100, 300 + 1000 * i + 10, 300)
    after = run(tmp_path, "after", [(SGEMM_V100, 200)], step_us=800)
    cmp = nbprof.compare(b.write(tmp_path, "before.json"), after)
    d = cmp.diff
    built = [(w, s, timeline.build(p)) for w, s, p in
             (("before", d.before, cmp.before), ("after", d.after, cmp.after))]  # fmt: skip
    shifts = view.share_scale(built)  # type: ignore[arg-type]
    (_, sb, tb), (_, sa, ta) = built
    assert shifts == {"before": 300.0, "after": 0.0}  # the origins in each's coordinates
    assert sb.origin_basis == sa.origin_basis == "first ProfilerStep"
    xb = next(f for f in tb.figures if f.name == "nbprof-timeline").x_range
    xa = next(f for f in ta.figures if f.name == "nbprof-timeline").x_range
    # One window of the shared scale in both: from the set-up op (300 µs before the first
    # step) to the before run's last step end (2000 µs after it), 1% padded each side.
    lo, hi = -300.0, 2000.0
    pad = (hi - lo) * 0.01
    for xr, shift in ((xb, 300.0), (xa, 0.0)):
        assert (xr.start - shift, xr.end - shift) == (
            pytest.approx(lo - pad),
            pytest.approx(hi + pad),
        )
        assert tuple(xr.bounds) == pytest.approx((xr.start, xr.end))
    # Every time axis ticks and labels on the shared scale.
    for tl, shift in ((tb, shifts["before"]), (ta, shifts["after"])):
        for fig in tl.figures:
            for axis in fig.xaxis:
                assert type(axis.ticker).__name__ == "CustomJSTicker"
                assert axis.ticker.args["shift"] == shift and axis.formatter.args["shift"] == shift
    page = cmp.to_html()
    for which in ("before", "after"):
        assert f'class="nbprof nbp-cmp-timeline nbp-cmp-{which}" data-nbp-shift=' in page


# -- the API -----------------------------------------------------------------------------


def test_compare_takes_profiles_or_paths_and_says_what_is_wrong(tmp_path: Path) -> None:
    path = run(tmp_path, "p", [(SGEMM_V100, 100)], step_us=1000)
    prof = nbprof.load(path)
    cmp = nbprof.compare(prof, str(path))
    assert cmp.before is prof and isinstance(cmp.after, nbprof.Profile)
    assert repr(cmp).startswith("<nbprof.Comparison before=")
    with pytest.raises(TypeError, match=r"before must be an nbprof\.Profile or the path"):
        nbprof.compare(42, path)  # type: ignore[arg-type]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(nbprof.TraceError, match=re.escape(str(bad))):
        nbprof.compare(path, bad)


def test_import_nbprof_stays_light() -> None:
    code = (
        "import sys, nbprof; nbprof.compare; "
        "heavy = [m for m in ('torch', 'IPython', 'bokeh', 'ipywidgets', 'pandas', 'dask') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cpu_only_runs_compare_their_cpu_time(tmp_path: Path) -> None:
    # No kernels and no steps: op 1 at [0, 100], op 2 right after it (200 or 50 µs).
    before = run(tmp_path, "b", [], step_us=0, steps=1, ops=[("aten::mm", 100), ("aten::add", 200)])
    after = run(tmp_path, "a", [], step_us=0, steps=1, ops=[("aten::mm", 100), ("aten::add", 50)])
    cmp = nbprof.compare(before, after)
    st = cmp.step_time
    assert (st.statistic, st.before_ms, st.after_ms) == ("cpu_span", 0.3, 0.15)
    assert st.ratio == 2.0 and st.change == "faster"
    assert cmp.warnings == ["Neither run recorded GPU activity: only their CPU sides compare."]
    assert cmp.summary.startswith("The traced CPU time went from 300.0 µs to 150.0 µs, 2.00x")
    assert "Traced CPU time: 300.0 µs -> 150.0 µs, 2.00x faster" in cmp.text()
    assert "none known: neither run recorded GPU activity." in cmp.text()
    add = cmp.ops[cmp.ops["name"] == "aten::add"].iloc[0]
    assert (add.before_us, add.after_us, add.change) == (200, 50, "decreased")


def test_exposed_communication_and_copies_by_direction(tmp_path: Path) -> None:
    nccl = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"

    def build(name: str, *, overlap: bool, src: str, copy_us: float) -> Path:
        b = KinetoBuilder()
        for i in range(2):
            s = i * 1000
            b.step(i + 1, s, 1000)
            b.kernel(SGEMM_V100, s + 10, 300)
            # Before, the all-reduce runs alone after the GEMM; after, beside it.
            b.kernel(nccl, s + (100 if overlap else 320), 100, stream=8)
            b.memcpy(s + 500, copy_us, 1_000_000, kind="HtoD", src=src)
        return b.write(tmp_path, f"{name}.json")

    cmp = nbprof.compare(
        build("b", overlap=False, src="Pageable", copy_us=200),
        build("a", overlap=True, src="Pinned", copy_us=50),
    )
    d = cmp.diff
    exposed = d.metric("exposed_comm_pct")
    # Before: 2 x 100 µs of all-reduce alone in a span from 10 to 1000 + 700 (the copy
    # ends last); after, the all-reduce always has the GEMM beside it.
    assert exposed.before == pytest.approx(200 / 1690 * 100)
    assert exposed.after == 0.0 and exposed.better is True
    overlap = d.metric("comm_overlap_pct")
    assert (overlap.before, overlap.after, overlap.better) == (0.0, 100.0, True)
    # 1 MB per step: in 200 µs (5 GB/s) from pageable memory, in 50 µs (20 GB/s) pinned.
    t, r = d.metric("copy_HtoD_us"), d.metric("copy_HtoD_gbps")
    assert (t.before, t.after, t.better) == (200.0, 50.0, True)
    assert (r.before, r.after) == (pytest.approx(5.0), pytest.approx(20.0)) and r.better is True
    assert d.metric("copy_DtoH_us").before is None  # no copies that way in either run
    assert d.metric("pageable_memcpy_count").before == 1.0
    assert d.metric("pageable_memcpy_count").after == 0.0
    out = cmp.text()
    assert re.search(r"copies HtoD: rate\s+5\.00 GB/s\s+20\.0 GB/s\s+\+15\.0 GB/s\s+better", out)
    assert "copies DtoH" not in out  # unknown in both: left out of the table


def test_html_page_is_never_written_over_a_run_and_a_failed_write_keeps_the_old_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbprof.errors import OutputError

    cmp = pair(tmp_path)
    before_trace = Path(cmp.before.trace.source)
    original = before_trace.read_bytes()
    with pytest.raises(OutputError, match="refusing to overwrite"):
        cmp.to_html(before_trace)
    assert before_trace.read_bytes() == original
    out = tmp_path / "cmp.html"
    out.write_text("the previous page", encoding="utf-8")

    def boom(_: object) -> str:
        raise RuntimeError("rendering failed half way")

    monkeypatch.setattr("nbprof.views.compare.page", boom)
    with pytest.raises(RuntimeError):
        cmp.to_html(out)
    assert out.read_text(encoding="utf-8") == "the previous page"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _timelines(page: str) -> int:
    """Main timeline plots in the page's payloads (they travel packed, so the figure's name
    is in a pack's header, not in the page's text)."""
    return _pack_text(page).count('"name":"nbprof-timeline"')


def _pack_text(page: str) -> str:
    """The headers of the page's payloads, as compact JSON text."""
    from nbprof.views import dashboard
    from nbprof.views.timeline import wire

    packs = re.findall(rf'<script type="{dashboard.PAYLOAD_TYPE}">([^<]*)</script>', page)
    return "".join(json.dumps(wire.unpack(p)[0], separators=(",", ":")) for p in packs)
