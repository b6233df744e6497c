"""Counts a trace claims are not believed: a job's world size sizes no allocation and no loop.

Two 4 kB rank files that claim a world of a billion ranks are analysed in the memory two
small ranks take (under an address-space limit), and what is missing is said in one line,
never one line per rank. When memory does run out, the refusal names what was too big,
never "this 0 MB trace".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbprof.cli import main
from tests.jobs import write_job

REPO = Path(__file__).resolve().parent.parent
#: Ranks beyond the files present that a world size is believed for (analysis/job.py).
MARGIN = 64
needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="address-space limits are Linux's"
)


def claimed_world(folder: Path, world: int, ranks: int = 2) -> Path:
    write_job(
        folder,
        world=ranks,
        info={r: {"backend": "nccl", "rank": r, "world_size": world} for r in range(ranks)},
    )
    return folder


def run_limited(extra_mib: int, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``nbprof ARGV`` in a subprocess allowed ``extra_mib`` MiB of address space beyond what
    it holds once its modules are imported."""
    code = f"""
import resource, sys
import nbprof.cli, nbprof.trace, nbprof.analysis, nbprof.analysis.job, nbprof.views.text
import nbprof.job, pandas, numpy
size = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
resource.setrlimit(resource.RLIMIT_AS, (size + {extra_mib} * 2**20, resource.RLIM_INFINITY))
sys.exit(nbprof.cli.main({list(argv)!r}))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


@needs_linux
@pytest.mark.timeout(120)
@pytest.mark.parametrize("world", [10**9, 2**62])
def test_a_billion_ranks_claimed_by_two_small_files_costs_two_ranks(
    tmp_path: Path, world: int
) -> None:
    folder = claimed_world(tmp_path / "job", world)
    assert all(f.stat().st_size < 5000 for f in folder.iterdir())
    done = run_limited(400, "analyze", "--json", "--workers", "1", str(folder))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["job"]["world_size"] == world  # what the files say, reported as such
    absent = [m for m in doc["job"]["missing"] if m["path"] is None]
    assert absent == [
        {"rank": 2, "last": world - 1, "count": world - 2, "path": None,
         "reason": "no trace file for these ranks"}
    ]  # fmt: skip
    for c in doc["job"]["collectives"]:
        assert len(c["absent"]) <= 2 + MARGIN


@pytest.mark.timeout(60)
def test_a_million_ranks_missing_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = claimed_world(tmp_path / "job", 10**6, ranks=8)
    code = main(["analyze", "--workers", "1", str(folder)])
    out, _ = capsys.readouterr()
    assert code == 0
    assert len(out.splitlines()) < 200
    said = [line for line in out.splitlines() if "missing" in line and "999,992" in line]
    assert said and "ranks 8-999999 missing: 999,992 ranks" in said[0]
    assert out.count("no trace file") <= 2  # the missing-ranks line, and the note


@pytest.mark.parametrize("world", [2**63, 2**64, 10**40])
def test_a_world_beyond_64_bits_is_no_count_and_json_still_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: int
) -> None:
    """Such a number is not believed, not listed, and not handed to the JSON writer, which
    holds 64-bit integers only (it ended in "internal error: TypeError")."""
    folder = claimed_world(tmp_path / "job", world)
    code = main(["analyze", "--json", "--workers", "1", str(folder)])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["job"]["world_size"] is None
    assert [m for m in doc["job"]["missing"] if m["path"] is None] == []
    assert any(f"world_size ({world:,}) is no rank count" in n for n in doc["job"]["notes"])


@pytest.mark.parametrize("rank", [2**63, -(2**63), 10**30])
def test_a_rank_index_beyond_64_bits_is_no_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rank: int
) -> None:
    """Said as a file without a rank; with --job the files are numbered by their order and
    the JSON is written."""
    info = {0: {"backend": "nccl", "rank": 0, "world_size": 2},
            1: {"backend": "nccl", "rank": rank, "world_size": 2}}  # fmt: skip
    write_job(tmp_path, world=2, info=info)
    code = main(["analyze", "--workers", "1", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert "no rank in distributedInfo: rank1.json" in err
    code = main(["analyze", "--json", "--job", "--workers", "1", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [r["rank"] for r in json.loads(out)["job"]["ranks"]] == [0, 1]


def test_json_output_writes_an_integer_beyond_64_bits_as_its_digits() -> None:
    from nbprof import cli

    assert json.loads(cli._dumps({"n": 10**40, "m": [2**64 - 1, -(2**63)]})) == {
        "n": str(10**40),
        "m": [2**64 - 1, -(2**63)],
    }


def test_a_believable_world_still_names_its_missing_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ranks 6 and 7 of 8 have no file: one line for the run, and each collective (no
    group ranks recorded here) knows which members it lacks."""
    write_job(tmp_path, world=8, ranks=list(range(6)))
    code = main(["analyze", "--json", "--workers", "1", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["job"]["missing"] == [
        {"rank": 6, "last": 7, "count": 2, "path": None,
         "reason": "no trace file for these ranks"}
    ]  # fmt: skip
    code = main(["analyze", "--workers", "1", str(tmp_path)])
    out = capsys.readouterr().out
    assert "ranks 6-7 missing: 2 ranks (no trace file for these ranks)" in out


def test_an_unreadable_rank_file_takes_the_one_missing_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_job(tmp_path, world=4)
    (tmp_path / "rank3.json").write_text("{not json")
    code = main(["analyze", "--json", "--workers", "1", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    [m] = doc["job"]["missing"]
    assert m["rank"] == 3 and m["path"].endswith("rank3.json") and "JSON" in m["reason"]


def test_running_out_of_memory_on_a_small_trace_names_what_was_too_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    import nbprof.analysis

    write_job(tmp_path, world=1)
    path = tmp_path / "rank0.json"

    def too_big(*args: object, **kwargs: object) -> None:
        np.empty(2**40, np.int64)  # numpy words the size it could not allocate: 8 TiB

    monkeypatch.setattr(nbprof.analysis, "analyze", too_big)
    code = main(["analyze", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert " 0 MB" not in err and "this 0" not in err
    assert "8.00 TiB" in err
    assert "kB" in err  # the trace's own size, in a unit that shows it


@pytest.mark.parametrize("size", [0, 999, 4_500, 2_500_000])
def test_sizes_in_words_never_round_to_zero(size: int) -> None:
    from nbprof import _memory

    words = _memory.not_enough(size, 8 * 10**9)
    assert "0 MB" not in words.replace("10 MB", "")
    assert _memory.gb(size) != "0 MB"


@pytest.mark.timeout(120)
def test_a_folder_of_ten_thousand_empty_files_is_one_line_that_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for r in range(10_000):
        (tmp_path / f"rank{r}.json").touch()
    code = main(["analyze", "--workers", "1", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert "no rank file of 10,000 could be read" in err
    assert "rank0.json: file is empty" in err and "and 9,997 more" in err
