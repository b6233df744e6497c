"""The timeline's GPU classes stay apart for colour-blind readers, in both themes.

Every pair of classes that can share a GPU lane must differ by at least MIN_DE2000
(CIEDE2000) as seen with normal vision and with simulated protanopia, deuteranopia and
tritanopia (Machado et al. 2009, severity 1), each as the timeline paints it: aggregate
bars at 90% opacity over the light and over the dark background, exact bars opaque.
Memset (#d03fd0) and Tensor Core (#922ed7) once differed by 6.1 under protanopia, and the
DtoD copies and memsets by 0.5 under deuteranopia.
"""

from __future__ import annotations

import itertools
import math

import pytest
from test_views_colours import _CVD, _lab, _linear

from nbprof.views._style import CLASSES

#: Side by side, two bars this far apart (CIEDE2000) read as different colours.
MIN_DE2000 = 10.0
#: The classes a GPU lane can show. "other" and "kernel" both say that nothing is known
#: of a kernel (unrecognised names; no classes at all): alike on purpose.
GPU = ("tensor_core", "compute", "memory", "communication", "other", "kernel", "copy_htod",
       "copy_dtoh", "copy_dtod", "copy_other", "memset")  # fmt: skip
ALIKE = {frozenset(("other", "kernel"))}
#: (background, opacity): the aggregate's 0.9 over JupyterLab's light and dark
#: backgrounds, and an exact bar.
PAINTED = {"light": ("#ffffff", 0.9), "dark": ("#111111", 0.9), "opaque": ("#ffffff", 1.0)}


def ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """CIEDE2000 colour difference (Sharma, Wu & Dalal 2005), kL = kC = kH = 1."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    cbar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(cbar**7 / (cbar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360
    h2p = math.degrees(math.atan2(b2, a2p)) % 360
    dlp, dcp = l2 - l1, c2p - c1p
    dhp = 0.0
    if c1p * c2p:
        dhp = h2p - h1p
        dhp -= 360 if dhp > 180 else (-360 if dhp < -180 else 0)
    dHp = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dhp / 2))
    lbp, cbp = (l1 + l2) / 2, (c1p + c2p) / 2
    hbp = h1p + h2p
    if c1p * c2p:
        hbp = (h1p + h2p) / 2 + (180 if abs(h1p - h2p) > 180 else 0)
        hbp -= 360 if hbp >= 360 else 0
    t = (1 - 0.17 * math.cos(math.radians(hbp - 30)) + 0.24 * math.cos(math.radians(2 * hbp))
         + 0.32 * math.cos(math.radians(3 * hbp + 6))
         - 0.20 * math.cos(math.radians(4 * hbp - 63)))  # fmt: skip
    dtheta = 30 * math.exp(-(((hbp - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cbp**7 / (cbp**7 + 25**7))
    sl = 1 + 0.015 * (lbp - 50) ** 2 / math.sqrt(20 + (lbp - 50) ** 2)
    sc, sh = 1 + 0.045 * cbp, 1 + 0.015 * cbp * t
    rt = -math.sin(math.radians(2 * dtheta)) * rc
    return math.sqrt((dlp / sl) ** 2 + (dcp / sc) ** 2 + (dHp / sh) ** 2
                     + rt * (dcp / sc) * (dHp / sh))  # fmt: skip


def seen(colour: str, deficiency: str | None, background: str, alpha: float) -> tuple[float, ...]:
    """CIELAB of ``colour`` painted at ``alpha`` over ``background``, as seen with
    ``deficiency`` (None: normal vision)."""

    def srgb(c: str) -> list[float]:
        return [int(c.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]

    mixed = [
        alpha * f + (1 - alpha) * b for f, b in zip(srgb(colour), srgb(background), strict=True)
    ]
    lin = list(_linear("#" + "".join(f"{round(v * 255):02x}" for v in mixed)))
    if deficiency is not None:
        m = _CVD[deficiency]
        lin = [min(1.0, max(0.0, sum(m[i][j] * lin[j] for j in range(3)))) for i in range(3)]
    return _lab(tuple(lin))  # type: ignore[arg-type]


def test_ciede2000_gives_the_published_differences() -> None:
    # Pairs 1, 7, 17 and 25 of Sharma, Wu & Dalal (2005), table 1.
    pairs = [((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
             ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
             ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
             ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644)]  # fmt: skip
    for a, b, want in pairs:
        assert ciede2000(a, b) == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize("painted", list(PAINTED))
@pytest.mark.parametrize("deficiency", [None, *_CVD])
def test_gpu_classes_are_apart_for_every_reader_in_both_themes(
    deficiency: str | None, painted: str
) -> None:
    background, alpha = PAINTED[painted]
    close = []
    for a, b in itertools.combinations(GPU, 2):
        if frozenset((a, b)) in ALIKE:
            continue
        d = ciede2000(seen(CLASSES[a][1], deficiency, background, alpha),
                      seen(CLASSES[b][1], deficiency, background, alpha))  # fmt: skip
        if d < MIN_DE2000:
            close.append((a, b, round(d, 1)))
    assert close == [], f"{deficiency or 'normal vision'}, {painted}: {close}"
