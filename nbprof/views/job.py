"""The job dashboard: the job's verdict and fixes, the rank table, a rank x step heatmap,
then the straggler's own panel, and a timeline of every rank's GPU streams grouped by rank.
Computes nothing: every number is the analysis'.

Bokeh's JavaScript is inline, as in the single-run dashboard (no CDN, no server; in a
notebook, once per page: :func:`nbprof.views.dashboard.publish_loader`). The HTML is
templates/job.html's, which escapes the text from the traces (file names, device names,
verdicts that quote them).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from markupsafe import Markup

from nbprof import units, vocab
from nbprof.analysis.job import describe_missing
from nbprof.views import dashboard, panel, report, templating, timeline
from nbprof.views.assets import scripts

if TYPE_CHECKING:
    from bokeh.models import LayoutDOM

    from nbprof.job import Job

logger = logging.getLogger(__name__)

_CSS = (
    ".nbp-job table{border-collapse:collapse;font:12px/1.4 system-ui,sans-serif}"
    ".nbp-job th,.nbp-job td{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}"
    ".nbp-job th:first-child,.nbp-job td:first-child{text-align:left}"
    ".nbp-job tr.nbp-straggler td{font-weight:600;background:rgba(227,26,28,.08)}"
    ".nbp-job .nbp-fix{margin:4px 0 4px 16px}"
)


def heatmap(job: Job, value: str = "dur") -> LayoutDOM:
    """Ranks (rows) by ProfilerSteps (columns), coloured by step time (``value="dur"``) or
    by exposed communication (``"exposed_comm_us"``); hover says rank, step and both."""
    from bokeh.models import ColorBar, ColumnDataSource, HoverTool, LinearColorMapper
    from bokeh.palettes import Viridis256
    from bokeh.plotting import figure

    st = job.steps
    ranks = [str(r.rank) for r in job.diagnosis.ranks]
    steps = sorted({str(s) for s in st["step"]}, key=int) if len(st) else ["(none)"]
    src = ColumnDataSource(
        {
            "rank": st["rank"].astype(str).tolist(),
            "step": st["step"].astype(str).tolist(),
            "value": (st[value].fillna(0.0) / 1e3).tolist(),
            "dur": [units.duration(v) for v in st["dur"]],
            "exposed": [units.duration(v) for v in st["exposed_comm_us"]],
        }
    )
    vals = src.data["value"] or [0.0]
    mapper = LinearColorMapper(palette=Viridis256, low=min(vals), high=max(max(vals), 1e-9))
    what = "step time" if value == "dur" else "exposed communication"
    fig = figure(
        x_range=steps,
        y_range=list(reversed(ranks)),
        height=max(160, 22 * len(ranks) + 80),
        sizing_mode="stretch_width",
        title=f"{what} per rank and ProfilerStep (ms, read from the trace)",
        tools="hover,save",
        toolbar_location="right",
        x_axis_label="ProfilerStep",
        y_axis_label="rank",
        name="nbprof-job-heatmap",
    )
    fig.rect("step", "rank", 1, 1, source=src, line_color=None,
             fill_color={"field": "value", "transform": mapper})  # fmt: skip
    hover = fig.select_one(HoverTool)
    hover.tooltips = [("rank", "@rank"), ("step", "@step"), ("step time", "@dur"),
                      ("exposed communication", "@exposed")]  # fmt: skip
    fig.add_layout(ColorBar(color_mapper=mapper, title="ms"), "right")
    fig.grid.visible = False
    return fig


class RankRow(NamedTuple):
    straggler: bool
    #: the rank table's cells, in its columns' order
    cells: list[str]


class JobVerdict(NamedTuple):
    label: str
    summary: str
    fixes: list[str]
    confidence: str
    cause: str
    facts: list[str]


def _shared_gpu(job: Job) -> str | None:
    """The one GPU model of every rank, said once below the table, not on each row."""
    gpus = list(dict.fromkeys(str(r.device_name or r.device) for r in job.diagnosis.ranks))
    return gpus[0] if len(gpus) == 1 else None


def _rank_rows(job: Job, shared: str | None) -> list[RankRow]:
    rows = []
    for r in job.diagnosis.ranks:
        steps = list(r.steps.values())
        gpu = [] if shared is not None else [str(r.device_name or r.device)]
        cells = [
            str(r.rank), *gpu, units.duration(r.gpu_span_us),
            _pct(r.kernel_busy_pct), _pct(r.compute_busy_pct), _pct(r.exposed_comm_pct),
            _pct(r.wait_pct), _pct(r.idle.get("host")), _pct(r.idle.get("sync")),
            units.duration(float(np.median(steps))) if steps else units.NA,
            f"{r.last_count} of the {r.collective_count} collectives",
            vocab.term(r.bottleneck).label,
        ]  # fmt: skip
        rows.append(RankRow(r.rank in job.stragglers, cells))
    return rows


def _pct(v: float | None) -> str:
    return units.pct(v)


def _verdict(job: Job) -> JobVerdict:
    v = job.diagnosis.verdict
    label = vocab.term(v.bottleneck).label
    return JobVerdict(
        label, v.summary, list(v.fixes), v.confidence, v.cause.replace("_", " "), list(v.facts)
    )


def timeline_section(job: Job) -> tuple[Markup, list[str]]:
    """The job's timeline (each rank's GPU streams, grouped by rank), and its notes."""
    data, gaps = timeline.collect_job(job)
    tl = timeline.build(None, data=data, idle_gaps=gaps)
    return dashboard.timeline_section(tl, "Timeline of every rank"), list(tl.notes)


def fragment(job: Job, *, include_bokeh_js: bool = True) -> Markup:
    """The job dashboard as one HTML fragment (``include_bokeh_js=False``: the page loads
    BokehJS once, see :func:`nbprof.views.dashboard.publish_loader`)."""
    from bokeh.embed import components

    d = job.diagnosis
    heatmap_div = heatmap_script = Markup()
    heatmap_error = ""
    try:
        script, div = components(heatmap(job))
        heatmap_div, heatmap_script = templating.trusted(div), templating.trusted(script.strip())
    except Exception as e:  # the tables still say everything
        logger.exception("job heatmap failed")
        heatmap_error = f"{type(e).__name__}: {e}"
    straggler = None
    if d.stragglers:
        rank = d.stragglers[0].rank
        straggler = {"rank": rank, "panel": panel.render(job.rank(rank))}
    notes = [*job.notes, *d.notes]
    tl_html = Markup()
    try:
        tl_html, tl_notes = timeline_section(job)
        notes += tl_notes
    except Exception as e:  # the tables and the heatmap still say everything
        logger.exception("job timeline failed")
        notes.append(f"The timeline could not be drawn: {type(e).__name__}: {e}")
    shared = _shared_gpu(job)
    return templating.render(
        "job.html",
        css=templating.trusted(panel.CSS + _CSS),
        bokeh_js=templating.trusted(dashboard.bokeh_js()) if include_bokeh_js else "",
        # The folder's name reads at a glance; its full path is on hover.
        title=f"nbprof · {Path(d.source).name or d.source} · job of {len(d.ranks)} ranks",
        source=d.source,
        verdict=_verdict(job),
        shared_gpu=shared,
        ranks=_rank_rows(job, shared),
        clock=d.clock.label(),
        heatmap_div=heatmap_div,
        heatmap_script=heatmap_script,
        heatmap_error=heatmap_error,
        missing=[describe_missing(m) for m in d.missing],
        straggler=straggler,
        timeline=tl_html,
        note_items=notes,
        scripts=templating.trusted(scripts()),
    )


def page(job: Job) -> str:
    """The job dashboard as a standalone HTML document (works offline)."""
    return report.page(f"nbprof · {job.diagnosis.source}", fragment(job))


def mimebundle(job: Job) -> dict[str, Any]:
    """The job dashboard and its text report; in a Jupyter kernel BokehJS comes from the
    page's load bundle, published first when the page may lack it."""
    plain = job.text()
    try:
        small = dashboard._kernel_shell() is not None and not dashboard._on_colab()
        if small:
            dashboard.publish_loader()
        html = fragment(job, include_bokeh_js=not small)
    except Exception as e:  # never let display() raise
        logger.exception("job dashboard failed")
        html = dashboard.failed(plain, "dashboard", e)
    return {"text/html": str(html), "text/plain": plain}
