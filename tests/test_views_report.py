"""The standalone report and the notebook bundle: self-contained, escaped, on real traces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from views_data import HOSTILE, small_profile

from nbprof.views import assets, dashboard, report, text, timeline
from nbprof.views.timeline import wire

_EXTERNAL = re.compile(
    r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I
)


def _packs(html: str) -> list[str]:
    """The header of each payload the page carries (Bokeh and timeline documents), as JSON
    text."""
    import json

    found = re.findall(rf'<script type="{dashboard.PAYLOAD_TYPE}">([^<]*)</script>', html)
    return [json.dumps(wire.unpack(p)[0]) for p in found]


def _assert_self_contained(html: str) -> None:
    assert not _EXTERNAL.search(html), _EXTERNAL.search(html)
    assert "cdn.bokeh.org" not in html
    # Bokeh's JavaScript itself is in the page, not fetched, and so are nbprof's scripts.
    import bokeh

    assert f"<script>{dashboard.bokeh_js()}</script>" in html
    packs = _packs(html)
    assert packs and all(f'"version": "{bokeh.__version__}"' in p for p in packs)
    assert assets.scripts() in html


def test_report_is_a_complete_self_contained_document() -> None:
    html = report.render(small_profile())
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<title>nbprof · hand-built.json</title>" in html
    _assert_self_contained(html)
    # the inline bundle is Bokeh's own (a few hundred KB deflated), not a loader stub
    js = max(re.findall(r"<script[^>]*>(.*?)</script>", html, re.S), key=len)
    assert len(js) > 300_000 and js == dashboard.bokeh_js()
    assert 'class="nbp-verdict"' in html and 'class="nbp-root nbp-root-main"' in html


def test_profile_to_html_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    html = small_profile().to_html(out)
    assert out.read_text(encoding="utf-8") == html


def test_mimebundle_has_dashboard_html_and_text_summary() -> None:
    p = small_profile()
    bundle = dashboard.mimebundle(p)
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle["text/plain"] == text.render(p)
    html = bundle["text/html"]
    assert html.startswith("<style>") and '<div class="nbprof">' in html
    _assert_self_contained(html)
    ours = dashboard.fragment(p, include_bokeh_js=False)  # without Bokeh's own library
    assert "<iframe" not in ours and "push_notebook" not in ours and "localhost" not in ours
    assert p._repr_mimebundle_().keys() == bundle.keys()


def test_several_dashboards_do_not_share_element_ids() -> None:
    a = dashboard.mimebundle(small_profile())["text/html"]
    b = dashboard.mimebundle(small_profile())["text/html"]
    ids_a = set(re.findall(r'<div id="([^"]+)" data-root-id', a))
    ids_b = set(re.findall(r'<div id="([^"]+)" data-root-id', b))
    assert ids_a and ids_b and not ids_a & ids_b
    # CSS is scoped under .nbprof so one output cannot restyle the notebook
    css = a[len("<style>") : a.index("</style>")]
    selectors = re.findall(r"(?:^|})\s*([^{}@]+)\{", css)
    assert selectors and all(s.strip().startswith(".nbprof") for s in selectors)


def test_panel_is_static_html_ahead_of_any_script() -> None:
    # nbconvert or an untrusted notebook drop scripts: the diagnosis must not need them.
    html = dashboard.fragment(small_profile(), include_bokeh_js=False)
    body = html[html.index('<div class="nbprof">') :]
    static = body[: body.index('<div class="nbp-legend-wrap">')]
    assert "<script" not in static
    assert "Copies from pageable memory" in static and "91.5" in static


@pytest.mark.parametrize("render", [report.render, lambda p: dashboard.mimebundle(p)["text/html"]])
def test_hostile_names_never_appear_unescaped(render) -> None:
    html = render(small_profile(hostile=True))
    for h in HOSTILE:
        assert h not in html
    assert "onerror=alert(1)>" not in html
    # but they are there, as text, for the reader
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_dashboard_survives_a_failing_timeline(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("<bad>")

    monkeypatch.setattr(timeline, "build", boom)
    html = dashboard.mimebundle(small_profile())["text/html"]
    assert "The timeline could not be drawn: RuntimeError: &lt;bad&gt;" in html
    assert "Copies from pageable memory" in html


# -- real traces -------------------------------------------------------------------------

_CORPUS = [
    "tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta__cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz",
    "param__dlrm_kineto_8ranks",
]


@pytest.mark.corpus
@pytest.mark.parametrize("name", _CORPUS)
def test_corpus_trace_renders(corpus: Path, name: str) -> None:
    from nbprof.loading import load

    # job=False: a rank folder read as one flat trace (nbprof.load gives a Job for it).
    p = load(corpus / name, job=False)
    tl = timeline.build(p)
    trace = p.trace
    gpu_lanes = {
        ("gpu", int(r), str(d), int(s))
        for t in (trace.kernels, trace.memcpy, trace.memset)
        for r, d, s in zip(t["rank"], t["device"], t["stream"], strict=True)
    }
    assert {ln.key for ln in tl.data.lanes if ln.kind == "gpu"} == gpu_lanes
    n_gpu = len(trace.kernels) + len(trace.memcpy) + len(trace.memset)
    gpu_events = sum(
        int(tl.data.lane_offsets[i + 1] - tl.data.lane_offsets[i])
        for i, ln in enumerate(tl.data.lanes)
        if ln.kind == "gpu"
    )
    assert gpu_events == n_gpu
    if len(trace.kernels):
        kc = p.diagnosis.kernel_class
        assert tl.classes and set(kc["cls"]) >= {
            k for k in tl.classes if k in ("tensor_core", "compute", "memory", "communication")
        }
    html = report.render(p)
    _assert_self_contained(html)
    assert 'class="nbp-verdict"' in html
    out = text.render(p)
    assert out.startswith("nbprof · ") and "Verdict:" in out
    assert all(len(line) <= text.WIDTH for line in out.splitlines())
    if len(p.diagnosis.devices) > 1:
        assert html.count('<details class="nbp-device"') >= len(p.diagnosis.devices)


def test_dashboard_survives_a_failing_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbprof.result import Profile

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("analysis broke")

    monkeypatch.setattr("nbprof.analysis.analyze", boom)
    p = Profile(small_profile(hostile=True).trace)
    bundle = dashboard.mimebundle(p)
    html = bundle["text/html"]
    assert "Analysis failed: RuntimeError: analysis broke" in html
    assert "Kernel classes unavailable" in html  # the timeline still draws, in grey
    assert any("nbprof-detail-kernel" in p for p in _packs(html))
    for h in HOSTILE:
        assert h not in html
    assert "Analysis failed" in bundle["text/plain"]


# -- BokehJS once per notebook page ---------------------------------------------------


class _Kernel:
    """What dashboard.publish_loader reads of ipykernel: the running execute request."""

    def __init__(self) -> None:
        self.metadata: dict[str, object] = {}

    def get_parent(self, channel: str) -> dict[str, object]:
        return {"metadata": self.metadata}


class _Shell:
    def __init__(self) -> None:
        self.kernel = _Kernel()
        self.execution_count = 1


@pytest.fixture
def notebook(monkeypatch: pytest.MonkeyPatch) -> tuple[_Shell, list[dict]]:
    """A fake Jupyter kernel: each display() call is recorded instead of sent."""
    import IPython
    import IPython.display

    shell = _Shell()
    shown: list[dict] = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    monkeypatch.setattr(dashboard, "_LOADED", dashboard._Loaded())
    return shell, shown


def _run(shell: _Shell, cell: str, deleted: list[str] | None = None) -> None:
    shell.execution_count += 1
    shell.kernel.metadata = {"cellId": cell, "deletedCells": deleted or []}


def test_in_a_notebook_bokehjs_comes_once_and_outputs_stay_small(notebook) -> None:
    shell, shown = notebook
    _run(shell, "cell-a")
    first = dashboard.mimebundle(small_profile())["text/html"]
    # One copy of BokehJS (Bokeh's own bundle stores two).
    assert len(shown) == 1 and set(shown[0]) == {dashboard.JS_MIME}
    assert shown[0][dashboard.JS_MIME] == dashboard.loader_js()  # BokehJS + loader.js
    assert dashboard.bokeh_js() not in first and assets.scripts() in first
    assert len(first) < 200_000
    _run(shell, "cell-b")
    dashboard.mimebundle(small_profile())
    dashboard.mimebundle(small_profile())
    assert len(shown) == 1, "later dashboards leave BokehJS to the page"


def test_the_loader_comes_again_when_its_cell_reruns_or_is_deleted(notebook) -> None:
    shell, shown = notebook
    _run(shell, "cell-a")
    dashboard.mimebundle(small_profile())
    dashboard.mimebundle(small_profile())  # same execution: one loader is enough
    assert len(shown) == 1
    _run(shell, "cell-a")  # re-run: its outputs, the loader among them, are replaced
    dashboard.mimebundle(small_profile())
    assert len(shown) == 2
    _run(shell, "cell-b", deleted=["cell-a"])
    dashboard.mimebundle(small_profile())
    assert len(shown) == 3
    _run(shell, "cell-c")
    dashboard.mimebundle(small_profile())
    assert len(shown) == 3


def test_outside_a_kernel_each_dashboard_carries_bokehjs() -> None:
    html = dashboard.mimebundle(small_profile())["text/html"]
    assert dashboard.bokeh_js() in html
    assert dashboard.publish_loader() is False


def test_payload_json_cannot_close_its_script() -> None:
    p = small_profile()
    k = p.trace.kernels  # text is a Categorical: the new name is added first
    k["name"] = k["name"].cat.add_categories(["</script><script>alert(3)</script><!--"])
    p.trace.kernels.loc[0, "name"] = "</script><script>alert(3)</script><!--"
    html = dashboard.fragment(p, include_bokeh_js=False)
    payload = html[html.index(f'<script type="{dashboard.PAYLOAD_TYPE}">') :]
    payload = payload[: payload.index("</script>")]
    assert "</script" not in payload[8:] and "<!--" not in payload
