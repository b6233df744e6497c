"""HTML from Jinja2 templates (package data: nbprof/views/templates/), autoescaped.

Every value a view hands a template is escaped on output, whatever it holds: a kernel
name such as ``at::native::<lambda>``, a ``<script>`` in a device name, quotes in an
attribute. Only :class:`~markupsafe.Markup` goes out as it is, and a view makes Markup of
nothing but HTML it built itself: another rendered template, nbprof's own CSS and
scripts, Bokeh's library and embed markup, and JSON escaped for a ``<script>`` element
(:func:`json_script`). Templates never mark a value safe themselves.

An undefined name is an error, not an empty string, so a misspelt field cannot vanish
from a page silently.
"""

from __future__ import annotations

import json
from typing import Any

import jinja2
from markupsafe import Markup

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("nbprof.views", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    # A line holding only a block tag leaves nothing behind in the HTML.
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(name: str, **context: Any) -> Markup:
    """Template ``name`` (a file in nbprof/views/templates/) rendered with ``context``,
    without the newlines around it: a template puts each fragment on a line of its own."""
    return Markup(_ENV.get_template(name).render(**context).strip("\n"))


def trusted(html: str) -> Markup:
    """HTML or CSS that nbprof itself made (its asset files, Bokeh's output): not escaped."""
    return Markup(html)


def json_script(obj: Any) -> Markup:
    """JSON for a <script> element: <, > and & as \\u escapes, so nothing in it (a trace's
    names included) can close the element or read as markup."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
