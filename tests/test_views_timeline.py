"""The Bokeh timeline: lanes, colours from analysis, hover fields, level of detail, samples.

What is drawn is decided in the browser (nbprof/views/js); tests/js_draw.py runs that code
under Node on the timeline document of each build.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from js_draw import detail, draw, source
from views_data import small_profile, synthetic_profile

from nbprof.views import timeline
from nbprof.views._style import CLASSES, GAP_CAUSES
from nbprof.views.timeline import events, store


def _model(layout, name: str):
    found = list(layout.select({"name": name}))
    assert len(found) == 1, f"{name}: {len(found)} models"
    return found[0]


def _colour_of(data: dict, name: str) -> str:
    return data["color"][data["name"].index(name)]


def test_lanes_per_stream_and_thread_in_order() -> None:
    data = timeline.collect(small_profile())
    # pid == tid == 1: the process' main thread.
    assert [ln.label for ln in data.lanes] == [
        "steps",
        "main thread: ops",
        "main thread: CUDA calls",
        "GPU 0 stream 7",
        "GPU 0 stream 13",
    ]
    # 1 step + 3 top-level ops (the nested aten::linear is not drawn) + 3 runtime calls
    # + 4 kernels + 1 memcpy
    assert data.event_count == 12
    assert "aten::linear" not in set(data.sigs["name"])
    assert list(np.diff(data.lane_offsets)) == [1, 3, 3, 4, 1]


def test_threads_are_named_by_what_they_are() -> None:
    ops = pd.DataFrame(
        {"pid": [5, 5, 5], "tid": [5, 9, -1220540864],
         "name": ["aten::mm", "autograd::engine::evaluate_function: MmBackward0", "x"]}
    )  # fmt: skip
    names = events.thread_names([(5, 5), (5, 9), (5, -1220540864), (5, 12)], ops)
    assert names == {
        (5, 5): "main thread",
        (5, 9): "autograd thread",
        (5, -1220540864): "thread #1",
        (5, 12): "thread 12",
    }


def test_no_empty_lanes() -> None:
    p = small_profile()
    # A stream whose only event has no duration still holds an event; an unknown lane
    # would not be drawn at all. Every lane of the build holds at least one event.
    data = timeline.collect(p)
    assert (np.diff(data.lane_offsets) > 0).all()


def test_small_trace_draws_exact_events_with_classes_from_analysis() -> None:
    p = small_profile()
    tl = timeline.build(p)
    out = draw(tl)
    d = detail(out)
    assert out["mode"] == "exact" and len(d["left"]) == 12 and len(out["agg"]["left"]) == 0
    names = p.trace.kernels["name"].tolist()
    assert _colour_of(d, names[0]) == CLASSES["tensor_core"][1]
    assert _colour_of(d, names[1]) == CLASSES["memory"][1]
    assert _colour_of(d, names[3]) == CLASSES["communication"][1]
    assert _colour_of(d, "Memcpy HtoD (Pageable -> Device)") == CLASSES["copy_htod"][1]
    assert _colour_of(d, "cudaDeviceSynchronize") == CLASSES["runtime_sync"][1]
    # Positions: µs since the first event (the step at ts=40).
    i = d["name"].index(names[0])
    assert (d["left"][i], d["right"][i]) == (60.0, 210.0)
    assert set(tl.classes) >= {"tensor_core", "memory", "communication", "copy_htod", "step"}


def test_the_bokeh_document_carries_no_drawn_glyphs_and_no_events() -> None:
    """First paint is the browser's: the drawn sources are empty in the Bokeh document,
    and the events travel once, as the timeline document's typed columns."""
    tl = timeline.build(synthetic_profile(2_000))
    for kind in timeline.DETAIL_KINDS:
        assert source(tl, f"nbprof-detail-{kind}")["left"] == []
    assert source(tl, "nbprof-aggregate")["left"] == []
    assert not list(tl.layout.select({"name": "nbprof-store"}))
    assert {k: c.values.dtype.name for k, c in tl.doc.events.items()} == {
        "dx": "uint32", "dd": "uint32", "sig": "uint16", "dl": "int32",
    }  # fmt: skip
    assert tl.meta["events"]["dx"]["length"] == tl.data.event_count


def test_colours_follow_the_kernel_class_table_not_the_names() -> None:
    p = small_profile()
    p.diagnosis.kernel_class.loc[0, "cls"] = "compute"
    d = detail(draw(timeline.build(p)))
    assert _colour_of(d, p.trace.kernels["name"][0]) == CLASSES["compute"][1]


