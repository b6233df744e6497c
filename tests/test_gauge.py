"""The gauge widget: what it shows, how often it sends, and that it leaves nothing running."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import fake_nvml
import pynvml
import pytest
from fake_nvml import FakeClock, FakeGpu

import nbprof
from nbprof import TraceError
from nbprof.telemetry import ReplaySource, Sampler, write_jsonl
from nbprof.telemetry.model import Samples
from nbprof.views.gauge import GaugeWidget, render_html, render_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def recorded(tmp_path: Path, gpus: list[FakeGpu] | None = None, passes: int = 40) -> Path:
    """A recording made by the sampler from the fake backend (4 Hz, 10 s)."""
    clock = FakeClock()
    fake = fake_nvml.build(gpus, clock=clock)
    s = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    s.open()
    for i in range(passes):
        fake.state.gpus[0].util_gpu = 100 if i % 8 < 6 else 0
        s.sample_once()
        clock.advance(0.25)
    s.close_backend()
    return write_jsonl(s.samples(), tmp_path / "run.jsonl")


def counting(g: GaugeWidget) -> list[dict]:
    """Count the comm messages the widget sends (ipywidgets' DummyComm outside a kernel)."""
    sent: list[dict] = []
    comm = g.widget.comm
    original = comm.send

    def send(data: dict | None = None, **kw: object) -> None:
        sent.append(data or {})
        original(data=data, **kw)

    comm.send = send
    return sent


def wait_until(pred, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_replay_drives_the_widget_and_coalesces(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    src = ReplaySource(path, autostart=False)
    mono = Clock()
    g = GaugeWidget(source=src, monotonic=mono)
    sent = counting(g)
    assert "waiting for the first sample" in g.widget.value
    g.start()
    t0 = src.first_ns
    src.advance(t0 + 1e9)
    first = g.widget.value
    assert "REPLAY" in first and "run.jsonl" in first and "not this machine" in first
    assert "35%" in first and "12%" in first and "61%" in first  # SM, Tensor, DRAM
    assert "memory <b>30.0 / 80.0 GiB</b>" in first and "350 W" in first
    assert g.updates == 1 and len(sent) == 1
    # Five more ticks within 0.1 s of the last push: coalesced, nothing sent.
    for k in range(2, 7):
        src.advance(t0 + k * 1e9)
    assert g.updates == 1 and len(sent) == 1 and g._dirty
    # After the interval, the next tick carries everything so far.
    mono.now += 0.25
    src.advance(t0 + 7e9)
    assert g.updates == 2 and len(sent) == 2
    assert sent[-1]["state"]["value"] == g.widget.value
    # The last tick of a replay always renders, coalescing or not.
    src.advance(math.inf)
    assert g.updates == 3 and "replay finished" in g.widget.value
    g.stop()
    assert "replay stopped" in g.widget.value
    g.stop()
    g.close()
    g.close()
    assert g.widget.comm is None


def test_identical_pictures_are_not_resent(tmp_path: Path) -> None:
    path = recorded(tmp_path, passes=4)
    src = ReplaySource(path, autostart=False)
    mono = Clock()
    g = GaugeWidget(source=src, monotonic=mono)
    sent = counting(g)
    g.start()
    src.advance(math.inf)
    assert len(sent) == 1
    mono.now += 1
    g._render()
    assert len(sent) == 1
    g.close()


def test_live_gauge_over_the_fake_backend(tmp_path: Path) -> None:
    fake = fake_nvml.build([FakeGpu(), FakeGpu(name="NVIDIA A100", gpm=None)])
    sampler = Sampler(fake)
    g = GaugeWidget(period_s=0.05, sampler=sampler)
    g.start()
    g.start()  # idempotent
    assert sampler.subscribers == 1
    assert sampler.wait_ticks(4, 10)
    assert wait_until(lambda: "35%" in g.widget.value)
    g.stop()
    assert not sampler.running
    html = g.widget.value
    assert "STOPPED" in html and "LIVE" not in html
    assert "GPU 1" in html and "NVIDIA A100" in html
    assert "unavailable: GPM counters need a Hopper or newer GPU" in html
    assert len(g.samples()) >= 8
    text = g.text
    assert "GPU 0 NVIDIA H100 80GB HBM3: nvidia-smi utilization 100% | SM activity 35%" in text
    assert "SM activity: GPM counters need a Hopper" in text
    g.close()


def test_a_gpu_lost_mid_run_says_so(tmp_path: Path) -> None:
    gpus = [FakeGpu(), FakeGpu(name="second")]
    fake = fake_nvml.build(gpus)
    sampler = Sampler(fake)
    g = GaugeWidget(period_s=0.05, sampler=sampler)
    g.start()
    assert sampler.wait_ticks(2, 10)
    gpus[1].lost = True
    assert sampler.wait_ticks(sampler.ticks + 2, 10)
    g.stop()
    assert "the GPU was lost mid-run" in g.widget.value
    g.close()


def test_no_nvml_shows_the_reason_and_ends_its_thread() -> None:
    fake = fake_nvml.build(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    sampler = Sampler(fake)
    g = GaugeWidget(sampler=sampler)
    g.start()
    assert wait_until(lambda: "No GPU telemetry" in g.widget.value)
    assert "NVML library not found" in g.widget.value
    assert "NVML library not found" in g._repr_mimebundle_()["text/plain"]
    g.close()
    assert not sampler.running


def test_nbprof_gauge_on_this_machine_never_raises() -> None:
    g = nbprof.gauge()
    try:
        assert wait_until(lambda: g.updates >= 1 or "35%" in g.html, 10)
        bundle = g._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert bundle["text/plain"].startswith("nbprof GPU gauge")
    finally:
        g.close()


def test_gauge_replay_through_the_public_function(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    g = nbprof.gauge(replay=path, speed=math.inf)
    try:
        assert g._replay_source.wait(10)
        assert wait_until(lambda: "replay finished" in g.widget.value)
        assert "REPLAY" in g.widget.value
        assert len(g.samples()) == 40
    finally:
        g.close()
    assert "nbprof-replay" not in [t.name for t in threading.enumerate()]


def test_bad_replay_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"missing\.jsonl"):
        nbprof.gauge(replay=tmp_path / "missing.jsonl")


def test_everything_rendered_is_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    path = recorded(tmp_path, [FakeGpu(name=evil, gpm=None)], passes=3)
    (tmp_path / f"{'&'}x.jsonl").write_bytes(path.read_bytes())
    src = ReplaySource(tmp_path / "&x.jsonl", autostart=False)
    src.advance(math.inf)
    samples = src.samples()
    samples.reasons[(0, "sm_util")] = '<img src=x onerror="boom">'
    html = render_html(samples, state="<b>")
    assert "<script>" not in html and "<img" not in html and "<b>)" not in html
    assert "&lt;script&gt;" in html and "&amp;x.jsonl" in html
    src.close()


def test_the_charted_window_is_the_one_stated(tmp_path: Path) -> None:
    src = ReplaySource(recorded(tmp_path), autostart=False)  # 40 passes 0.25 s apart
    src.advance(math.inf)
    # 9.75 s recorded: a 30 s window is not full yet, so the chart spans the 9.75 s.
    html = render_html(src.samples(), history_s=30.0)
    assert "Since the start (0:09)." in html and "over 9.8 seconds" in html
    assert 'data-span-s="9.75"' in html and "Last 30 s" not in html
    # A full window: the last 5 s of the 9.75.
    html = render_html(src.samples(), history_s=5.0)
    assert "Last 5 s." in html and 'data-span-s="5.00"' in html and "over 5.0 seconds" in html
    src.close()


def _xs(html: str, cls: str) -> list[int]:
    """x coordinates of the first polyline of class ``cls``."""
    import re

    m = re.search(rf'<polyline class="{cls}" points="([^"]+)"', html)
    assert m is not None, cls
    return [int(p.split(",")[0]) for p in m.group(1).split()]


def test_the_history_fills_the_chart_from_the_start(tmp_path: Path) -> None:
    # 5 s into a run with a 60 s window: the history spans the chart, not its last 17 px.
    src = ReplaySource(recorded(tmp_path, passes=21), autostart=False)
    src.advance(math.inf)
    html = render_html(src.samples(), history_s=60.0, start_ns=src.first_ns)
    xs = _xs(html, "nbg-smi-line")
    assert xs[0] <= 2 and xs[-1] == 200
    assert 'data-elapsed-s="5.00"' in html and "0:05 into the recording" in html
    assert 'data-points="21"' in html
    src.close()


def test_elapsed_time_of_a_live_gauge() -> None:
    clock = FakeClock()
    fake = fake_nvml.build([FakeGpu()], clock=clock)
    s = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    started = clock.wall - 2_000_000_000  # the gauge started 2 s before the first sample
    s.open()
    for _ in range(5):
        s.sample_once()
        clock.advance(0.25)
    s.close_backend()
    html = render_html(s.samples(), start_ns=started)
    assert "0:03 elapsed" in html and 'data-elapsed-s="3.00"' in html


def test_the_legend_explains_only_what_is_drawn(tmp_path: Path) -> None:
    no_gpm = ReplaySource(
        recorded(tmp_path, [FakeGpu(name="NVIDIA A100", gpm=None)]), autostart=False
    )
    no_gpm.advance(math.inf)
    html = render_html(no_gpm.samples(), with_style=False)
    assert "nbg-gap-area" not in html and "nbg-smi-dashed" not in html
    assert "red" not in html.split('class="nbg-legend"')[1].lower()
    assert "dashed" not in html.lower() and "Area: nvidia-smi utilization" in html
    no_gpm.close()
    (tmp_path / "h").mkdir()
    gpm = ReplaySource(recorded(tmp_path / "h"), autostart=False)
    gpm.advance(math.inf)
    html = render_html(gpm.samples(), with_style=False)
    assert "nbg-gap-area" in html and "nbg-smi-dashed" in html
    assert "red: time nvidia-smi calls busy while the counter says idle" in html
    gpm.close()


def test_the_stylesheet_follows_the_notebook_theme() -> None:
    from nbprof.views.gauge import stylesheet

    css = stylesheet()
    # The theme's own variables, with fallbacks, and dark-theme colours for the series.
    for var in ("--jp-ui-font-color0", "--jp-layout-color1", "--jp-border-color2"):
        assert f"var({var}," in css
    assert 'body[data-jp-theme-light="false"] .nbprof-gauge' in css
    # The big numbers take the strongest text colour, not a grey.
    rule = css.split(".nbprof-gauge .nbg-value {")[1].split("}")[0]
    assert "color: var(--nbg-text);" in rule
    # Markup carries classes, not colours: no hex colour outside the stylesheet.
    import re

    html = render_html(Samples.empty(unavailable="x"), with_style=False)
    assert not re.search(r"#[0-9a-fA-F]{6}", html)


def test_unavailable_and_empty_renderings() -> None:
    none = Samples.empty(unavailable="NVML library not found <here>")
    assert "No GPU telemetry: NVML library not found &lt;here&gt;" in render_html(none)
    assert "No GPU telemetry: NVML library not found <here>" in render_text(none)
    assert "waiting for the first sample" in render_html(Samples.empty())
    assert "no samples yet" in render_text(Samples.empty())


def test_creating_a_gauge_starts_nothing() -> None:
    fake = fake_nvml.build()
    sampler = Sampler(fake)
    g = GaugeWidget(sampler=sampler)
    assert not sampler.running and sampler.subscribers == 0
    g.stop()  # stopping a gauge never started is harmless
    g.close()
    g.start()  # nor does starting a closed one
    assert not sampler.running


@pytest.mark.slow
def test_updates_reach_a_real_kernel_while_the_cell_is_busy() -> None:
    import nbclient
    import nbformat

    tests_dir = str(Path(__file__).resolve().parent)
    source = f"""
import sys, time
sys.path.insert(0, {tests_dir!r})
import fake_nvml
from nbprof.telemetry import Sampler
from nbprof.views.gauge import GaugeWidget
g = GaugeWidget(period_s=0.05, sampler=Sampler(fake_nvml.build()))
display(g)
g.start()
t0 = time.monotonic()
while time.monotonic() - t0 < 1.5:  # the cell's main thread stays busy
    sum(range(10000))
print("updates while busy:", g.updates)
g.stop()
"""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nbclient.NotebookClient(nb, timeout=120, store_widget_state=True).execute()
    outputs = nb.cells[0].outputs
    assert len(outputs) == 2  # the widget, the print: stop() displays nothing more
    assert "application/vnd.jupyter.widget-view+json" in outputs[0]["data"]
    printed = int(outputs[1]["text"].split(":")[1])
    assert printed >= 2  # the sampler thread sent updates while the cell was running
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    htmls = [m["state"]["value"] for m in state.values() if m["model_name"] == "HTMLModel"]
    (value,) = [v for v in htmls if "nbprof-gauge" in v and not v.startswith("<style>")]
    assert "35%" in value and "STOPPED" in value
