"""The standalone report: the dashboard as one HTML file that works offline from file://."""

from __future__ import annotations

from typing import TYPE_CHECKING

from markupsafe import Markup

from nbprof.views import templating
from nbprof.views.dashboard import fragment

if TYPE_CHECKING:
    from nbprof.result import Profile


def render(profile: Profile) -> str:
    """A complete HTML document: panel, legend and timeline, BokehJS and nbprof's scripts
    inline (one self-contained file)."""
    body = fragment(profile, include_bokeh_js=True)
    return page(f"nbprof · {profile.trace.source}", body)


def page(title: str, body: Markup) -> str:
    """``body`` (a dashboard, a job's or a comparison) as a complete document titled
    ``title``; the page, not the dashboard, sets the body's margins and background."""
    html = templating.render("page.html", title=title, body=body)
    return f"{html}\n"  # a file ends with a newline