def test_missing_kernel_class_table_draws_grey_with_a_note() -> None:
    p = small_profile()
    del p.diagnosis.tables["kernel_class"]
    tl = timeline.build(p)
    d = detail(draw(tl))
    assert _colour_of(d, p.trace.kernels["name"][0]) == CLASSES["kernel"][1]
    assert any("Kernel classes unavailable" in n for n in tl.notes)


def test_hover_shows_short_name_duration_grid_block_occupancy() -> None:
    tl = timeline.build(small_profile())
    hover = _model(tl.layout, "nbprof-hover-events")
    for f in ("@short", "@dur", "@grid", "@block", "@occ"):
        assert f in hover.tooltips
    # The full name is on demand (the details pane), never in the tooltip.
    assert "@name" not in hover.tooltips and "@full" not in hover.tooltips
    d = detail(draw(tl))
    i = d["name"].index(small_profile().trace.kernels["name"][0])
    assert (d["grid"][i], d["block"][i], d["occ"][i], d["op"][i]) == (
        "264",
        "128",
        "50 %",
        "aten::mm",
    )


def test_each_row_kind_hovers_with_only_the_fields_that_apply() -> None:
    tl = timeline.build(small_profile())
    d = detail(draw(tl))
    tip = dict(zip(d["name"], d["tip"], strict=True))
    kernel = small_profile().trace.kernels["name"][0]
    assert tip[kernel] == "kernel" and tip["Memcpy HtoD (Pageable -> Device)"] == "gpu"
    assert tip["cudaDeviceSynchronize"] == "runtime" and tip["aten::mm"] == "cpu"
    for kind, name in (("runtime", "nbprof-hover-runtime"), ("cpu", "nbprof-hover-cpu")):
        template = _model(tl.layout, name).tooltips
        for kernel_only in ("@grid", "@block", "@occ", "grid × block", "occupancy"):
            assert kernel_only not in template, (kind, kernel_only)
        hover = _model(tl.layout, name)
        glyph = _model(tl.layout, f"nbprof-detail-glyphs-{kind}")
        assert hover.renderers == [glyph]
        assert glyph.data_source.name == f"nbprof-detail-{kind}"
    assert "@extra" in _model(tl.layout, "nbprof-hover-copies").tooltips


def test_hover_templates_cap_the_size_and_insert_fields_as_text() -> None:
    from bokeh.models import HoverTool

    tl = timeline.build(small_profile())
    main = _model(tl.layout, "nbprof-timeline")
    hovers = [t for t in main.tools if isinstance(t, HoverTool)]
    assert len(hovers) == 6
    for h in hovers:
        # Bokeh HTML-escapes @fields in a template unless "{safe}" asks otherwise.
        assert "{safe}" not in h.tooltips
        assert f"max-width:{timeline.TOOLTIP_MAX_PX}px" in h.tooltips
        assert f"max-height:{timeline.TOOLTIP_MAX_HEIGHT_PX}px" in h.tooltips
        assert "overflow-wrap:anywhere" in h.tooltips


def test_long_template_names_read_by_function_and_key_arguments() -> None:
    p = small_profile()
    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<"
        "c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<"
        "c10::BFloat16>, at::detail::Array<char*, 3>)"
    )
    k = p.trace.kernels  # text is a Categorical: the new name is added first
    k["name"] = k["name"].cat.add_categories([long])
    p.trace.kernels.loc[0, "name"] = long
    d = detail(draw(timeline.build(p)))
    i = d["name"].index(long)
    assert d["short"][i] == "vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, Array<…>>"
    j = d["name"].index("cudaDeviceSynchronize")
    assert d["short"][j] == "cudaDeviceSynchronize"
    k = d["name"].index("Memcpy HtoD (Pageable -> Device)")
    assert d["short"][k] == "Memcpy HtoD (Pageable -> Device)"


@pytest.mark.parametrize("cap", [0, timeline.DEFAULT_CAP])
def test_gap_and_event_tooltips_never_share_a_point(cap: int) -> None:
    """The gap's hover area avoids every drawn glyph on its lane, exact or aggregate."""
    p = small_profile()
    # A gap that runs over the last kernel on stream 7 (at 400-405), as a coarse view would.
    p.diagnosis.idle_gaps.loc[0, ["start", "end"]] = [395.0, 750.0]
    out = draw(timeline.build(p, cap=cap, agg_cap=40))
    hover = out["gapHover"]
    drawn = out["agg"] if cap == 0 else detail(out)
    assert out["mode"] == ("aggregate" if cap == 0 else "exact")
    assert hover["left"], "some of the gap is hoverable"
    for a, b, lane in zip(hover["left"], hover["right"], hover["lane"], strict=True):
        for c, d, other in zip(drawn["left"], drawn["right"], drawn["lane"], strict=True):
            assert other != lane or d <= a or c >= b, ((a, b), (c, d))


