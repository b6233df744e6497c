"""Numbers in words: durations, sizes, shares and rates, one precision policy for all.

The policy, everywhere nbprof prints a number (analysis' sentences and every view):

- a **duration** (given in µs) reads in the largest of µs, ms and s that keeps it at least
  1, with one decimal: ``850.0 µs``, ``49.7 ms``, ``1.2 s``;
- a **size** (given in bytes) in decimal units, whole bytes, then one decimal of kB, MB or
  GB: ``512 B``, ``24.6 kB``, ``115.6 MB``;
- a **share** in tenths of a percent, no space before the sign: ``12.3%``; a sentence that
  quotes a rounded figure asks for whole percent (``digits=0``), and :func:`share` is the
  headline form, whole from 10% and tenths below (where a whole 0% would mislead);
- a **rate** (GB/s, TFLOP/s) with one decimal, and more below 10 so that three
  significant digits show: rates in one table span orders of magnitude (a 448-byte
  all-reduce at ``0.0224`` GB/s beside a 1.6 MB one at ``18.3``), where one decimal
  alone would print the small ones as 0.

An unknown value (``None`` or NaN) reads :data:`NA`. Only formatting lives here: the
numbers are analysis'.
"""

from __future__ import annotations

import math

NA = "n/a"


def missing(v: object) -> bool:
    """``v`` is no number to print: ``None``, NaN, or not a number at all."""
    if v is None:
        return True
    try:
        return math.isnan(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True


def duration(us: float | None, *, digits: int = 1) -> str:
    """A duration given in µs: ``850.0 µs``, ``49.7 ms``, ``1.2 s``. ``digits`` other than
    1 only where a sentence has always printed more (the comparison's step times)."""
    if us is None or missing(us):
        return NA
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.{digits}f} s"
    if a >= 1e3:
        return f"{us / 1e3:.{digits}f} ms"
    return f"{us:.{digits}f} µs"


def size(n: float | None) -> str:
    """A size given in bytes, in decimal units: ``512 B``, ``24.6 kB``, ``1.6 MB``."""
    if n is None or missing(n) or n < 0:
        return NA
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def pct(v: float | None, digits: int = 1) -> str:
    """A share in percent: ``12.3%`` (``digits=0``: ``12%``)."""
    if v is None or missing(v):
        return NA
    return f"{v:.{digits}f}%"


def share(v: float | None) -> str:
    """A share as a headline quotes it: whole from 10% (``40%``), tenths below (``6.1%``)."""
    if v is None or missing(v):
        return NA
    return f"{v:.1f}%" if v < 10 else f"{v:.0f}%"


def points(d: float | None) -> str:
    """A change of a share, signed, in percentage points: ``+1.2 pts``, ``±0.0 pts``."""
    if d is None or missing(d):
        return NA
    return f"{_sign(d)}{abs(d):.1f} pts"


def number(v: float | None, digits: int = 1) -> str:
    """A plain amount with thousands separated: ``1,234.5``."""
    if v is None or missing(v):
        return NA
    return f"{v:,.{digits}f}"


def count(v: float) -> str:
    """A count, whole when it is (``1,465``), else with one decimal (a mean per step)."""
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def significant(v: float | None) -> str:
    """A rate's number: one decimal, with more below 10 so that three significant digits
    show (``0.0224``, ``2.46``, ``18.3``, ``150.0``)."""
    if v is None or missing(v):
        return NA
    if abs(v) >= 99.95 or v == 0:
        return f"{v:,.1f}"
    return f"{v:#.3g}"


def bandwidth(gbps: float | None) -> str:
    """A bandwidth given in GB/s: ``10.1 GB/s``."""
    if gbps is None or missing(gbps):
        return NA
    return f"{significant(gbps)} GB/s"


def flops(tflops: float) -> tuple[str, str]:
    """(number, unit) of a FLOP rate given in TFLOP/s: GFLOP/s under 0.1 TFLOP/s, where
    ``3.7e-05 TFLOP/s`` would not read."""
    if abs(tflops) < 0.1:
        return significant(tflops * 1000), "GFLOP/s"
    return significant(tflops), "TFLOP/s"


def gib(n: float) -> str:
    """Device memory given in bytes, in GiB as nvidia-smi's totals are read: ``79.2 GiB``."""
    return f"{n / 2**30:.1f} GiB"


def signed(text: str, d: float) -> str:
    """``text`` (the formatted magnitude of ``d``) with ``d``'s sign: ``+``, ``-`` or ``±``."""
    return _sign(d) + text


def _sign(d: float) -> str:
    return "+" if d > 0 else "-" if d < 0 else "±"


def amount(v: float | None, unit: str) -> str:
    """``v`` in the unit a metric is declared in (``"µs"``, ``"bytes"``, ``"count"``,
    ``"GB/s"``, ``"TFLOP/s"``, ``"%"`` or ``"% of ..."``), by the policy above."""
    if v is None or missing(v):
        return NA
    if unit == "µs":
        return duration(v)
    if unit == "bytes":
        return size(v)
    if unit == "count":
        return count(v)
    if unit == "GB/s":
        return bandwidth(v)
    if unit == "TFLOP/s":
        return " ".join(flops(v))
    if unit.startswith("%"):
        return pct(v) + unit[1:]
    return f"{number(v)} {unit}"
