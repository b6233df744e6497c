"""The comparison views: plain text, the notebook bundle and the standalone page.

What they show is :class:`~nbprof.analysis.compare.Diff`'s, formatted: the two verdicts
side by side, the sentence of what changed, the step time, every metric before / after /
change, the kernels and top-level CPU ops that moved most, and both timelines stacked on
one time scale with linked x ranges (zooming one zooms the other to the same window).
The HTML is templates/compare.html's, which escapes every name from the traces; in text
they are stripped of control characters.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from markupsafe import Markup

from nbprof import units, vocab
from nbprof.views import dashboard, panel, report, templating, timeline
from nbprof.views._style import clip, plain, short_name, wrap
from nbprof.views.assets import asset, scripts

if TYPE_CHECKING:
    import pandas as pd

    from nbprof.analysis.compare import Diff, MetricDelta, Side
    from nbprof.comparison import Comparison
    from nbprof.views.timeline import Timeline

logger = logging.getLogger(__name__)

WIDTH = 88
TEXT_KERNELS = 10
TEXT_OPS = 8
HTML_ROWS = 25

#: Basis kinds as the tables' basis column shows them (the full basis is in the JSON and in
#: the HTML rows' hover).
_KIND_WORDS = {"measured": "measured", "trace": "trace", "estimated": "estimated"}
_KIND_LEGEND = (
    "basis: trace = read from the trace, estimated = inferred (from names or shapes), "
    "measured = hardware counters; nbprof analyze TRACE says how each was found; metrics "
    "unknown or zero in both runs are left out"
)
#: What "same" means, with how it was tested when the runs have steps to test it by.
_SAME_PRECISION = "same = no change at the precision shown"
_SAME_NOISE = (
    _SAME_PRECISION + ", or within the step-to-step variation (under two standard errors of "
    "the difference)"
)


_UNTESTED = (
    " (the runs have too few whole steps to measure the step-to-step variation: a "
    "difference may still be noise)"
)


def _legend(d: Diff) -> str:
    tested = any(m.within_noise is not None for m in d.metrics)
    if not tested:
        return f"{_SAME_PRECISION}{_UNTESTED}; {_KIND_LEGEND}"
    untested = [
        m.label
        for m in d.metrics
        if _shown(m) and judgement(m) and m.within_noise is None and m.delta is not None
    ]
    if untested:
        return (
            f"{_SAME_NOISE}; judged at the precision shown only, with too few whole steps to "
            f"measure their variation: {', '.join(untested)}; {_KIND_LEGEND}"
        )
    return f"{_SAME_NOISE}; {_KIND_LEGEND}"


def judged_notes(d: Diff) -> list[str]:
    """Why a shown metric's change is not judged ("achieved TFLOP/s not judged: before:
    FLOPs known for 3.0% of kernel time")."""
    return [f"{m.label} not judged: {m.note}" for m in d.metrics if m.note and _shown(m)]


# -- formatting (no numbers computed here: only printed) ---------------------------------


def fmt_value(unit: str, v: float | None) -> str:
    return units.amount(v, unit)


def fmt_delta(unit: str, d: float | None) -> str:
    """A change: percentage points for a share, else the signed amount."""
    if d is None or units.missing(d):
        return units.NA
    if unit == "%":
        return units.points(d)
    return units.signed(units.amount(abs(d), unit), d)


def judgement(m: MetricDelta) -> str:
    """better / worse / same (no change at the precision shown, or within the step-to-step
    variation), or "" for a metric with no better direction or one not judged (its note
    says why)."""
    if m.note:
        return ""
    if m.better is True:
        return "better"
    if m.better is False:
        return "worse"
    if m.direction is not None and m.delta is not None:
        return "same"
    return ""


def _kind(m: MetricDelta) -> str:
    kinds = [
        _KIND_WORDS.get(b.kind, b.kind) for b in (m.basis_before, m.basis_after) if b is not None
    ]
    kinds = [k for k in dict.fromkeys(kinds) if k != "unknown"]
    return " / ".join(kinds) or "unknown"


def _basis_title(m: MetricDelta) -> str:
    parts = []
    for side, b in (("before", m.basis_before), ("after", m.basis_after)):
        if b is not None:
            parts.append(f"{side}: {b.label()}")
    return "; ".join(parts) or "basis not recorded"


def _shown(m: MetricDelta) -> bool:
    """Metrics known in a run and not zero in both (a trace without collectives or graph
    captures would otherwise list a row of zeros for each); the JSON keeps every one."""
    if m.before is None and m.after is None:
        return False
    return not (m.before in (0.0, None) and m.after in (0.0, None))


def _label(bottleneck: str) -> str:
    return vocab.term(bottleneck).label


def _per_words(d: Diff) -> str:
    return "per step" if d.per == "step" else "per run"


