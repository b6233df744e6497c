"""The dashboard shown below a cell: diagnosis panel + timeline, as one HTML fragment.

Bokeh's JavaScript is inlined (no CDN, no server, no iframe, no ``push_notebook``) so the
output renders on Binder, JupyterHub, air-gapped clusters and in an exported HTML file.
Each display carries its own copy: a later output re-defines ``window.Bokeh`` with the
same version, and documents already rendered keep their views, so several dashboards in
one notebook all work. The panel is static HTML and stays readable where scripts do not
run (an untrusted notebook, nbconvert without JavaScript).

JupyterLab 4 and Notebook 7 run the inline scripts of a text/html output of a cell just
run (trusted); VS Code renders it in its notebook webview, which runs them once the
workspace is trusted. Nothing else needs installing: no extension, no jupyter_bokeh.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nbprof.views._style import esc

if TYPE_CHECKING:
    from nbprof.result import Profile

logger = logging.getLogger(__name__)


def fragment(profile: Profile, *, include_bokeh_js: bool = True) -> str:
    """The dashboard as an HTML fragment: ``<div class="nbprof">`` with styles and scripts."""
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    from nbprof.views import panel, timeline

    notes: list[str] = []
    tl_html = ""
    js = ""
    try:
        tl = timeline.build(profile)
    except Exception as e:  # the panel is still worth showing when drawing fails
        logger.exception("timeline failed")
        notes.append(f"The timeline could not be drawn: {type(e).__name__}: {e}")
    else:
        notes += tl.notes
        # Separate roots of one document (shared ranges still link them), not the Column:
        # in a stretch_width Column, Bokeh 3.9 leaves a 1 px sliver of the glyphs at the
        # canvas' left edge on first paint.
        script, divs = components(tuple(tl.figures))
        div = "".join(divs)
        if include_bokeh_js:
            js = bundle_for_objs_and_resources(tl.figures, INLINE).scripts(tag=True)
        hint = ""
        if tl.data.event_count:
            hint = (
                '<div class="nbp-basis">Scroll to zoom, drag to zoom into a range, pan with the '
                "toolbar's pan tool or by dragging the box in the overview strip; reset shows "
                "the whole run. Zoomed out, each lane shows how busy it was per time bin; "
                f"individual events appear once at most {timeline.DEFAULT_CAP:,} are in view."
                "</div>"
            )
        tl_html = (
            '<div class="nbp-legend-wrap"><h3>Timeline</h3>'
            f"{panel.legend_html(tl.classes, tl.gap_causes)}{hint}</div>"
            f'<div class="nbp-timeline">{div}</div>{script}'
        )
    body = panel.render(profile, extra_notes=notes)
    return f'<style>{panel.CSS}</style>{js}<div class="nbprof">{body}{tl_html}</div>'


def mimebundle(profile: Profile) -> dict[str, Any]:
    """What ``Profile._repr_mimebundle_`` returns: the dashboard and the text summary."""
    from nbprof.views import text

    plain = text.render(profile)
    try:
        html = fragment(profile)
    except Exception as e:  # never let display() raise: the text still says something useful
        logger.exception("dashboard failed")
        html = f'<pre class="nbprof">{esc(plain)}</pre><p>dashboard failed: {esc(e)}</p>'
    return {"text/html": html, "text/plain": plain}
