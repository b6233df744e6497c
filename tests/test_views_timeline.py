"""The Bokeh timeline: lanes, colours from analysis, hover fields, level of detail, samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_views_data import small_profile, synthetic_profile

from nbprof.views import timeline
from nbprof.views._style import CLASSES, GAP_CAUSES


def _model(layout, name: str):
    found = list(layout.select({"name": name}))
    assert len(found) == 1, f"{name}: {len(found)} models"
    return found[0]


def _colour_of(data: dict, name: str) -> str:
    return data["color"][data["name"].index(name)]


def test_lanes_per_stream_and_thread_in_order() -> None:
    data = timeline.collect(small_profile())
    assert [ln.label for ln in data.lanes] == [
        "steps",
        "CPU 1 ops",
        "CPU 1 runtime",
        "GPU 0 stream 7",
        "GPU 0 stream 13",
    ]
    # 1 step + 3 top-level ops (the nested aten::linear is not drawn) + 3 runtime calls
    # + 4 kernels + 1 memcpy
    assert data.event_count == 12
    assert "aten::linear" not in set(data.sigs["name"])
    assert list(np.diff(data.lane_offsets)) == [1, 3, 3, 4, 1]


def test_small_trace_draws_exact_events_with_classes_from_analysis() -> None:
    p = small_profile()
    tl = timeline.build(p)
    detail = _model(tl.layout, "nbprof-detail").data
    agg = _model(tl.layout, "nbprof-aggregate").data
    assert len(detail["left"]) == 12 and len(agg["left"]) == 0
    names = p.trace.kernels["name"].tolist()
    assert _colour_of(detail, names[0]) == CLASSES["tensor_core"][1]
    assert _colour_of(detail, names[1]) == CLASSES["memory"][1]
    assert _colour_of(detail, names[3]) == CLASSES["communication"][1]
    assert _colour_of(detail, "Memcpy HtoD (Pageable -> Device)") == CLASSES["copy_htod"][1]
    assert _colour_of(detail, "cudaDeviceSynchronize") == CLASSES["runtime_sync"][1]
    # Positions: µs since the first event (the step at ts=40).
    i = detail["name"].index(names[0])
    assert (detail["left"][i], detail["right"][i]) == (60.0, 210.0)
    assert set(tl.classes) >= {"tensor_core", "memory", "communication", "copy_htod", "step"}


def test_colours_follow_the_kernel_class_table_not_the_names() -> None:
    p = small_profile()
    p.diagnosis.tables["kernel_class"].loc[0, "cls"] = "compute"
    detail = _model(timeline.build(p).layout, "nbprof-detail").data
    assert _colour_of(detail, p.trace.kernels["name"][0]) == CLASSES["compute"][1]


def test_missing_kernel_class_table_draws_grey_with_a_note() -> None:
    p = small_profile()
    del p.diagnosis.tables["kernel_class"]
    tl = timeline.build(p)
    detail = _model(tl.layout, "nbprof-detail").data
    assert _colour_of(detail, p.trace.kernels["name"][0]) == CLASSES["kernel"][1]
    assert any("Kernel classes unavailable" in n for n in tl.notes)


def test_hover_shows_name_duration_grid_block_occupancy_and_op() -> None:
    tl = timeline.build(small_profile())
    hover = _model(tl.layout, "nbprof-hover-events")
    for f in ("@short", "@full", "@dur", "@grid", "@block", "@occ", "@op"):
        assert f in hover.tooltips
    detail = _model(tl.layout, "nbprof-detail").data
    i = detail["name"].index(small_profile().trace.kernels["name"][0])
    assert (detail["grid"][i], detail["block"][i], detail["occ"][i], detail["op"][i]) == (
        "264",
        "128",
        "50 %",
        "aten::mm",
    )


def test_each_row_kind_hovers_with_only_the_fields_that_apply() -> None:
    tl = timeline.build(small_profile())
    detail = _model(tl.layout, "nbprof-detail").data
    tip = dict(zip(detail["name"], detail["tip"], strict=True))
    kernel = small_profile().trace.kernels["name"][0]
    assert tip[kernel] == "kernel" and tip["Memcpy HtoD (Pageable -> Device)"] == "gpu"
    assert tip["cudaDeviceSynchronize"] == "runtime" and tip["aten::mm"] == "cpu"
    for kind, name in (("runtime", "nbprof-hover-runtime"), ("cpu", "nbprof-hover-cpu")):
        template = _model(tl.layout, name).tooltips
        for kernel_only in ("@grid", "@block", "@occ", "@op", "grid × block", "occupancy"):
            assert kernel_only not in template, (kind, kernel_only)
        glyph = _model(tl.layout, f"nbprof-detail-glyphs-{kind}")
        assert glyph.view.filter.group == kind and glyph.view.filter.column_name == "tip"
    assert "@extra" in _model(tl.layout, "nbprof-hover-copies").tooltips


def test_hover_templates_cap_the_width_and_insert_fields_as_text() -> None:
    from bokeh.models import HoverTool

    tl = timeline.build(small_profile())
    main = _model(tl.layout, "nbprof-timeline")
    hovers = [t for t in main.tools if isinstance(t, HoverTool)]
    assert len(hovers) == 6
    for h in hovers:
        # Bokeh HTML-escapes @fields in a template unless "{safe}" asks otherwise.
        assert "{safe}" not in h.tooltips
        assert f"max-width:{timeline.TOOLTIP_MAX_PX}px" in h.tooltips
        assert "overflow-wrap:anywhere" in h.tooltips


def test_long_template_names_are_folded_with_the_full_name_kept() -> None:
    p = small_profile()
    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<"
        "c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<"
        "c10::BFloat16>, at::detail::Array<char*, 3>)"
    )
    p.trace.kernels.loc[0, "name"] = long
    detail = _model(timeline.build(p).layout, "nbprof-detail").data
    i = detail["name"].index(long)
    assert detail["short"][i] == "void at::native::vectorized_elementwise_kernel<…>(…)"
    assert detail["full"][i] == long
    j = detail["name"].index("cudaDeviceSynchronize")
    assert detail["short"][j] == "cudaDeviceSynchronize" and detail["full"][j] == ""


def test_gap_hover_is_the_gap_minus_what_is_drawn_on_its_lane() -> None:
    gaps = {
        "left": [10.0, 100.0],
        "right": [50.0, 110.0],
        "bottom": [2.5, 2.5],
        "top": [3.5, 3.5],
        "dur": [40.0, 10.0],
        "cause_label": ["a", "b"],
        "cpu_work": ["x", "y"],
        "lane": ["L3", "L3"],
        "li": [3, 3],
    }
    # Two glyphs cut into the first gap; one on another lane does not.
    hover = timeline.gap_hover(
        gaps, [0.0, 20.0, 25.0, 40.0], [12.0, 30.0, 28.0, 60.0], [3, 3, 3, 2]
    )
    assert list(zip(hover["left"], hover["right"], strict=True)) == [
        (12.0, 20.0),
        (30.0, 50.0),
        (100.0, 110.0),
    ]
    assert hover["dur"] == [40.0, 40.0, 10.0] and hover["cause_label"] == ["a", "a", "b"]


@pytest.mark.parametrize("cap", [0, timeline.DEFAULT_CAP])
def test_gap_and_event_tooltips_never_share_a_point(cap: int) -> None:
    """The gap's hover area avoids every drawn glyph on its lane, exact or aggregate."""
    p = small_profile()
    # A gap that runs over the last kernel on stream 7 (at 400-405), as a coarse view would.
    p.diagnosis.tables["idle_gaps"].loc[0, ["start", "end"]] = [395.0, 750.0]
    tl = timeline.build(p, cap=cap, agg_cap=40)
    hover = _model(tl.layout, "nbprof-gap-hover").data
    drawn = _model(tl.layout, "nbprof-aggregate" if cap == 0 else "nbprof-detail").data
    assert hover["left"], "some of the gap is hoverable"
    for a, b, lane in zip(hover["left"], hover["right"], hover["lane"], strict=True):
        for c, d, other in zip(drawn["left"], drawn["right"], drawn["lane"], strict=True):
            assert other != lane or d <= a or c >= b, ((a, b), (c, d))