def _device_words(s: Side) -> str:
    dev = s.device
    if dev is None:
        return "no GPU activity"
    rank = f"rank {dev.rank} · " if dev.rank else ""
    return f"{rank}GPU {dev.device}: {dev.name or 'unknown GPU'}"


def _devices_words(d: Diff) -> str:
    b, a = _device_words(d.before), _device_words(d.after)
    return b if b == a else f"{b} -> {a}"


def _step_line(d: Diff) -> str:
    st = d.step_time
    what = {"mean_step": "Mean step", "gpu_span": "GPU span", "cpu_span": "Traced CPU time"}[
        st.statistic
    ]
    if st.before_ms is None or st.after_ms is None:
        return f"{what}: unknown (a run has nothing to measure it by)"
    line = f"{what}: {units.duration(st.before_ms * 1e3)} -> {units.duration(st.after_ms * 1e3)}"
    r = st.ratio
    if st.change == "same":
        line += ", the same"
    elif st.change == "within_noise" and r is not None:
        line += f" ({r:.2f}x), within the step-to-step variation"
    elif st.change == "faster" and r is not None:
        line += f", {r:.2f}x faster"
    elif st.change == "slower" and r is not None:
        line += f", {1 / r:.2f}x slower"
    return line


def _speed(ratio: float) -> str:
    """A before ÷ after time ratio in the words the step line uses: "1.39x faster"."""
    if round(ratio, 2) == 1.0 or round(1 / ratio, 2) == 1.0:
        return f"{ratio:.2f}x"
    return f"{ratio:.2f}x faster" if ratio > 1 else f"{1 / ratio:.2f}x slower"


def _step_basis(d: Diff) -> str:
    st = d.step_time
    text = st.basis
    if st.median_before_ms is not None and st.median_after_ms is not None:
        text += (
            f"; medians {units.duration(st.median_before_ms * 1e3)} and "
            f"{units.duration(st.median_after_ms * 1e3)}"
            + (f" ({_speed(st.median_ratio)})" if st.median_ratio else "")
        )
    return text


def _change_word(change: str) -> str:
    return {"new": "new", "gone": "gone"}.get(change, "")


# -- text -------------------------------------------------------------------------------


def text(cmp: Comparison, *, width: int = WIDTH) -> str:
    """The plain-text comparison: what ``nbprof compare`` prints and the text/plain bundle."""
    lines = ["nbprof compare"]
    lines += wrap(f"before: {cmp.before.trace.source}", width, first="  ", indent="    ")
    lines += wrap(f"after:  {cmp.after.trace.source}", width, first="  ", indent="    ")
    lines.append("=" * width)
    try:
        d = cmp.diff
    except Exception as e:  # a failed analysis still says which side and why
        logger.exception("comparison failed")
        lines += wrap(f"The comparison failed: {type(e).__name__}: {e}", width)
        return "\n".join(map(plain, lines)) + "\n"
    for w in d.warnings:
        lines += wrap(f"WARNING: {w}", width, indent="  ")
    if d.warnings:
        lines.append("")
    lines += wrap(f"What changed: {d.summary}", width, indent="  ")
    lines.append("")
    for side, s in (("Before:", d.before), ("After: ", d.after)):
        head = f"{side} {_label(s.verdict.bottleneck)}. "
        lines += wrap(head + s.verdict.summary, width, indent="        ")
    lines.append("")
    lines += wrap(_step_line(d), width)
    lines += wrap(f"basis: {_step_basis(d)}", width, first="  ", indent="    ")
    lines += ["", *_metrics_text(d, width)]
    lines += ["", *_names_text(d.kernels, "Kernels", d, TEXT_KERNELS, width)]
    lines += ["", *_names_text(d.ops, "Top-level CPU ops", d, TEXT_OPS, width)]
    return "\n".join(map(plain, lines)) + "\n"


def _metrics_text(d: Diff, width: int) -> list[str]:
    out = wrap(f"Metrics ({_devices_words(d)}; amounts {_per_words(d)}):", width, indent="  ")
    shown = [m for m in d.metrics if _shown(m)]
    if not shown:
        return [*out, "  none known: neither run recorded GPU activity."]
    out.append(f"  {'metric':<30} {'before':>11} {'after':>11} {'change':>13}         basis")
    for m in shown:
        row = (
            f"  {m.label:<30} {fmt_value(m.unit, m.before):>11} {fmt_value(m.unit, m.after):>11}"
            f" {fmt_delta(m.unit, m.delta):>13}  {judgement(m):<6} {_kind(m)}"
        )
        out.append(clip(row, width))
    for n in judged_notes(d):
        out += wrap(n + ".", width, first="  ", indent="    ")
    out += wrap(_legend(d) + ".", width, first="  ", indent="  ")
    return out


