"""The palette by meaning: readable on light and dark backgrounds, and the GPU classes
apart for the common colour-vision deficiencies (simulated, Machado et al. 2009)."""

from __future__ import annotations

import itertools
import math

import pytest

from nbprof.views._style import CLASSES, GAP_CAUSES, SEVERITY_COLOURS

#: Backgrounds: white, JupyterLab's dark layout colour, the report's dark page.
LIGHT, DARK = "#ffffff", "#111111"
GPU_CLASSES = ("tensor_core", "compute", "memory", "communication", "other", "copy_htod",
               "copy_dtoh", "memset")  # fmt: skip

# Machado, Oliveira & Fernandes (2009), severity 1.0, on linear RGB.
_CVD = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}  # fmt: skip


def _linear(hex_colour: str) -> tuple[float, float, float]:
    def lin(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    h = hex_colour.lstrip("#")
    return lin(int(h[0:2], 16)), lin(int(h[2:4], 16)), lin(int(h[4:6], 16))


def _luminance(c: str) -> float:
    r, g, b = _linear(c)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    lo, hi = sorted((_luminance(a), _luminance(b)))
    return (hi + 0.05) / (lo + 0.05)


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _seen(c: str, deficiency: str | None) -> tuple[float, float, float]:
    v = _linear(c)
    if deficiency is not None:
        m = _CVD[deficiency]
        v = tuple(min(1.0, max(0.0, sum(m[i][j] * v[j] for j in range(3)))) for i in range(3))
    return _lab(v)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", list(CLASSES))
def test_every_class_colour_reads_on_light_and_dark(key: str) -> None:
    colour = CLASSES[key][1]
    assert contrast(colour, LIGHT) >= 2.9, (key, colour)
    assert contrast(colour, DARK) >= 3.2, (key, colour)


@pytest.mark.parametrize("deficiency", [None, *_CVD])
def test_gpu_classes_stay_apart_for_colour_blind_readers(deficiency: str | None) -> None:
    # CIELAB distance >= 10: two bars side by side read as different colours.
    for a, b in itertools.combinations(GPU_CLASSES, 2):
        d = math.dist(_seen(CLASSES[a][1], deficiency), _seen(CLASSES[b][1], deficiency))
        assert d >= 10, (deficiency, a, b, round(d, 1))


def test_host_wait_shading_is_far_from_host_to_device_copies() -> None:
    # The two were orange and peach: hard to tell apart. Now hue and texture differ.
    for deficiency in (None, *_CVD):
        d = math.dist(
            _seen(GAP_CAUSES["host_wait"][1], deficiency),
            _seen(CLASSES["copy_htod"][1], deficiency),
        )
        assert d >= 15, (deficiency, round(d, 1))


def test_colour_does_not_say_good_where_it_means_a_problem() -> None:
    def greenish(c: str) -> bool:
        r, g, b = (int(c[i : i + 2], 16) for i in (1, 3, 5))
        return g > r + 20 and g > b + 20

    assert not greenish(CLASSES["memory"][1]), "memory-bound is a bottleneck, not a success"
    assert not greenish(SEVERITY_COLOURS["low"]), "a low-severity finding is still a finding"
    for severity, colour in SEVERITY_COLOURS.items():
        assert contrast(colour, "#ffffff") >= 4.5, (severity, "white badge text")


def test_verdict_tags_are_readable_and_not_green() -> None:
    from nbprof.vocab import UNKNOWN_COLOUR, VERDICTS

    colours = {name: t.colour for name, t in VERDICTS.items()} | {"unknown": UNKNOWN_COLOUR}
    for verdict, colour in colours.items():
        r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert not (g > r + 20 and g > b + 20), verdict
        assert contrast(colour, "#ffffff") >= 4.5, (verdict, colour)
