"""Output targets mean what they say: a full standard output is the output's fault, a name
ending in a slash is a folder, an empty name is no name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbprof import compare, load
from nbprof.cli import main
from nbprof.errors import OutputError
from tests.test_trace_cache import build, write_old

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_old(build(), tmp_path, name="t.json")


def nbprof(*argv: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "nbprof", *argv],
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("argv", [["analyze"], ["analyze", "--json"], ["compare"]])
def test_a_full_standard_output_is_said_and_not_blamed_on_the_input(
    trace: Path, argv: list[str]
) -> None:
    args = [*argv, str(trace)] + ([str(trace)] if argv == ["compare"] else [])
    with open("/dev/full", "w") as full:
        done = nbprof(*args, stdout=full)
    assert done.returncode == 2
    assert done.stderr == (
        "nbprof: error: standard output: could not write it: no space left on the disk\n"
    )
    assert str(trace) not in done.stderr


def test_a_closed_pipe_is_still_a_quiet_exit(trace: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        f"{sys.executable} -m nbprof analyze {trace} | head -c 1 > /dev/null",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("exists", [False, True])
def test_an_output_name_ending_in_a_slash_is_a_folder_not_a_file(
    trace: Path,
    tmp_path: Path,
    command: str,
    exists: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "newdir"
    if exists:
        target.mkdir()
    argv = [command, str(trace)] + ([str(trace)] if command == "compare" else [])
    code = main([*argv, "-o", f"{target}/"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"nbprof: error: {target}/: ") and "folder" in err
    assert target.is_dir() == exists  # never a file named newdir
    assert not exists or not any(target.iterdir())


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_output_name_is_refused_and_replaces_nothing(
    trace: Path, command: str, empty: str, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier = trace.with_suffix(".html")
    earlier.write_text("the earlier report")
    argv = [command, str(trace)] + ([str(trace)] if command == "compare" else [])
    code = main([*argv, "-o", empty])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "empty" in err, err
    assert earlier.read_text() == "the earlier report"
    assert sorted(p.name for p in trace.parent.iterdir()) == ["t.html", "t.json"]


def test_an_empty_out_variable_in_a_shell_replaces_no_report(trace: Path) -> None:
    earlier = trace.with_suffix(".html")
    earlier.write_text("the earlier report")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OUT": ""}
    done = subprocess.run(
        f'{sys.executable} -m nbprof report {trace} -o "$OUT"',
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "empty" in done.stderr
    assert earlier.read_text() == "the earlier report"


def test_json_on_stdout_stays_json_beside_the_written_page(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare", "--json", "-o", str(tmp_path / "c.html"), str(trace), str(trace)])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["schema"] == "nbprof.compare/1"
    assert err.startswith("wrote ")


@pytest.mark.parametrize("name", ["", " ", "newdir/"])
def test_the_library_refuses_the_same_output_names(
    trace: Path, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``to_html(path)`` of a profile and of a comparison, as ``-o`` does: never a file
    named after the folder, never some default file for an empty name."""
    monkeypatch.chdir(tmp_path)
    target = f"{tmp_path}/{name}" if name.strip() else name
    profile = load(trace)
    comparison = compare(trace, trace)
    for what in (profile, comparison):
        with pytest.raises(OutputError) as e:
            what.to_html(target)
        assert ("folder" if name.strip() else "empty") in e.value.reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
