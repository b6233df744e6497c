"""nbprof analyze on a job folder: the job section, --job, --workers, one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbprof.cli import main
from tests.jobs import STRAGGLER, write_job


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_job_json_and_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_job(tmp_path)
    code, out, _ = run(["analyze", str(tmp_path), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["job"]["stragglers"][0]["rank"] == STRAGGLER
    assert [r["rank"] for r in doc["job"]["ranks"]] == [0, 1, 2, 3]
    code, out2, _ = run(["analyze", str(tmp_path), "--json", "--workers", "2"], capsys)
    assert code == 0 and json.loads(out2) == doc
    code, text, _ = run(["analyze", str(tmp_path)], capsys)
    assert code == 0 and "Stragglers (the ranks the others wait for):" in text


def test_device_filter_on_a_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_job(tmp_path)
    code, out, _ = run(["analyze", str(tmp_path), "--json", "--device", "2:0"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert [(d["rank"], d["device"]) for d in doc["devices"]] == [(2, "0")]
    assert [r["rank"] for r in doc["job"]["ranks"]] == [2]
    code, _, err = run(["analyze", str(tmp_path), "--device", "9:0"], capsys)
    assert code == 2 and "no device '9:0' in this job" in err


def test_not_one_job_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_job(tmp_path, info={0: {"backend": "gloo", "rank": 0, "world_size": 4}})
    code, out, err = run(["analyze", str(tmp_path)], capsys)
    assert code == 2 and not out
    assert err.count("\n") == 1
    assert err.startswith(f"nbprof: error: {tmp_path}: not one job: backends differ: ")
    assert "gloo in rank0.json" in err and "nccl in rank1.json, rank2.json, rank3.json" in err
    code, out, err = run(["analyze", str(tmp_path), "--job", "--json"], capsys)
    assert code == 0
    assert any("analysed as one job although" in n for n in json.loads(out)["source"]["notes"])


@pytest.mark.parametrize("bad", ["0", "x"])
def test_workers_must_be_a_positive_number(
    tmp_path: Path, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["analyze", str(tmp_path), "--workers", bad], capsys)
    assert code == 2 and "--workers" in err
