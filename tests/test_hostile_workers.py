"""Worker processes end with their parent, however it ends; ``--workers`` is bounded.

Each test starts a real parent process with real workers (forked, as the command line
starts them, and spawned, as a notebook kernel does), kills the parent the way a user, a
scheduler or a kernel restart would, and looks for the workers in ``/proc``. Before, they
were handed to init and waited forever, about 85 MB each.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbprof import parallel
from nbprof.cli import main
from tests.jobs import write_job

REPO = Path(__file__).resolve().parent.parent
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
#: How long the workers may take to end once their parent is gone. The promise is under a
#: second; this is the hang guard, with room for a loaded machine.
GONE_WITHIN_S = 5.0


def nap(seconds: float) -> float:
    """A worker's item: sleep (module level: spawned workers import it)."""
    time.sleep(seconds)
    return seconds


def _state(pid: int) -> str | None:
    """The process's state letter, None when it is gone (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return None if state in ("Z", "X") else state


def children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid``."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and _state(int(d)) is not None:
            out.append(int(d))
    return out


def wait_for(test: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


PARENT = """
import sys
from nbprof import parallel
from tests.test_hostile_workers import nap
if sys.argv[1] == "spawn":
    parallel.start_method = lambda: "spawn"
parallel.run(nap, [120.0] * 4, workers=2)
"""


def start_parent(method: str) -> tuple[subprocess.Popen[bytes], list[int]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, method], env=env, start_new_session=True
    )
    return parent, started_workers(parent.pid)


def started_workers(parent: int) -> list[int]:
    """The parent's children once its two workers run (a spawned pool's resource tracker
    among them: it ends with the parent too)."""
    assert wait_for(lambda: len(children(parent)) >= 2, 60), "the workers never started"
    time.sleep(1.0)  # the second worker of a spawned pool starts after the tracker
    return children(parent)


def kill_and_check(parent: subprocess.Popen[bytes], workers: list[int], sig: int) -> None:
    try:
        os.kill(parent.pid, sig)
        parent.wait(30)
        alive = lambda: [w for w in workers if _state(w) is not None]  # noqa: E731
        assert wait_for(lambda: not alive(), GONE_WITHIN_S), (
            f"workers {alive()} outlived their parent"
        )
    finally:
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@linux_only
@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGKILL"])
def test_workers_end_when_their_parent_is_killed(method: str, sig: str) -> None:
    parent, workers = start_parent(method)
    kill_and_check(parent, workers, getattr(signal, sig))


@linux_only
@pytest.mark.timeout(120)
def test_ctrl_c_still_stops_the_command_and_its_workers(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole foreground process group: the command says nothing more
    than its status (130), and no worker is left."""
    write_job(tmp_path / "job")
    # As in a terminal: a job started in the background (a test runner's) ignores SIGINT.
    code = f"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import nbprof.analysis.rank as rank
from nbprof import cli
real = rank.summarize
def slow(*a, **k):
    time.sleep(120)
    return real(*a, **k)
rank.summarize = slow
sys.exit(cli.main(["analyze", "--workers", "2", {str(tmp_path / "job")!r}]))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(
        [sys.executable, "-c", code], env=env, start_new_session=True, stderr=subprocess.PIPE
    )
    workers = started_workers(parent.pid)
    try:
        os.killpg(parent.pid, signal.SIGINT)
        assert parent.wait(30) == 130
        err = parent.stderr.read().decode() if parent.stderr else ""
        assert "Traceback" not in err, err
        assert wait_for(lambda: all(_state(w) is None for w in workers), GONE_WITHIN_S)
    finally:
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if parent.poll() is None:
            parent.kill()
        parent.wait()


@linux_only
def test_a_worker_whose_parent_is_already_gone_ends_at_once() -> None:
    """The parent may die between the fork and the worker's first instruction: the check
    after asking for the signal catches it (the worker would otherwise wait forever)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: its "parent" is a process id that is not its parent
        os.close(r)
        try:
            parallel.die_with_parent(os.getppid() + 1_000_000)
            os.write(w, b"lived")
        finally:
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.read(r, 16) == b"" and os.WEXITSTATUS(status) == 1
    os.close(r)


def test_workers_are_bounded_by_files_and_cpus(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_job(tmp_path)  # 4 rank files
    monkeypatch.setattr(parallel, "cpus", lambda: 3)
    asked: list[int | None] = []
    real = parallel.run

    def spy(fn, items, *, workers=None, scheduler=None):  # type: ignore[no-untyped-def]
        asked.append(workers)
        return real(fn, items, workers=1, scheduler=scheduler)

    monkeypatch.setattr(parallel, "run", spy)
    with caplog.at_level(logging.WARNING, "nbprof"):
        assert main(["analyze", "--json", "--workers", "64", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["job"]["ranks"]
    assert asked == [3]
    said = [r.getMessage() for r in caplog.records if "worker processes" in r.getMessage()]
    assert said == ["64 worker processes asked for, 3 started: no more can run at once "
                    "(4 rank files and 3 CPUs)"]  # fmt: skip
    caplog.clear()
    monkeypatch.setattr(parallel, "cpus", lambda: 16)
    with caplog.at_level(logging.WARNING, "nbprof"):
        assert main(["analyze", "--json", "--workers", "9", str(tmp_path)]) == 0
    assert asked[-1] == 4
    assert "(4 rank files)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "nbprof"):
        assert main(["analyze", "--json", "--workers", "2", str(tmp_path)]) == 0
    assert asked[-1] == 2 and "worker processes" not in caplog.text
