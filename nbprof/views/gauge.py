"""The live GPU gauge: nvidia-smi's utilization next to what the SMs are really doing.

``nbprof.gauge()`` shows, for each GPU, big current numbers, the time elapsed, and a history
of nvidia-smi utilization, SM activity, Tensor Core activity and DRAM bandwidth (scaled to
the time elapsed until its 60-second window is full), with memory and power alongside. In
each activity chart nvidia-smi's number is a dashed line over a red area and the hardware
counter is the solid area on top, so whatever red remains visible is time nvidia-smi calls
"busy" while the counter says the SMs (or Tensor Cores, or DRAM) were idle. Where the GPU
has no such counters only nvidia-smi's area is drawn, and the legend says only that.

It is an ``ipywidgets.HTML`` updated from the sampler's thread through the widget's comm,
so it keeps moving while the cell's main thread is busy (no ``push_notebook``, no server).
Updates are coalesced to at most one every ``min_interval_s`` (0.1 s) and skipped when
nothing visible changed. The stylesheet (``views/js/gauge.css``, JupyterLab's theme
variables) travels once, in a hidden widget beside it, not with every update. The HTML
comes from the autoescaped template views/templates/gauge.html, so every piece of text that
came from NVML or a file is escaped.

This module only lays out numbers the sampler measured; it computes no metrics.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from nbprof import units
from nbprof.telemetry import get_sampler
from nbprof.telemetry.model import METRICS, Samples
from nbprof.telemetry.recording import ReplaySource
from nbprof.views import templating

logger = logging.getLogger(__name__)

#: The four activity charts, in order; the first is nvidia-smi's own number. Their colours
#: live in gauge.css (one per theme), keyed by the metric.
CHARTS: tuple[str, ...] = ("util_gpu", "sm_util", "tensor_util", "dram_bw_util")
_W, _H = 200, 48
_BIN_PX = 2
#: Shortest span a chart is drawn over: the first samples do not fill it edge to edge.
_MIN_SPAN_NS = 2_000_000_000


@functools.cache
def stylesheet() -> str:
    """The gauge's CSS (package data beside the other front-end files)."""
    return resources.files("nbprof.views").joinpath("js").joinpath("gauge.css").read_text("utf-8")


def _style() -> str:
    """The stylesheet as a ``<style>`` element."""
    return templating.render("style.html", css=templating.trusted(stylesheet()))


def gauge(
    period_s: float = 0.25, replay: str | Path | None = None, speed: float = 1.0
) -> GaugeWidget:
    """A live gauge of every GPU (or of a recording, with ``replay=``), already running.

    ``period_s`` is the sampling period; ``replay`` a JSON-lines file written by
    :func:`nbprof.telemetry.record`, played ``speed`` times faster than real time and
    labelled as a replay. Call ``.stop()`` to freeze it, ``.close()`` to remove it.
    """
    g = GaugeWidget(period_s=period_s, replay=replay, speed=speed)
    g.start()
    return g


