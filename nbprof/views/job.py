"""The job dashboard: the job's verdict and fixes, the rank table, a rank x step heatmap,
then the straggler's own panel, and a timeline of every rank's GPU streams grouped by rank.
Computes nothing: every number is the analysis'.

Bokeh's JavaScript is inline, as in the single-run dashboard (no CDN, no server; in a
notebook, once per page: :func:`nbprof.views.dashboard.publish_loader`). Text from the
traces (file names, device names, verdicts that quote them) is escaped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbprof import units, vocab
from nbprof.views import dashboard, panel, timeline
from nbprof.views._style import esc
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


def _rank_table(job: Job) -> str:
    d = job.diagnosis
    # One GPU model on every rank is said once, below the table, not on each row.
    gpus = list(dict.fromkeys(r.device_name or r.device for r in d.ranks))
    shared = gpus[0] if len(gpus) == 1 else None
    gpu_head = "" if shared is not None else "<th>GPU</th>"
    head = (
        f"<tr><th>rank</th>{gpu_head}<th>span</th><th>kernels busy</th><th>compute busy</th>"
        "<th>exposed comm</th><th>waiting for others</th><th>idle: host</th><th>idle: sync</th>"
        "<th>steps (median)</th><th>last to arrive at</th><th>its own verdict</th></tr>"
    )
    rows = []
    import numpy as np

    for r in d.ranks:
        cls = ' class="nbp-straggler"' if r.rank in job.stragglers else ""
        steps = list(r.steps.values())
        gpu = "" if shared is not None else f"<td>{esc(r.device_name or r.device)}</td>"
        rows.append(
            f"<tr{cls}><td>{r.rank}</td>{gpu}"
            f"<td>{esc(units.duration(r.gpu_span_us))}</td><td>{_pct(r.kernel_busy_pct)}</td>"
            f"<td>{_pct(r.compute_busy_pct)}</td><td>{_pct(r.exposed_comm_pct)}</td>"
            f"<td>{_pct(r.wait_pct)}</td><td>{_pct(r.idle.get('host'))}</td>"
            f"<td>{_pct(r.idle.get('sync'))}</td>"
            f"<td>{esc(units.duration(float(np.median(steps))) if steps else units.NA)}</td>"
            f"<td>{r.last_count} of the {r.collective_count} collectives</td>"
            f"<td>{esc(vocab.term(r.bottleneck).label)}</td></tr>"
        )
    on = f"every rank on {esc(shared)} · " if shared is not None else ""
    return (
        f'<table class="nbp-ranks">{head}{"".join(rows)}</table>'
        f'<div class="nbp-basis">{on}% of each rank\'s GPU span, read from the trace; '
        f"waits: {esc(d.clock.label())}</div>"
    )


def _pct(v: float | None) -> str:
    return units.pct(v)


def _verdict(job: Job) -> str:
    v = job.diagnosis.verdict
    fixes = "".join(
        f'<div class="nbp-fix">Fix {i}: {esc(f)}</div>' for i, f in enumerate(v.fixes, 1)
    )
    label = vocab.term(v.bottleneck).label
    return (
        f'<div class="nbp-verdict"><h3>{esc(label)}</h3><p>{esc(v.summary)}</p>'
        f"{panel.facts_html(v.facts)}{fixes}"
        f'<div class="nbp-basis">{esc(v.confidence)} confidence · decided by '
        f"{esc(v.cause.replace('_', ' '))}</div></div>"
    )


def timeline_section(job: Job) -> tuple[str, list[str]]:
    """The job's timeline (each rank's GPU streams, grouped by rank), and its notes."""
    data, gaps = timeline.collect_job(job)
    tl = timeline.build(None, data=data, idle_gaps=gaps)
    return dashboard.timeline_section(tl, "Timeline of every rank"), list(tl.notes)


def fragment(job: Job, *, include_bokeh_js: bool = True) -> str:
    """The job dashboard as one HTML fragment (``include_bokeh_js=False``: the page loads
    BokehJS once, see :func:`nbprof.views.dashboard.publish_loader`)."""
    from bokeh.embed import components

    d = job.diagnosis
    # The folder's name reads at a glance; its full path is on hover.
    name = Path(d.source).name or d.source
    title = f"nbprof · {name} · job of {len(d.ranks)} ranks"
    parts = [
        f'<h2 title="{esc(d.source)}">{esc(title)}</h2>',
        _verdict(job),
        "<h3>Ranks</h3>",
        _rank_table(job),
    ]
    js = f"<script>{dashboard.bokeh_js()}</script>" if include_bokeh_js else ""
    try:
        hm = heatmap(job)
        script, div = components(hm)
        parts += [f'<div class="nbp-heatmap">{div}</div>{script}']
    except Exception as e:  # the tables still say everything
        logger.exception("job heatmap failed")
        parts.append(f"<p>The heatmap could not be drawn: {esc(type(e).__name__)}: {esc(e)}</p>")
    if d.missing:
        from nbprof.analysis.job import describe_missing

        items = "".join(f"<li>{esc(describe_missing(m))}</li>" for m in d.missing)
        parts.append(f"<h3>Missing ranks</h3><ul>{items}</ul>")
    if d.stragglers:
        s = d.stragglers[0]
        parts.append(f"<h3>Rank {s.rank}, the straggler, on its own</h3>")
        parts.append(panel.render(job.rank(s.rank)))
    notes = [*job.notes, *d.notes]
    try:
        tl_html, tl_notes = timeline_section(job)
        parts.append(tl_html)
        notes += tl_notes
    except Exception as e:  # the tables and the heatmap still say everything
        logger.exception("job timeline failed")
        notes.append(f"The timeline could not be drawn: {type(e).__name__}: {e}")
    if notes:
        parts.append("<h3>Notes</h3><ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return (
        f'<style>{panel.CSS}{_CSS}</style>{js}<div class="nbprof nbp-job">{"".join(parts)}</div>'
        f"<script>{scripts()}</script>"
    )


def page(job: Job) -> str:
    """The job dashboard as a standalone HTML document (works offline)."""
    title = f"nbprof · {job.diagnosis.source}"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{esc(title)}</title>\n</head>\n<body>\n{fragment(job)}\n</body>\n</html>\n"
    )


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
        html = f'<pre class="nbprof">{esc(plain)}</pre><p>dashboard failed: {esc(e)}</p>'
    return {"text/html": html, "text/plain": plain}