def _names_text(t: pd.DataFrame, what: str, d: Diff, n: int, width: int) -> list[str]:
    if t is None or not len(t):
        return [f"{what}: none in either run."]
    new = int((t["change"] == "new").sum())
    gone = int((t["change"] == "gone").sum())
    out = wrap(
        f"{what} by normalized name ({_per_words(d)}; {len(t)} names, {new} new, {gone} gone), "
        f"biggest movers first:",
        width,
        indent="  ",
    )
    out.append(f"  {'before':>10} {'after':>10} {'change':>10} {'calls':>13}  name")
    for r in t.head(n).itertuples(index=False):
        calls = f"{_count(r.before_count)} -> {_count(r.after_count)}"
        word = _change_word(str(r.change))
        name = plain(short_name(str(r.name), 200))
        out.append(
            clip(
                f"  {_time(r.before_us, r.before_count):>10} {_time(r.after_us, r.after_count):>10}"
                f" {fmt_delta('µs', r.delta_us):>10} {calls:>13}  {word + ': ' if word else ''}"
                f"{name}",
                width,
            )
        )
    if len(t) > n:
        out.append(f"  ... {len(t) - n} more (Comparison.{_attr(what)}, or --json)")
    return out


def _time(us: float, count: float) -> str:
    """A group's time; "-" where the run has none of it (a new or a gone name)."""
    return units.duration(us) if count > 0 else "-"


def _attr(what: str) -> str:
    return "kernels" if what == "Kernels" else "ops"


def _count(v: float) -> str:
    return units.count(v)


# -- HTML -------------------------------------------------------------------------------


class SideBox(NamedTuple):
    which: str
    device: str
    verdict: panel.VerdictBox


class MetricRow(NamedTuple):
    name: str
    label: str
    before: str
    after: str
    change: str
    #: better / worse / same, or "" (no better direction)
    word: str
    kind: str
    basis: str


class NameRow(NamedTuple):
    change: str
    before: str
    after: str
    delta: str
    before_count: str
    after_count: str
    #: "new", "gone" or ""
    word: str
    short: str
    example: str


class NamesTable(NamedTuple):
    what: str
    attr: str
    open: bool
    #: None when neither run has any
    rows: list[NameRow] | None
    names: int
    new: int
    gone: int
    more: int


class TimelineBox(NamedTuple):
    which: str
    path: str
    origin: str
    shift: str
    html: Markup


def fragment(cmp: Comparison, *, include_bokeh_js: bool = True) -> Markup:
    """The comparison as one HTML fragment: ``<div class="nbprof nbp-compare">``.

    ``include_bokeh_js=False`` leaves BokehJS to the page (see
    :func:`nbprof.views.dashboard.page_loads_bokeh`); nbprof's own scripts are included.
    """
    d = cmp.diff
    timelines, legend, notes = _timelines(cmp, d)
    sides = [
        SideBox(which, _device_words(s), _verdict(s))
        for which, s in (("before", d.before), ("after", d.after))
    ]
    return templating.render(
        "compare.html",
        css=templating.trusted(panel.CSS + asset("compare.css")),
        bokeh_js=templating.trusted(dashboard.bokeh_js()) if include_bokeh_js else "",
        before=cmp.before.trace.source,
        after=cmp.after.trace.source,
        warnings=d.warnings,
        sides=sides,
        summary=d.summary,
        step=_step_line(d),
        step_basis=_step_basis(d),
        devices=_devices_words(d),
        per=_per_words(d),
        kind_legend=_legend(d),
        metric_notes=judged_notes(d),
        metrics=[_metric_row(m) for m in d.metrics if _shown(m)],
        tables=[
            _names_table(d.kernels, "Kernels", open_=True),
            _names_table(d.ops, "Top-level CPU ops", open_=False),
        ],
        timelines=timelines,
        legend=legend,
        note_items=list(dict.fromkeys(notes)),
        scripts=templating.trusted(scripts("compare_page.mjs")),
    )


def _verdict(s: Side) -> panel.VerdictBox:
    v = s.verdict
    return panel.verdict_box(
        v.bottleneck, v.summary, panel.confidence_text(v), getattr(v, "facts", [])
    )


def _metric_row(m: MetricDelta) -> MetricRow:
    return MetricRow(
        m.name, m.label, fmt_value(m.unit, m.before), fmt_value(m.unit, m.after),
        fmt_delta(m.unit, m.delta), judgement(m), _kind(m), _basis_title(m),
    )  # fmt: skip