def test_idle_gaps_shaded_in_their_stream_and_labelled_with_the_cause() -> None:
    tl = timeline.build(small_profile())
    out = draw(tl, 150.0, 300.0)
    g = out["gaps"]
    assert g["left"] == [210.0] and g["right"] == [260.0] and g["li"] == [3]
    assert g["cause"] == [list(GAP_CAUSES).index("host_wait")]
    # 50 µs of 150 on 1000 px: 333 px, wide enough for its label.
    assert out["gapLabels"]["text"] == [GAP_CAUSES["host_wait"][0]]
    assert _model(tl.layout, "nbprof-hover-gaps") is not None
    assert tl.gap_causes == ["host_wait"]
    # At 60 px wide the label does not fit: none is drawn rather than one spilling over.
    assert draw(tl, 0.0, 800.0, width=400)["gapLabels"]["text"] == []


def test_bar_labels_only_where_they_fit() -> None:
    tl = timeline.build(small_profile())
    wide = draw(tl, 0.0, 800.0, width=1600)["barLabels"]
    narrow = draw(tl, 0.0, 800.0, width=200)["barLabels"]
    assert "ncclDevKernel_AllReduce_Sum_f32_RING_LL" in wide["text"]
    # Each label fits its bar at ~6.5 px per character.
    assert all(len(t) * 6.5 <= 1600 for t in wide["text"])
    assert len(narrow["text"]) < len(wide["text"])


def test_search_marks_matching_events() -> None:
    tl = timeline.build(small_profile())
    out = draw(tl, query="nccl")
    assert len(out["marks"]["left"]) == 1
    assert len(draw(tl, query="/sm90|nccl/")["marks"]["left"]) == 2
    assert draw(tl, query="no such kernel")["marks"]["left"] == []


def test_kernels_link_to_their_launch_calls() -> None:
    p = small_profile()
    tl = timeline.build(p)
    out = draw(tl)
    d = detail(out)
    link = out["link"]
    kernel = d["i"][d["name"].index(p.trace.kernels["name"][0])]
    launch = link[kernel]
    assert launch >= 0 and link[launch] == kernel
    # The launch is a runtime call on the main thread, and started before the kernel.
    assert tl.data.lanes[int(np.searchsorted(tl.data.lane_offsets, launch, "right") - 1)].kind == (
        "runtime"
    )
    assert out["x"][launch] < out["x"][kernel]


def test_overview_strip_drives_the_main_range() -> None:
    from bokeh.models import RangeTool

    tl = timeline.build(small_profile())
    main = _model(tl.layout, "nbprof-timeline")
    ov = _model(tl.layout, "nbprof-overview")
    tools = [t for t in ov.tools if isinstance(t, RangeTool)]
    assert len(tools) == 1 and tools[0].x_range is main.x_range
    kinds = {type(t).__name__ for t in main.tools}
    assert {"WheelZoomTool", "BoxZoomTool", "PanTool", "ResetTool"} <= kinds
    # The time axis above and below: one is in view on a tall timeline.
    assert len(main.above) == 1 and len(main.below) == 1


def test_timeline_height_stays_readable() -> None:
    assert timeline.plot_height(2) == timeline.MIN_PLOT_PX
    assert timeline.plot_height(40) == 90 + 40 * timeline.LANE_PX
    assert timeline.plot_height(10_000) == timeline.MAX_PLOT_PX


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
    # The legend sits above the plot area (not over the lines, not beside: same width).
    legend = _model(tl.layout, "nbprof-samples-legend")
    assert legend in fig.above and legend.orientation == "horizontal"
    main = _model(tl.layout, "nbprof-timeline")
    assert (fig.min_border_left, fig.min_border_right) == (
        main.min_border_left,
        main.min_border_right,
    )


def test_samples_without_origin_are_omitted_with_a_note() -> None:
    tl = timeline.build(small_profile(samples=True, origin=False))
    assert not list(tl.layout.select({"name": "nbprof-samples"}))
    assert any("no wall-clock origin" in n for n in tl.notes)


