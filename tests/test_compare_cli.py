"""``nbprof compare BEFORE AFTER [--json] [-o out.html]``: output, schema, bad input."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_compare_golden import ADD, NEW, SGEMM_A100, SGEMM_V100, run

from nbprof.analysis.compare import METRICS
from nbprof.cli import main


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, Path]:
    before = run(tmp_path, "before", [(SGEMM_V100, 300), (ADD, 100)], step_us=1000)
    after = run(tmp_path, "after", [(SGEMM_A100, 200), (ADD, 100), (NEW, 80)], step_us=800)
    return before, after


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_text(traces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(["compare", *map(str, traces)], capsys)
    assert code == 0, err
    assert out.startswith("nbprof compare\n")
    assert f"before: {traces[0]}" in out and f"after:  {traces[1]}" in out
    assert "Mean step: 1.0 ms -> 800.0 µs, 1.25x faster" in out
    assert "new: triton_red_fused_sum_N" in out
    assert err == ""


def test_json(traces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["compare", *map(str, traces), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "nbprof.compare/1"
    assert doc["before"]["source"]["path"] == str(traces[0])
    assert doc["after"]["source"]["path"] == str(traces[1])
    assert doc["step_time_ms"]["ratio"] == pytest.approx(1.25)
    assert len(doc["metrics"]) == len(METRICS)
    assert [k["change"] for k in doc["kernels"]] == ["decreased", "new", "unchanged"]


def test_html_output(
    traces: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_html = tmp_path / "cmp.html"
    code, out, err = cli(["compare", *map(str, traces), "-o", str(out_html)], capsys)
    assert code == 0, err
    assert "What changed:" in out and f"wrote {out_html} (" in out
    page = out_html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and _timelines(page) == 2
    # With --json the note goes to stderr: stdout stays one JSON document.
    code, out, err = cli(["compare", *map(str, traces), "--json", "-o", str(out_html)], capsys)
    assert code == 0 and json.loads(out)["schema"] == "nbprof.compare/1"
    assert f"wrote {out_html} (" in err


def assert_one_line_error(code: int, err: str, path: object) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"nbprof: error: {path}: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("which", [0, 1])
def test_bad_files_are_one_line_errors(
    traces: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], which: int
) -> None:
    def args(bad: Path) -> list[str]:
        pair = [str(traces[0]), str(traces[1])]
        pair[which] = str(bad)
        return ["compare", *pair]

    missing = tmp_path / "missing.json"
    assert_one_line_error(*cli(args(missing), capsys)[::2], missing)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert_one_line_error(*cli(args(garbage), capsys)[::2], garbage)
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(gzip.compress(traces[0].read_bytes())[:200])
    assert_one_line_error(*cli(args(truncated), capsys)[::2], truncated)
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    assert_one_line_error(*cli(args(empty), capsys)[::2], empty)


def test_bad_output_folder(traces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    target = Path("/no/such/folder/out.html")
    code, _, err = cli(["compare", *map(str, traces), "-o", str(target)], capsys)
    assert_one_line_error(code, err, target)


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(["compare", "only-one.json"], capsys)
    assert code == 2 and "AFTER" in err and "Traceback" not in err


def test_as_a_user_runs_it(traces: tuple[Path, Path]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "nbprof", "compare", *map(str, traces)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert "What changed:" in p.stdout


def _timelines(page: str) -> int:
    """Main timeline plots in the page's payloads (they travel packed, so the figure's name
    is in a pack's header, not in the page's text)."""
    from nbprof.views import dashboard
    from nbprof.views.timeline import wire

    packs = re.findall(rf'<script type="{dashboard.PAYLOAD_TYPE}">([^<]*)</script>', page)
    return sum(
        json.dumps(wire.unpack(p)[0], separators=(",", ":")).count('"name":"nbprof-timeline"')
        for p in packs
    )