class GaugeWidget:
    """The gauge behind :func:`gauge`; ``%%gpuprof`` drives it with start/stop/close.

    ``sampler`` overrides the process-wide sampler; ``source`` is any object with
    ``samples(since_ns)``, ``close()`` and an ``on_tick`` attribute that the caller drives
    itself (the gauge sets ``on_tick`` and never starts it).

    ``widget`` is the ``ipywidgets.HTML`` shown in the notebook (``None`` where ipywidgets is
    not installed: the text and HTML renderings still work). Safe to create without NVML: it
    then shows why there are no numbers.
    """

    def __init__(
        self,
        period_s: float = 0.25,
        replay: str | Path | None = None,
        speed: float = 1.0,
        *,
        sampler: Any = None,
        source: Any = None,
        min_interval_s: float = 0.1,
        history_s: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period_s = period_s
        self.replay_path = Path(replay) if replay is not None else None
        self.speed = speed
        self.min_interval_s = min_interval_s
        self.history_s = history_s
        self._sampler = sampler
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._source: Any = None
        self._replay_source: Any = None
        self._state = "starting"
        self._last_ns = 0
        self._last_push = -math.inf
        self._dirty = False
        self._closed = False
        #: Times the widget's value was actually changed (each is one comm message).
        self.updates = 0
        #: A source the caller drives (a ReplaySource with autostart=False, in tests).
        self._external = source
        if source is not None:
            source.on_tick = self._on_tick
            if hasattr(source, "done"):
                self._replay_source = source
        elif self.replay_path is not None:
            # Read the file now: a bad path is a clear error at the call, not a blank gauge.
            self._replay_source = ReplaySource(
                self.replay_path, speed, on_tick=self._on_tick, autostart=False
            )
        self._html = render_html(self._empty(), state=self._state_label(), with_style=False)
        #: The HTML widget whose value is the gauge; ``view`` (what is displayed) holds it
        #: next to the hidden stylesheet.
        self.widget, self.view = _make_widget(self._html)

    # -- lifecycle ----------------------------------------------------------------------

    # start/stop return None: a notebook's last line `g.stop()` must not display it again.
    def start(self) -> None:
        """Start sampling (or playing the replay); idempotent."""
        with self._lock:
            if self._closed or self._source is not None:
                return
            self._state = "live"
            if self._external is not None:
                self._source = self._external
                start = None
            elif self._replay_source is not None:
                self._source = self._replay_source
                start = self._replay_source.start
            else:
                sampler = self._sampler if self._sampler is not None else get_sampler()
                self._source = sampler.subscribe(self.period_s, self._on_tick)
                start = None
        if start is not None:
            start()

    def stop(self) -> None:
        """Stop updating and show the final state, frozen; releases the subscription."""
        with self._lock:
            source = self._source
            if source is None or self._state == "stopped":
                return
            self._state = "stopped"
        source.close()  # no ticks after this returns
        self._render(force=True)

    def close(self) -> None:
        """Stop and remove the widget from the notebook; idempotent."""
        self.stop()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for w in (self.view, self.widget):
            if w is not None:
                w.close()

    # -- data ---------------------------------------------------------------------------

    def _empty(self) -> Samples:
        source = self._replay_source.source if self._replay_source is not None else "live"
        return Samples.empty(source=source)

    def samples(self) -> Samples:
        """Everything this gauge's source delivered (a replay: the part played so far)."""
        src = self._source
        return src.samples() if src is not None else self._empty()

    def _start_ns(self) -> int | None:
        """When this gauge's data begins: its subscription's start, a replay's first row."""
        src = self._source
        for attr in ("start_ns", "first_ns"):
            value = getattr(src, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def _window(self) -> Samples:
        src = self._source
        if src is None:
            return self._empty()
        since = self._last_ns - int(self.history_s * 1e9) if self._last_ns else None
        return src.samples(since_ns=since)

    def _picture(self, with_style: bool) -> str:
        return render_html(
            self._window(),
            state=self._state_label(),
            history_s=self.history_s,
            start_ns=self._start_ns(),
            with_style=with_style,
        )

    def _state_label(self) -> str:
        if self._replay_source is not None:
            done = self._replay_source.done.is_set()
            if self._state == "live":
                return "replay finished" if done else "replaying"
            return "replay stopped" if self._state == "stopped" else "replay"
        return self._state

    # -- updates ------------------------------------------------------------------------

    def _on_tick(self, tick: Any) -> None:
        """Called on the sampler (or replay) thread after each pass."""
        self._last_ns = max(self._last_ns, int(tick.time_ns))
        last_replay_tick = self._replay_source is not None and self._replay_source.done.is_set()
        # 10% slack: ticks exactly one interval apart arrive a little early by jitter.
        early = self._monotonic() - self._last_push < self.min_interval_s * 0.9
        if early and not last_replay_tick:
            # Coalesced: the next tick (at most one sampling period away) or stop() carries
            # it. A replay's last tick has no successor, so it always renders.
            self._dirty = True
            return
        self._render()

    def _render(self, force: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._last_push = self._monotonic()  # from the start: renders take time
            try:
                html_ = self._picture(with_style=False)
            except Exception:
                logger.exception("the gauge could not render; it keeps its last picture")
                return
            self._dirty = False
            if html_ == self._html and not force:
                return
            self._html = html_
            if self.widget is not None:
                self.widget.value = html_
            self.updates += 1

    # -- display ------------------------------------------------------------------------

    @property
    def html(self) -> str:
        """The HTML currently shown (without the stylesheet the view carries once)."""
        return self._html

    @property
    def text(self) -> str:
        """A plain-text rendering of the current numbers (terminals, logs, nbconvert)."""
        return render_text(self._window(), state=self._state_label())

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        bundle: dict[str, Any] = {}
        if self.view is not None and not self._closed:
            bundle.update(self.view._repr_mimebundle_(**kwargs) or {})
        # A snapshot for saved notebooks without widget state, and text for terminals.
        bundle["text/html"] = _style() + self._html
        bundle["text/plain"] = self.text
        return bundle

    def __repr__(self) -> str:
        return self.text


def _make_widget(value: str) -> tuple[Any, Any]:
    """(the gauge's HTML widget, the box displayed: the stylesheet hidden, then the gauge)."""
    try:
        import ipywidgets
    except ImportError:
        logger.info("ipywidgets is not installed: the gauge renders as text/HTML only")
        return None, None
    gauge = ipywidgets.HTML(value=value)
    # A <style> element applies to the page wherever it sits, displayed or not: sent once
    # here, it need not ride along with every update of the gauge.
    style = ipywidgets.HTML(value=_style(), layout=ipywidgets.Layout(display="none"))
    return gauge, ipywidgets.VBox([style, gauge])


# -- rendering (pure: Samples in, markup out) ------------------------------------------------


def _pct(v: float) -> str:
    return "—" if units.missing(v) else units.share(v)


def _clock(seconds: float) -> str:
    """0:05, 12:34, 1:02:03."""
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


_Part = dict[str, np.ndarray]


def _per_gpu(samples: Samples) -> dict[int, _Part]:
    """Each GPU's columns as numpy arrays, split once (a render reads each many times, and
    a pandas column lookup costs more than the arithmetic on it)."""
    f = samples.frame
    if not len(f):
        return {}
    gpu = f["gpu"].to_numpy()
    cols = {c: f[c].to_numpy() for c in ("time_ns", *METRICS) if c in f}
    out: dict[int, _Part] = {}
    for g in np.unique(gpu):
        rows = gpu == g
        out[int(g)] = {c: v[rows] for c, v in cols.items()}
    return out


def _latest(part: _Part, metric: str) -> float:
    col = part.get(metric)
    if col is None:
        return math.nan
    ok = ~np.isnan(col)
    return float(col[ok][-1]) if ok.any() else math.nan


def _points(part: _Part, metric: str, t0: int) -> tuple[np.ndarray, np.ndarray]:
    t = part["time_ns"]
    v = part.get(metric)
    if v is None:
        return t[:0], t[:0].astype(np.float64)
    ok = ~np.isnan(v) & (t >= t0)
    return t[ok], v[ok]


def _series(part: _Part, metric: str, t0: int, span_ns: float) -> list[list[tuple[int, int]]]:
    """Chart coordinates of one metric, split where samples stop for more than 5 s.

    Points are averaged into :data:`_BIN_PX`-pixel columns: a 200 px chart cannot show more,
    and it bounds each comm message whatever the sampling rate (60 s at 10 Hz is 600 points).
    """
    t, v = _points(part, metric, t0)
    if not len(t):
        return []
    x = np.clip((t - t0) / span_ns * _W, 0, _W)
    y = _H - np.clip(v, 0, 100) / 100 * _H
    breaks = np.flatnonzero(np.diff(t) > 5e9) + 1
    out = []
    for xs, ys in zip(np.split(x, breaks), np.split(y, breaks), strict=True):
        col = (xs // _BIN_PX).astype(np.int64)
        count = np.bincount(col)
        used = np.flatnonzero(count)
        mean_y = np.bincount(col, weights=ys)[used] / count[used]
        px = np.minimum(used * _BIN_PX + _BIN_PX // 2, _W)
        out.append(list(zip(px.tolist(), np.rint(mean_y).astype(np.int64).tolist(), strict=True)))
    return out


def _closed(seg: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """An area's outline: down to the chart's floor at both ends (one point is widened
    to two pixels, or it would have no area)."""
    if len(seg) == 1:
        (x, y) = seg[0]
        seg = [(x - 1, y), (x + 1, y)]
    return [(seg[0][0], _H), *seg, (seg[-1][0], _H)]


def _shape(tag: str, seg: list[tuple[int, int]], cls: str) -> dict[str, str]:
    """A ``polygon`` or ``polyline`` of the chart's template."""
    return {"tag": tag, "cls": cls, "points": " ".join(f"{x},{y}" for x, y in seg)}


def _area(seg: list[tuple[int, int]], cls: str) -> dict[str, str]:
    return _shape("polygon", _closed(seg), cls)


def _line(seg: list[tuple[int, int]], cls: str) -> dict[str, str]:
    return _shape("polyline", seg, cls)


def _chart(
    part: _Part, metric: str, t0: int, span_ns: float, smi: list[list[tuple[int, int]]]
) -> tuple[dict[str, Any], bool]:
    """The chart's SVG, as the template draws it, and whether it drew a counter over
    nvidia-smi's area (the gap).

    ``smi`` is nvidia-smi's series (drawn in every chart, computed once per GPU)."""
    shapes: list[dict[str, str]] = []
    counter: list[list[tuple[int, int]]] = []
    if metric == "util_gpu":
        shapes += [_area(s, "nbg-smi-area") for s in smi]
        shapes += [_line(s, "nbg-smi-line") for s in smi]
    else:
        counter = _series(part, metric, t0, span_ns)
        # Red under nvidia-smi's line, the counter's area on top: red left showing is the gap.
        shapes += [_area(s, "nbg-gap-area") for s in smi] if counter else []
        shapes += [_area(s, "nbg-counter-area") for s in counter]
        shapes += [_line(s, "nbg-smi-dashed") for s in smi] if counter else []
    chart = {
        "width": _W,
        "height": _H,
        "points": len(_points(part, metric, t0)[0]),
        "label": METRICS[metric][0],
        "seconds": f"{span_ns / 1e9:.1f}",
        "shapes": shapes,
    }
    return chart, bool(counter)


def _panel(
    samples: Samples,
    gpu: int,
    part: _Part | None,
    metric: str,
    t0: int,
    span: float,
    smi: list[list[tuple[int, int]]],
) -> tuple[dict[str, Any], bool]:
    label, _unit, basis = METRICS[metric]
    reason = samples.reasons.get((gpu, metric))
    value = _latest(part, metric) if part is not None else math.nan
    chart, gap = _chart(part, metric, t0, span, smi) if part is not None else (None, False)
    if reason is not None:
        chart, gap = None, False
    panel = {
        "metric": metric,
        "label": label,
        "basis": basis,
        "number": _pct(value) if reason is None else "—",
        "data_value": f"{value:.3f}" if value == value and reason is None else "",
        "unavailable": reason,
        "chart": chart,
        "waiting": value != value,
    }
    return panel, gap


def _reading(
    samples: Samples, gpu: int, part: Any, metric: str, fmt: Callable[[float], str]
) -> dict[str, str | None]:
    """One number of the line under the charts, or why it is missing."""
    reason = samples.reasons.get((gpu, metric))
    v = _latest(part, metric) if part is not None and reason is None else math.nan
    return {
        "label": METRICS[metric][0],
        "reason": reason,
        "value": fmt(v) if v == v else "—",
    }


def _badge(state: str, source: str) -> dict[str, str]:
    if source.startswith("replay"):
        cls, text = "nbg-badge-replay", f"REPLAY · {state} · {source.removeprefix('replay: ')}"
    elif state == "live":
        cls, text = "nbg-badge-live", "LIVE"
    else:
        cls, text = "", state.upper()
    return {"cls": cls, "text": text}


def _memory(samples: Samples, gpu: int, part: Any) -> dict[str, Any]:
    used = _latest(part, "mem_used") if part is not None else math.nan
    total = _latest(part, "mem_total") if part is not None else math.nan
    if not (used == used and total == total and total > 0):
        return {"total": None, "reading": _reading(samples, gpu, part, "mem_used", units.gib)}
    reserved = _latest(part, "mem_reserved") if part is not None else math.nan
    return {
        "used": units.gib(used).removesuffix(" GiB"),
        "total": units.gib(total),
        "max": f"{total:.0f}",
        "value": f"{used:.0f}",
        "reserved": units.gib(reserved) if reserved == reserved else None,
    }


def render_html(
    samples: Samples,
    *,
    state: str = "live",
    history_s: float = 60.0,
    start_ns: int | None = None,
    with_style: bool = True,
) -> str:
    """The gauge for ``samples``: the last ``history_s`` charted, or the time since
    ``start_ns`` (default: the first sample) while that is shorter, so the history fills the
    chart from the start. ``with_style`` puts the stylesheet in (a standalone snapshot)."""
    is_replay = samples.source.startswith("replay")
    parts = _per_gpu(samples)
    gpus = sorted(set(samples.gpus) | set(parts))
    end = int(samples.frame["time_ns"].max()) if len(samples) else 0
    first = int(samples.frame["time_ns"].min()) if len(samples) else 0
    start = start_ns if start_ns is not None and 0 < start_ns <= (end or start_ns) else first
    elapsed_ns = max(0, end - start) if end else 0
    t0 = max(start, end - int(history_s * 1e9)) if end else 0
    span = float(max(end - t0, _MIN_SPAN_NS))
    clock = ""
    if end:
        what = "into the recording" if is_replay else "elapsed"
        clock = f"{_clock(elapsed_ns / 1e9)} {what}"
    waiting = ""
    if not gpus:
        waiting = "no samples" if "stopped" in state else "waiting for the first sample…"
    shown: list[dict[str, Any]] = []
    any_gap = False
    for gpu in gpus:
        info = samples.gpus.get(gpu, {})
        part = parts.get(gpu)
        smi = _series(part, "util_gpu", t0, span) if part is not None else []
        panels = []
        for metric in CHARTS:
            panel, gap = _panel(samples, gpu, part, metric, t0, span, smi)
            any_gap = any_gap or gap
            panels.append(panel)
        shown.append(
            {
                "gpu": gpu,
                "name": info.get("name") or "",
                "trouble": info.get("lost") or info.get("error"),
                "panels": panels,
                "memory": _memory(samples, gpu, part),
                "readings": [
                    _reading(samples, gpu, part, "power_w", lambda v: f"{v:.0f} W"),
                    _reading(samples, gpu, part, "sm_clock_mhz", lambda v: f"{v:.0f} MHz"),
                    _reading(samples, gpu, part, "temp_c", lambda v: f"{v:.0f} °C"),
                ],
            }
        )
    if t0 > start:  # the window is full: it slides
        window = f"Last {history_s:g} s"
    else:  # still filling: the whole run so far, across the chart
        window = f"Since the start ({_clock(elapsed_ns / 1e9)})"
    return templating.render(
        "gauge.html",
        style=templating.trusted(stylesheet()) if with_style else None,
        state=state,
        elapsed_s=f"{elapsed_ns / 1e9:.2f}",
        span_s=f"{span / 1e9:.2f}",
        badge=_badge(state, samples.source),
        clock=clock,
        replay=is_replay,
        stopped=samples.unavailable if samples.unavailable and len(samples) else "",
        no_telemetry=samples.unavailable if samples.unavailable and not len(samples) else "",
        waiting=waiting,
        gpus=shown,
        any_gap=any_gap,
        window=window,
    )


def render_text(samples: Samples, *, state: str = "live") -> str:
    """Plain-text gauge: one line of current numbers per GPU, plus any reasons."""
    head = f"nbprof GPU gauge ({state}; {samples.source})"
    if samples.unavailable and not len(samples):
        return f"{head}\nNo GPU telemetry: {samples.unavailable}"
    parts = _per_gpu(samples)
    gpus = sorted(set(samples.gpus) | set(parts))
    if not gpus:
        return f"{head}\nno samples yet"
    lines = [head]
    for gpu in gpus:
        part = parts.get(gpu)
        name = samples.gpus.get(gpu, {}).get("name") or ""
        fields: list[str] = []
        missing: list[str] = []
        for metric in CHARTS:
            label = METRICS[metric][0]
            reason = samples.reasons.get((gpu, metric))
            if reason is not None:
                fields.append(f"{label} —")
                missing.append(f"  {label}: {reason}")
            else:
                v = _latest(part, metric) if part is not None else math.nan
                fields.append(f"{label} {_pct(v)}")
        mu = _latest(part, "mem_used") if part is not None else math.nan
        mt = _latest(part, "mem_total") if part is not None else math.nan
        if mu == mu and mt == mt:
            fields.append(f"memory {units.gib(mu).removesuffix(' GiB')}/{units.gib(mt)}")
        pw = _latest(part, "power_w") if part is not None else math.nan
        if pw == pw:
            fields.append(f"power {pw:.0f} W")
        lines.append(f"GPU {gpu} {name}: " + " | ".join(fields))
        lines.extend(missing)
    return "\n".join(lines)