def test_idle_gaps_shaded_in_their_stream_and_labelled_with_the_cause() -> None:
    tl = timeline.build(small_profile())
    gaps = _model(tl.layout, "nbprof-gaps").data
    assert gaps["left"] == [210.0] and gaps["right"] == [260.0]
    assert gaps["lane"] == ["GPU 0 stream 7"]
    assert gaps["cause_label"] == [GAP_CAUSES["host_wait"][0]]
    labels = _model(tl.layout, "nbprof-gap-labels").data
    assert labels["text"] == [GAP_CAUSES["host_wait"][0]]
    assert _model(tl.layout, "nbprof-hover-gaps") is not None
    assert tl.gap_causes == ["host_wait"]


def test_overview_strip_drives_the_main_range() -> None:
    from bokeh.models import RangeTool

    tl = timeline.build(small_profile())
    main = _model(tl.layout, "nbprof-timeline")
    ov = _model(tl.layout, "nbprof-overview")
    tools = [t for t in ov.tools if isinstance(t, RangeTool)]
    assert len(tools) == 1 and tools[0].x_range is main.x_range
    assert main.x_range.js_property_callbacks.keys() >= {"change:start", "change:end"}
    kinds = {type(t).__name__ for t in main.tools}
    assert {"WheelZoomTool", "BoxZoomTool", "PanTool", "ResetTool"} <= kinds


