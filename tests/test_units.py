"""nbprof/units.py: one precision policy and one spelling, used by analysis and views alike."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from nbprof import units

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("us", "shown"),
    [
        (0.0, "0.0 µs"), (6.54, "6.5 µs"), (999.94, "999.9 µs"), (1000.0, "1.0 ms"),
        (49_652.8, "49.7 ms"), (999_949.0, "999.9 ms"), (1e6, "1.0 s"), (12_920_170.0, "12.9 s"),
        (-5000.0, "-5.0 ms"), (None, "n/a"), (math.nan, "n/a"),
    ],
)  # fmt: skip
def test_durations_read_with_one_decimal_in_the_unit_that_keeps_them_above_one(
    us: float | None, shown: str
) -> None:
    assert units.duration(us) == shown


def test_the_comparisons_step_times_keep_their_second_decimal_in_seconds() -> None:
    assert units.duration(12_920_170.0, digits=2) == "12.92 s"


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 B"), (192, "192 B"), (999, "999 B"), (1000, "1.0 kB"), (24_600, "24.6 kB"),
        (115_600_000, "115.6 MB"), (2.5e9, "2.5 GB"), (3e12, "3000.0 GB"), (-1, "n/a"),
        (None, "n/a"),
    ],
)  # fmt: skip
def test_sizes_are_decimal_and_spell_kb_one_way(n: float | None, shown: str) -> None:
    assert units.size(n) == shown


def test_shares_points_and_headline_shares() -> None:
    assert units.pct(12.345) == "12.3%" and units.pct(12.5, 0) == "12%"
    assert units.pct(None) == "n/a" and units.pct(math.nan) == "n/a"
    # Headline: whole from 10%, tenths below (a whole 0% would mislead).
    assert [units.share(v) for v in (0.04, 6.14, 9.96, 40.4)] == ["0.0%", "6.1%", "10.0%", "40%"]
    assert [units.points(d) for d in (1.25, -0.2, 0.0)] == ["+1.2 pts", "-0.2 pts", "±0.0 pts"]


@pytest.mark.parametrize(
    ("v", "shown"),
    [
        (0.0224, "0.0224"), (0.000422, "0.000422"), (2.46, "2.46"), (2.0, "2.00"),
        (18.3, "18.3"), (99.96, "100.0"), (150.0, "150.0"), (989.5, "989.5"),
        (1234.56, "1,234.6"), (0.0, "0.0"),
    ],
)  # fmt: skip
def test_rates_keep_three_significant_digits_and_one_decimal(v: float, shown: str) -> None:
    assert units.significant(v) == shown


def test_rates_with_their_units() -> None:
    assert units.bandwidth(10.06) == "10.1 GB/s" and units.bandwidth(None) == "n/a"
    assert units.flops(111.06) == ("111.1", "TFLOP/s")
    assert units.flops(3.7e-05) == ("0.0370", "GFLOP/s")  # not 3.7e-05 TFLOP/s
    assert units.gib(85_899_345_920) == "80.0 GiB"


def test_an_amount_in_the_unit_a_metric_is_declared_in() -> None:
    cases = {
        ("µs", 2500.0): "2.5 ms", ("bytes", 1.5e6): "1.5 MB", ("count", 3.0): "3",
        ("count", 2.5): "2.5", ("GB/s", 5.0): "5.00 GB/s", ("TFLOP/s", 0.018): "18.0 GFLOP/s",
        ("%", 12.5): "12.5%", ("% of span", 12.5): "12.5% of span", ("ms", 3.0): "3.0 ms",
    }  # fmt: skip
    for (unit, v), shown in cases.items():
        assert units.amount(v, unit) == shown, (unit, v)
    assert units.amount(None, "µs") == "n/a" and units.signed("2.5 ms", -1.0) == "-2.5 ms"


#: Formatting helpers that existed before nbprof.units, under their old names: none of them
#: may come back as a second duration, size or share formatter.
_OLD = {"fmt_us", "fmt_pct", "fmt_bytes", "fmt_num", "fmt_tflops", "fmt_flops_rate", "_gbps"}


def test_analysis_and_views_format_through_units() -> None:
    """No module of analysis or views defines its own duration, size or rate formatter
    (a function that only turns a number into text with a unit)."""
    found = []
    for path in sorted([*(ROOT / "nbprof" / "analysis").glob("*.py"),
                        *(ROOT / "nbprof" / "views").glob("*.py")]):  # fmt: skip
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in _OLD:
                found.append(f"{path.name}:{node.name}")
            if isinstance(node, ast.FunctionDef) and _formats_a_unit(node):
                found.append(f"{path.name}:{node.name}")
    assert not found, found


def _formats_a_unit(fn: ast.FunctionDef) -> bool:
    """A function of at most a few lines whose f-strings end in a duration or size unit."""
    if fn.end_lineno is None or fn.end_lineno - fn.lineno > 12:
        return False
    suffixes = (" µs", " ms", " s", " kB", " KB", " MB", " GB", " B")
    for node in ast.walk(fn):
        if isinstance(node, ast.JoinedStr) and node.values:
            last = node.values[-1]
            if isinstance(last, ast.Constant) and str(last.value).endswith(suffixes):
                return True
    return False