def _names_table(t: pd.DataFrame, what: str, *, open_: bool) -> NamesTable:
    if t is None or not len(t):
        return NamesTable(what, _attr(what), open_, None, 0, 0, 0, 0)
    rows = [
        NameRow(
            change=str(r.change),
            before=_time(r.before_us, r.before_count),
            after=_time(r.after_us, r.after_count),
            delta=fmt_delta("µs", r.delta_us),
            before_count=_count(r.before_count),
            after_count=_count(r.after_count),
            word=_change_word(str(r.change)),
            short=short_name(str(r.name)),
            example=str(r.example),
        )
        for r in t.head(HTML_ROWS).itertuples(index=False)
    ]
    return NamesTable(
        what, _attr(what), open_, rows, len(t), int((t["change"] == "new").sum()),
        int((t["change"] == "gone").sum()), max(0, len(t) - HTML_ROWS),
    )  # fmt: skip


# -- the two timelines ------------------------------------------------------------------


def _timelines(cmp: Comparison, d: Diff) -> tuple[list[TimelineBox], Markup, list[str]]:
    """(the two timelines, their legend, notes). Each timeline is its own Bokeh document in
    its own ``.nbprof`` section (js/embed.mjs draws each); js/compare.mjs links their x
    ranges."""
    notes: list[str] = []
    built: list[tuple[str, Side, Timeline | None]] = []
    for which, prof, side in (("before", cmp.before, d.before), ("after", cmp.after, d.after)):
        tl: Timeline | None
        try:
            built_tl = timeline.build(prof)
        except Exception as e:  # the numbers above are still worth showing
            logger.exception("timeline failed")
            notes.append(f"The {which} timeline could not be drawn: {type(e).__name__}: {e}")
            tl = None
        else:
            notes += [f"{which}: {n}" for n in built_tl.notes]
            tl = built_tl
        built.append((which, side, tl))
    drawn = [tl for _, _, tl in built if tl is not None]
    if not drawn:
        return [], Markup(), notes
    shifts = share_scale(built)
    classes = list(dict.fromkeys(c for tl in drawn for c in tl.classes))
    causes = list(dict.fromkeys(c for tl in drawn for c in tl.gap_causes))
    boxes = [
        TimelineBox(
            which, str(side.source.get("path", "")), side.origin_basis, repr(shifts[which]),
            dashboard.timeline_html(tl),
        )
        for which, side, tl in built
        if tl is not None
    ]  # fmt: skip
    return boxes, panel.legend_html(classes, causes), notes


def share_scale(built: list[tuple[str, Side, Timeline | None]]) -> dict[str, float]:
    """Put the timelines on one time scale; returns each one's shift (which -> µs).

    Each keeps its own coordinates (µs since its first event); its shift is its origin (the
    first step or first GPU event) in them. Ticks are placed at round times since the
    origin and labelled so (compare_ticker.js, compare_tick_labels.js), and both ranges
    start on, and may pan over, the same window: the union of both runs. js/compare.mjs
    then moves each range with the other.
    """
    from bokeh.models import CustomJSTicker, CustomJSTickFormatter

    parts = []
    for which, side, tl in built:
        if tl is None:
            continue
        main = next(f for f in tl.figures if f.name == "nbprof-timeline")
        shift = (side.origin_us - tl.data.t0) if side.origin_us is not None else 0.0
        parts.append((which, tl, main, float(shift), side.origin_basis))
    if not parts:
        return {}
    lo = min(-shift for _, _, _, shift, _ in parts)
    hi = max(tl.data.span - shift for _, tl, _, shift, _ in parts)
    pad = (hi - lo) * 0.01 or 1.0
    for _, tl, main, shift, basis in parts:
        xr = main.x_range
        xr.bounds = (lo - pad + shift, hi + pad + shift)
        xr.start, xr.end = lo - pad + shift, hi + pad + shift
        for axis in main.below:  # the bottom axis (the top one carries no label)
            axis.axis_label = f"time since the {basis}"
        labels = CustomJSTickFormatter(code=asset("compare_tick_labels.js"), args={"shift": shift})
        code = asset("compare_ticker.js")
        ticker = CustomJSTicker(major_code=code, minor_code=code, args={"shift": shift})
        for fig in tl.figures:
            for axis in fig.xaxis:
                axis.ticker = ticker
                axis.formatter = labels
    return {which: shift for which, _, _, shift, _ in parts}


def mimebundle(cmp: Comparison) -> dict[str, Any]:
    """What ``Comparison._repr_mimebundle_`` returns: the HTML and the text."""
    plain_text = text(cmp)
    try:
        html = fragment(cmp, include_bokeh_js=not dashboard.page_loads_bokeh())
    except Exception as e:  # never let display() raise: the text still says what changed
        logger.exception("comparison view failed")
        html = dashboard.failed(plain_text, "comparison view", e)
    return {"text/html": str(html), "text/plain": plain_text}


def page(cmp: Comparison) -> str:
    """A complete HTML document (Bokeh's JavaScript inline: works offline from file://)."""
    title = f"nbprof compare · {cmp.before.trace.source} → {cmp.after.trace.source}"
    return report.page(title, fragment(cmp, include_bokeh_js=True))