def test_nvml_samples_on_the_same_time_axis() -> None:
    p = small_profile(samples=True)
    tl = timeline.build(p)
    fig = _model(tl.layout, "nbprof-samples")
    assert fig.x_range is _model(tl.layout, "nbprof-timeline").x_range
    util = _model(tl.layout, "nbprof-sample-util_gpu-0")
    x = util.data_source.data["x"]
    # First sample at origin_ns: trace µs 0, i.e. 40 µs before the first event.
    assert x[0] == pytest.approx(-40.0)
    assert x[1] - x[0] == pytest.approx(100.0)  # 100_000 ns apart
    assert list(fig.select({"name": "nbprof-sample-sm_util-0"}))
    assert not list(fig.select({"name": "nbprof-sample-tensor_util-0"}))  # all NaN: omitted


def test_samples_without_origin_are_omitted_with_a_note() -> None:
    tl = timeline.build(small_profile(samples=True, origin=False))
    assert not list(tl.layout.select({"name": "nbprof-samples"}))
    assert any("no wall-clock origin" in n for n in tl.notes)


def test_aggregate_busy_fraction_per_bin() -> None:
    data = timeline.collect(small_profile())
    agg = timeline.aggregate(data, 0.0, 800.0, 8)
    lane = [i for i, lab in enumerate(agg["lane"]) if lab == "GPU 0 stream 13"]
    busy = {int(agg["left"][i] // 100): round(agg["busy"][i], 6) for i in lane}
    # The kernel covers 110..710 µs.
    assert busy == {1: 90.0, 2: 100.0, 3: 100.0, 4: 100.0, 5: 100.0, 6: 100.0, 7: 10.0}
    colours = {agg["color"][i] for i in lane}
    assert colours == {CLASSES["communication"][1]}


def test_visible_count_and_exact_window() -> None:
    data = timeline.collect(small_profile())
    assert timeline.visible_count(data, -10, 1000) == 12
    win = timeline.exact(data, 205.0, 215.0)
    assert timeline.visible_count(data, 205.0, 215.0) == len(win["name"])
    assert sorted(win["lane"]) == ["GPU 0 stream 13", "GPU 0 stream 7", "steps"]


def test_encoding_round_trips_within_one_tick() -> None:
    data = timeline.collect(synthetic_profile(5_000))
    dx, dd, tick = timeline._encode(data)
    assert dx.dtype == np.uint32 and dd.dtype == np.uint32
    x = np.empty(len(dx))
    for a, b in zip(data.lane_offsets[:-1], data.lane_offsets[1:], strict=True):
        x[a:b] = np.cumsum(dx[a:b].astype(np.float64)) * tick
    assert np.abs(x - data.x).max() <= tick
    assert np.abs(dd * tick - data.dur).max() <= tick


@pytest.mark.slow
def test_large_trace_draws_a_bounded_number_of_glyphs() -> None:
    p = synthetic_profile(200_000)
    tl = timeline.build(p)
    data = tl.data
    assert data.event_count > 400_000  # kernels + launches + ops + steps
    detail = _model(tl.layout, "nbprof-detail").data
    agg = _model(tl.layout, "nbprof-aggregate").data
    gaps = _model(tl.layout, "nbprof-gaps").data
    assert len(detail["left"]) == 0
    assert 0 < len(agg["left"]) <= timeline.DEFAULT_AGG_CAP
    assert len(gaps["left"]) <= timeline.MAX_GAPS
    assert any("longest" in n for n in tl.notes)
    # Repeated kernels share signatures: the embedded name table stays small.
    assert len(data.sigs) < 100
    store = _model(tl.layout, "nbprof-store").data
    assert {k: v.dtype.name for k, v in store.items()} == {
        "dx": "uint32",
        "dd": "uint32",
        "sig": "uint16",
    }
    # A narrow window goes back to exact events, under the cap.
    x0 = data.span / 2
    n = timeline.visible_count(data, x0, x0 + 200.0)
    assert 0 < n <= timeline.DEFAULT_CAP
    assert len(timeline.exact(data, x0, x0 + 200.0)["name"]) == n


def test_empty_trace_still_builds() -> None:
    from nbprof.result import Profile
    from nbprof.trace.model import Trace

    p = Profile(Trace(source="empty.json", event_count=0, origin_ns=None))
    p.__dict__["diagnosis"] = small_profile().diagnosis
    p.diagnosis.tables["kernel_class"] = pd.DataFrame({"cls": []})
    tl = timeline.build(p)
    assert tl.data.event_count == 0 and tl.gap_causes == []
    assert any("no events" in n for n in tl.notes)


def test_sample_lines_skip_rows_where_their_metric_is_missing() -> None:
    """Driver-buffered utilization rows carry only util_gpu; other lines must not break."""
    p = small_profile(samples=True)
    f = p.samples.frame
    extra = f.iloc[:1].copy()
    extra.loc[:, [c for c in f.columns if c not in ("time_ns", "gpu", "util_gpu")]] = np.nan
    extra["time_ns"] = f["time_ns"].iloc[0] + 50_000
    p.samples.frame = pd.concat([f, extra]).sort_values("time_ns", kind="stable")
    tl = timeline.build(p)
    sm = _model(tl.layout, "nbprof-sample-sm_util-0").data_source.data
    util = _model(tl.layout, "nbprof-sample-util_gpu-0").data_source.data
    assert not np.isnan(np.asarray(sm["y"], dtype=float)).any()
    assert len(sm["x"]) == int(f["sm_util"].notna().sum())
    assert len(util["x"]) == int(f["util_gpu"].notna().sum()) + 1


def test_other_kernels_are_drawn_in_their_own_colour() -> None:
    p = small_profile()
    p.diagnosis.tables["kernel_class"].loc[1, "cls"] = "other"
    tl = timeline.build(p)
    detail = _model(tl.layout, "nbprof-detail").data
    assert _colour_of(detail, p.trace.kernels["name"][1]) == CLASSES["other"][1]
    assert "other" in tl.classes


def test_cuda_sync_records_sit_on_gpu_lanes_not_cpu_threads(corpus: Path) -> None:
    from nbprof import load

    p = load(
        corpus / "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    )
    labels = [ln.label for ln in timeline.collect(p).lanes]
    assert "GPU 0 context syncs" in labels and "GPU 0 stream 7 syncs" in labels
    assert not any(label.startswith("CPU -1") for label in labels)
