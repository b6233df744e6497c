"""The dashboard shown below a cell: diagnosis panel + timeline, as one HTML fragment.

BokehJS (1.29 MB, 0.47 MB deflated) is loaded once per notebook page, as Bokeh's own
notebook integration does (``output_notebook()``): a load bundle, here one
``application/javascript`` output (see :func:`loader_bundle`), published with
``%load_ext nbprof`` or with the first dashboard of a kernel session. Each dashboard output
is then small: the panel (static HTML), the Bokeh and timeline documents packed
(timeline/wire.py), and nbprof's own scripts (nbprof/views/js/), which embed the document
once BokehJS is there, whatever the order the outputs render in. JavaScript inline, no
CDN, no server, no iframe, no ``push_notebook``.

The loader is published again when the cell that held it runs again (its outputs are
replaced) or is deleted (JupyterLab says so in each execute request). Where it is gone all
the same (outputs cleared by hand), a dashboard says in its output how to make it draw, and
draws as soon as a loader runs. Outside a Jupyter kernel, and on Colab (each output in its
own frame), every dashboard carries BokehJS itself.

The panel stays readable where scripts do not run (an untrusted notebook, nbconvert
without JavaScript).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from markupsafe import Markup

from nbprof.views import panel, templating, text, timeline
from nbprof.views.assets import asset, deflated, scripts
from nbprof.views.timeline import wire

if TYPE_CHECKING:
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

JS_MIME = "application/javascript"
#: Type of the <script> holding a dashboard's Bokeh and timeline documents, packed
#: (timeline/wire.py; read by js/embed.mjs).
PAYLOAD_TYPE = "application/vnd.nbprof.pack"


@cache
def _bokeh_raw() -> str:
    """BokehJS as inline JavaScript (the core bundle: every model nbprof's views use;
    tests/test_views_timeline_wire.py checks that they need no other)."""
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    bundle = bundle_for_objs_and_resources([figure()], INLINE)
    # BokehJS registers itself on `this`: a <script> runs it with `this` the window, but
    # JupyterLab's application/javascript renderer runs it as a function body, where `this`
    # is undefined. Bokeh's own loader calls it with the window, as here.
    body = "\n".join(bundle.js_raw)
    return f"(function () {{\n{body}\n}}).call(globalThis);"


@cache
def bokeh_js() -> str:
    """BokehJS as an inline script, deflated (assets.deflated: 0.47 MB, not 1.27 MB)."""
    return deflated(_bokeh_raw())


@cache
def loader_js() -> str:
    """The load bundle's script: BokehJS, then the dashboards that waited for it."""
    return deflated(f"{_bokeh_raw()}\n{asset('loader.js')}")


def loader_bundle() -> dict[str, Any]:
    """The display bundle that loads BokehJS once per page (no visible output).

    One copy, as ``application/javascript``: Bokeh's own bundle carries BokehJS twice (also
    as ``application/vnd.bokehjs_load.v0+json`` for jupyter_bokeh), which doubles what
    every notebook stores. JupyterLab 4 and Notebook 7 run this one with their JavaScript
    renderer (they chose it over the jupyter_bokeh copy when both were there), nbconvert
    exports it as a <script>, VS Code runs it; all only for trusted outputs.
    """
    return {JS_MIME: loader_js()}


@dataclass
class _Loaded:
    """Where this kernel last published the loader: cell id and execution count."""

    cell: str | None = None
    execution: int | None = None
    published: bool = False


_LOADED = _Loaded()


def _kernel_shell() -> Any:
    """The IPython shell when it runs in a Jupyter kernel (it has a front end), else None."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def _request(shell: Any) -> tuple[str | None, int | None, list[str]]:
    """(cell id, execution count, ids of cells deleted since the last request) of the
    execute request running now; JupyterLab and Notebook 7 send the ids in its metadata."""
    try:
        parent = shell.kernel.get_parent("shell") or {}
    except Exception:  # an older or unusual kernel: no cell tracking
        parent = {}
    meta = parent.get("metadata") or {}
    cell = meta.get("cellId")
    deleted = meta.get("deletedCells") or []
    return (str(cell) if cell else None, getattr(shell, "execution_count", None), list(deleted))


def _loader_needed(shell: Any) -> bool:
    if not _LOADED.published:
        return True
    cell, execution, deleted = _request(shell)
    if _LOADED.cell is None or cell is None:
        return False  # no cell ids: once per kernel session
    if _LOADED.cell in deleted:
        return True
    # The cell that holds the loader runs again: its outputs are being replaced.
    return cell == _LOADED.cell and execution != _LOADED.execution


def publish_loader(force: bool = False) -> bool:
    """Publish the load bundle in the running cell when the page may lack it (``force``:
    always). Returns whether it was published; does nothing outside a Jupyter kernel."""
    shell = _kernel_shell()
    if shell is None or _on_colab():
        return False
    if not force and not _loader_needed(shell):
        return False
    from IPython.display import display

    display(loader_bundle(), raw=True)
    cell, execution, _ = _request(shell)
    _LOADED.cell, _LOADED.execution, _LOADED.published = cell, execution, True
    return True


def _on_colab() -> bool:
    return "google.colab" in sys.modules


def page_loads_bokeh() -> bool:
    """Whether an output should leave BokehJS to the page: in a Jupyter kernel (not Colab),
    where the load bundle is published first when the page may lack it."""
    small = _kernel_shell() is not None and not _on_colab()
    if small:
        publish_loader()
    return small


class Root(NamedTuple):
    """One Bokeh root of a timeline's document: the element it is drawn into."""

    element_id: str
    root_id: str
    #: "main", "samples" or "ov" (the overview strip): the CSS class says which.
    part: str


