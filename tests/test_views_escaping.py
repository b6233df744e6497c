"""Everything that comes from a trace is escaped in every HTML view: the dashboard below a
cell and its standalone page, the job dashboard and its page, the comparison and its page,
and what each shows when its view fails. The HTML comes from autoescaped templates
(nbprof/views/templates); none of them marks a value safe.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import markupsafe
import pytest
from golden import KinetoBuilder

import nbprof
from nbprof.views import compare, dashboard
from nbprof.views import job as job_view
from tests.jobs import write_job

TEMPLATES = Path(nbprof.__file__).parent / "views" / "templates"

#: A script, an ampersand, both quotes and a C++ lambda's template-like name, in one string.
HOSTILE = "<script>alert('x&y')</script> \"zq-quoted\" at::native::<lambda>()"
#: How it reads in the HTML source: as text, in an element or an attribute.
ESCAPED = str(markupsafe.escape(HOSTILE))


def assert_escaped(html: str) -> None:
    assert HOSTILE not in html
    assert "<script>alert" not in html
    assert "<lambda>" not in html, "a C++ name must read as text, not as a tag"
    assert '"zq-quoted"' not in html, "a quote from the trace would close an attribute"
    # ...and yet the reader sees it, whole (a title, a device name, a table cell).
    assert ESCAPED in html


def hostile_run(folder: Path, name: str, kernel: str = HOSTILE) -> Path:
    """A run on a GPU named HOSTILE, whose CPU op and (by default) kernel are named so."""
    b = KinetoBuilder(device_name=HOSTILE)
    b.step(1, 0.0, 1000.0)
    b.cpu_op(HOSTILE, 0.0, 50.0)
    b.kernel(kernel, 100.0, 400.0)
    return b.write(folder, f"{name}.json")


def hostile_job(folder: Path) -> nbprof.Job:
    write_job(folder)
    for f in folder.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["deviceProperties"][0]["name"] = HOSTILE
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "kernel" and ev["name"] == "volta_sgemm_128x64_nn":
                ev["name"] = HOSTILE
        f.write_text(json.dumps(doc))
    job = nbprof.load(folder, cache=False)
    assert isinstance(job, nbprof.Job)
    return job


def test_the_dashboard_and_its_page(tmp_path: Path) -> None:
    prof = nbprof.load(hostile_run(tmp_path, "t"), cache=False)
    assert_escaped(prof._repr_mimebundle_()["text/html"])
    assert_escaped(prof.to_html())


def test_the_job_dashboard_and_its_page(tmp_path: Path) -> None:
    job = hostile_job(tmp_path / "job")
    assert_escaped(job._repr_mimebundle_()["text/html"])
    assert_escaped(job.to_html())


def test_the_comparison_and_its_page(tmp_path: Path) -> None:
    before = hostile_run(tmp_path, "before")
    after = hostile_run(tmp_path, "after", kernel="volta_sgemm_128x64_nn")
    cmp = nbprof.compare(before, after, cache=False)
    assert_escaped(cmp._repr_mimebundle_()["text/html"])
    assert_escaped(cmp.to_html())


@pytest.mark.parametrize("view", [dashboard, job_view, compare])
def test_a_failing_view_shows_its_error_escaped(
    view: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object, **kwargs: object) -> str:
        raise RuntimeError(HOSTILE)

    monkeypatch.setattr(view, "fragment", boom)
    if view is job_view:
        shown = hostile_job(tmp_path / "job")
    elif view is compare:
        p = hostile_run(tmp_path, "t")
        shown = nbprof.compare(p, p, cache=False)
    else:
        shown = nbprof.load(hostile_run(tmp_path, "t"), cache=False)
    html = shown._repr_mimebundle_()["text/html"]
    assert f"failed: {ESCAPED}" in html
    assert_escaped(html)


def test_templates_never_mark_a_value_safe() -> None:
    # Only Python makes Markup, of HTML nbprof built itself (nbprof.views.templating).
    templates = sorted(TEMPLATES.glob("*.html"))
    assert templates
    for t in templates:
        text = t.read_text(encoding="utf-8").replace(" ", "")
        for marker in ("|safe", "autoescape", "Markup", "|e}", "|escape"):
            assert marker not in text, (t.name, marker)


def test_every_template_is_used() -> None:
    sources = [p.read_text(encoding="utf-8") for p in TEMPLATES.parent.glob("*.py")]
    sources += [t.read_text(encoding="utf-8") for t in TEMPLATES.glob("*.html")]
    for t in TEMPLATES.glob("*.html"):
        assert any(f'"{t.name}"' in s for s in sources), f"{t.name} is never rendered"


#: The name a kernel of the bundled DLRM trace is given: a tag with a handler, unquoted.
IMG = "<img src=x onerror=alert(1)>"
DLRM = Path(nbprof.__file__).parent / "data" / "param__dlrm_kineto_8ranks"


def hostile_dlrm(folder: Path, ranks: int) -> list[Path]:
    """The first ``ranks`` ranks of the bundled DLRM job, their busiest kernel named IMG."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for src in sorted(DLRM.glob("*.json.gz"))[:ranks]:
        doc = json.loads(gzip.decompress(src.read_bytes()))
        kernels = [ev for ev in doc["traceEvents"] if ev.get("cat") == "kernel"]
        busiest = max(kernels, key=lambda ev: ev["dur"])["name"]
        for ev in kernels:
            if ev["name"] == busiest:
                ev["name"] = IMG
        dst = folder / src.name.removesuffix(".gz")
        dst.write_text(json.dumps(doc))
        out.append(dst)
    return out


def assert_img_escaped(html: str, *, as_text: bool = True) -> None:
    assert IMG not in html and "<img" not in html
    if as_text:  # ...and yet the reader sees it, as text (a table's cell, a title)
        assert str(markupsafe.escape(IMG)) in html


def test_the_bundled_dlrm_rank_job_and_comparison(tmp_path: Path) -> None:
    (rank, other) = hostile_dlrm(tmp_path / "job", ranks=2)
    prof = nbprof.load(rank, cache=False)
    assert_img_escaped(prof._repr_mimebundle_()["text/html"])
    assert_img_escaped(prof.to_html())
    job = nbprof.load(tmp_path / "job", cache=False)
    assert isinstance(job, nbprof.Job)
    # A job's page names kernels only in its timeline, whose payload is packed
    # (views/timeline/wire.py): nothing of it can read as markup.
    assert_img_escaped(job._repr_mimebundle_()["text/html"], as_text=False)
    assert_img_escaped(job.to_html(), as_text=False)
    cmp = nbprof.compare(rank, other, cache=False)
    assert_img_escaped(cmp._repr_mimebundle_()["text/html"])
    assert_img_escaped(cmp.to_html())