def test_aggregate_busy_fraction_per_bin() -> None:
    tl = timeline.build(small_profile(), cap=0, agg_cap=5 * 8)
    out = draw(tl, 0.0, 800.0)
    agg = out["agg"]
    lane = [i for i, lab in enumerate(agg["lane"]) if lab == "GPU 0 stream 13"]
    busy = {int(agg["left"][i] // 100): round(agg["busy"][i], 6) for i in lane}
    # The kernel covers 110..710 µs: bins of 100 µs.
    assert busy == {1: 90.0, 2: 100.0, 3: 100.0, 4: 100.0, 5: 100.0, 6: 100.0, 7: 10.0}
    colours = {agg["color"][i] for i in lane}
    assert colours == {CLASSES["communication"][1]}


def test_exact_window_holds_the_overlapping_events() -> None:
    tl = timeline.build(small_profile())
    win = detail(draw(tl, 205.0, 215.0))
    assert sorted(win["lane"]) == ["GPU 0 stream 13", "GPU 0 stream 7", "steps"]


def test_exact_window_matches_a_brute_force_count_on_a_large_trace() -> None:
    tl = timeline.build(synthetic_profile(20_000))
    data = tl.data
    x0 = data.span * 0.4
    x1 = x0 + data.span / 500
    out = draw(tl, x0, x1)
    expected = np.flatnonzero((data.x <= x1) & (data.x + data.dur >= x0))
    assert out["mode"] == "exact"
    # Each is drawn as itself, or (narrower than a few pixels among others) counted in
    # its lane's one-pixel bins.
    drawn = sorted(detail(out)["i"])
    assert set(drawn) <= set(expected.tolist()) and len(drawn) > 10
    assert len(drawn) + sum(out["agg"]["events"]) == len(expected)


def test_encoding_round_trips_within_one_tick() -> None:
    data = timeline.collect(synthetic_profile(5_000))
    dx, dd, tick = store.encode_ticks(data)
    assert dx.dtype == np.uint32 and dd.dtype == np.uint32
    x = np.empty(len(dx))
    for a, b in zip(data.lane_offsets[:-1], data.lane_offsets[1:], strict=True):
        x[a:b] = np.cumsum(dx[a:b].astype(np.float64)) * tick
    assert np.abs(x - data.x).max() <= tick
    assert np.abs(dd * tick - data.dur).max() <= tick


def test_links_round_trip_through_their_encoding() -> None:
    data = timeline.collect(synthetic_profile(3_000))
    assert (data.link >= 0).sum() > 0
    out = draw(timeline.build(synthetic_profile(3_000)), width=10)
    assert out["link"] == data.link.tolist()


@pytest.mark.slow
def test_large_trace_draws_a_bounded_number_of_glyphs() -> None:
    p = synthetic_profile(200_000)
    tl = timeline.build(p)
    data = tl.data
    assert data.event_count > 400_000  # kernels + launches + ops + steps
    out = draw(tl)
    assert out["mode"] == "aggregate" and len(detail(out)["left"]) == 0
    assert 0 < len(out["agg"]["left"]) <= timeline.DEFAULT_AGG_CAP
    assert len(out["gaps"]["left"]) <= timeline.MAX_GAPS
    assert any("longest" in n for n in tl.notes)
    # Repeated kernels share signatures: the embedded name table stays small.
    assert len(data.sigs) < 100
    # A narrow window goes back to exact events, under the cap.
    x0 = data.span / 2
    n = int(np.count_nonzero((data.x <= x0 + 200.0) & (data.x + data.dur >= x0)))
    win = draw(tl, x0, x0 + 200.0)
    assert 0 < n <= timeline.DEFAULT_CAP and len(detail(win)["i"]) == n


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
    p.diagnosis.kernel_class.loc[1, "cls"] = "other"
    tl = timeline.build(p)
    d = detail(draw(tl))
    assert _colour_of(d, p.trace.kernels["name"][1]) == CLASSES["other"][1]
    assert "other" in tl.classes


def test_cuda_sync_records_sit_on_gpu_lanes_not_cpu_threads(corpus: Path) -> None:
    from nbprof import load

    p = load(
        corpus / "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    )
    labels = [ln.label for ln in timeline.collect(p).lanes]
    assert "GPU 0 context syncs" in labels and "GPU 0 stream 7 syncs" in labels
    # Old Kineto wrote pthread handles as tids: numbered, not "CPU -1220540864 runtime".
    assert not any("-1" in label for label in labels), labels