def embed_payload(tl: Any) -> tuple[list[Root], Markup]:
    """(roots, payload packed: timeline/wire.py) of the timeline's figures as one Bokeh document."""
    from bokeh.core.json_encoder import serialize_json
    from bokeh.embed.util import OutputDocumentFor, standalone_docs_json_and_render_items

    # Separate roots of one document (shared ranges still link them), not the Column:
    # in a stretch_width Column, Bokeh 3.9 leaves a 1 px sliver of the glyphs at the
    # canvas' left edge on first paint.
    with OutputDocumentFor(tl.figures, apply_theme=None):
        docs_json, [item] = standalone_docs_json_and_render_items(tl.figures)
    names = {f.id: f.name for f in tl.figures}
    parts = {"nbprof-timeline": "main", "nbprof-samples": "samples"}
    roots = [Root(r.elementid, r.id, parts.get(names.get(r.id) or "", "ov")) for r in item.roots]
    payload = {
        "docs_json": json.loads(serialize_json(docs_json)),
        "render_items": [item.to_json()],
        "meta": tl.meta,
    }
    # base64: nothing in it (a trace's names included) can close the element or be markup.
    return roots, templating.trusted(wire.pack(payload, tl.parts))


def timeline_section(tl: Any, title: str = "Timeline") -> Markup:
    """The timeline's section of a dashboard: its title, legend and zoom hint, then
    :func:`timeline_html`."""
    return templating.render(
        "timeline_section.html",
        title=title,
        legend=panel.legend_html(tl.classes, tl.gap_causes),
        cap=f"{timeline.DEFAULT_CAP:,}" if tl.data.event_count else "",
        timeline=timeline_html(tl),
    )


def timeline_html(tl: Any) -> Markup:
    """The timeline's container (search bar, Bokeh roots, details pane) and its payload;
    js/embed.mjs draws it into the ``.nbp-timeline`` of the closest ``.nbprof`` element."""
    roots, payload = embed_payload(tl)
    return templating.render(
        "timeline.html",
        roots=roots,
        payload=payload,
        payload_type=PAYLOAD_TYPE,
        groups=bool(tl.meta.get("groups")),
    )


def fragment(profile: Profile, *, include_bokeh_js: bool = True) -> Markup:
    """The dashboard as an HTML fragment: ``<div class="nbprof">`` with styles and scripts.

    ``include_bokeh_js=False`` leaves BokehJS out (the page loads it once; see
    :func:`publish_loader`); nbprof's own scripts are always included.
    """
    notes: list[str] = []
    tl_html = Markup()
    try:
        tl = timeline.build(profile)
    except Exception as e:  # the panel is still worth showing when drawing fails
        logger.exception("timeline failed")
        notes.append(f"The timeline could not be drawn: {type(e).__name__}: {e}")
    else:
        notes += tl.notes
        tl_html = timeline_section(tl)
    return templating.render(
        "dashboard.html",
        css=templating.trusted(panel.CSS),
        bokeh_js=templating.trusted(bokeh_js()) if include_bokeh_js else "",
        panel=panel.render(profile, extra_notes=notes),
        timeline=tl_html,
        scripts=templating.trusted(scripts()),
    )


def failed(plain: str, what: str, error: Exception) -> Markup:
    """What a display hook shows when its view failed: the text report, and why."""
    return templating.render("failed.html", text=plain, what=what, error=error)


def mimebundle(profile: Profile) -> dict[str, Any]:
    """What ``Profile._repr_mimebundle_`` returns: the dashboard and the text summary.

    In a Jupyter kernel the dashboard leaves BokehJS to the page's load bundle, which this
    publishes first when the page may lack it.
    """
    plain = text.render(profile)
    try:
        html = fragment(profile, include_bokeh_js=not page_loads_bokeh())
    except Exception as e:  # never let display() raise: the text still says something useful
        logger.exception("dashboard failed")
        html = failed(plain, "dashboard", e)
    return {"text/html": str(html), "text/plain": plain}
