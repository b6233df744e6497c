"""Decoding one file in several processes gives exactly what one process gives.

The parallel path only runs on big files; here it is forced onto small ones by lowering
the size threshold and the chunk size (1024 events) (the same chunk size on both sides: chunk bounds
order rows before the final sort), and by allowing the fork in this test process.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nbprof.errors import TraceError
from nbprof.trace import forked, helpers, read
from nbprof.trace import reader as reader_mod
from tests.conftest import corpus_params
from tests.golden import KinetoBuilder
from tests.test_trace_cache import assert_same, diagnosis_json
from tests.test_trace_fastpaths import kineto_text

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parallel path forks")


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Parallel on every file of more than one chunk or piece; the list names the parallel
    loads' paths ("stream" for a Kineto layout read as it is decompressed, with helper
    processes; "pieces" for one cut in place; "skim" for any other)."""
    monkeypatch.setattr(reader_mod, "CHUNK", 1024)
    monkeypatch.setattr(reader_mod, "PARALLEL_MIN_EVENTS", 0)
    monkeypatch.setattr(reader_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setenv(forked.WORKERS_ENV, "3")
    # Other tests may leave idle threads behind; the children here run pure decoding.
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    ran: list[str] = []
    skim = reader_mod._decode_parallel
    pieces = reader_mod._decode_pieces_parallel

    def counting_skim(d: Any, path: str) -> Any:
        got = skim(d, path)
        if got is not None:
            ran.append("skim")
        return got

    def counting_pieces(d: Any, path: str, step: Any) -> Any:
        got = pieces(d, path, step)
        if got is not None:
            ran.append("pieces")
        return got

    results = helpers.Helpers.results

    def counting_stream(team: helpers.Helpers) -> Any:
        got = results(team)
        if got is not None and any(team.handed):
            ran.append("stream")
        return got

    monkeypatch.setattr(helpers.Helpers, "results", counting_stream)
    monkeypatch.setattr(reader_mod, "_decode_parallel", counting_skim)
    monkeypatch.setattr(reader_mod, "_decode_pieces_parallel", counting_pieces)
    return ran


def one_process(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setenv(forked.WORKERS_ENV, "1")
        return read(path, progress=False)


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_parallel_is_one_process(
    path: Path,
    forced: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    single = one_process(path, monkeypatch)
    assert not forced
    with caplog.at_level(logging.DEBUG, "nbprof.trace.reader"):
        many = read(path, progress=False)
    assert_same(single, many)
    assert diagnosis_json(single) == diagnosis_json(many)
    if single.event_count > 1024 and not path.is_dir():
        # More than one chunk: decoded in parts, unless its text thread ids forbid that.
        assert forced or "text thread ids" in caplog.text, "the parallel path did not run"


def big_trace(tmp_path: Path, n: int = 700, **tid: Any) -> KinetoBuilder:
    b = KinetoBuilder()
    for i in range(n):
        b.cpu_op("aten::mm", 20.0 * i, 10.0)
        b.kernel(f"k{i % 7}", 20.0 * i + 8, 5.0)
    for e in b.events:
        e.update(tid)
    return b


def test_text_thread_ids_fall_back_to_one_process(
    tmp_path: Path, forced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = big_trace(tmp_path)
    for i, e in enumerate(b.events):
        if e.get("cat") == "cpu_op":
            e["tid"] = f"thread {i % 3}"  # codes given in order of first appearance
    p = b.write(tmp_path)
    single = one_process(p, monkeypatch)
    assert_same(single, read(p, progress=False))
    assert not forced  # it fell back


def test_a_bad_event_late_in_the_file_is_the_same_error(
    tmp_path: Path, forced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = big_trace(tmp_path)
    doc = b.document()
    doc["traceEvents"][-5]["dur"] = "soon"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as one:
        one_process(p, monkeypatch)
    with pytest.raises(TraceError) as many:
        read(p, progress=False)
    assert str(many.value) == str(one.value)
    assert str(len(doc["traceEvents"]) - 5) in str(one.value)  # the event's index


def test_fork_only_without_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.main_thread()])
    assert forked.can_fork()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="someone-else")
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.main_thread(), t])
    assert not forked.can_fork()


def test_workers_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "idle_cores", lambda: 3)
    monkeypatch.delenv(forked.WORKERS_ENV, raising=False)
    assert forked.workers_wanted() == 3  # the idle cores, unless told
    assert forked.workers_wanted(auto=False) == 1
    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    assert forked.workers_wanted() == 2
    monkeypatch.setenv(forked.WORKERS_ENV, "1")
    assert forked.workers_wanted() == 1  # off
    monkeypatch.setenv(forked.WORKERS_ENV, "1000")
    assert forked.workers_wanted() == forked.MAX_WORKERS
    monkeypatch.setenv(forked.WORKERS_ENV, "many")
    assert forked.workers_wanted() == 1


@pytest.mark.parametrize(
    ("cores", "busy", "idle"),
    [
        (2, 0.0, 2),  # nothing else running: both cores
        (2, 1.0, 1),  # one task running elsewhere: this one alone
        (2, 2.0, 1),
        (2, 7.0, 1),  # overloaded: never fewer than one
        (16, 3.0, 8),  # many idle cores: at most MAX_WORKERS
        (8, 3.0, 5),
    ],
)
def test_idle_cores_are_the_allowed_cores_less_what_runs_elsewhere(
    monkeypatch: pytest.MonkeyPatch, cores: int, busy: float, idle: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(cores)))
    monkeypatch.setattr(forked, "_others_running", lambda: busy)
    assert forked.idle_cores() == idle


@pytest.mark.parametrize(
    ("line", "others"),
    [
        (b"0.83 0.55 0.61 1/88 27604\n", 0.0),  # this thread alone
        (b"0.10 0.20 0.30 3/412 99\n", 2.0),
        (b"0.10 0.20 0.30 0/412 99\n", 0.0),  # (read between two ticks)
        (b"0.10 0.20\n", None),
        (b"0.1 0.2 0.3 many/412 1\n", None),
    ],
)
def test_the_running_count_is_read_less_this_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: bytes, others: float | None
) -> None:
    fake = tmp_path / "loadavg"
    fake.write_bytes(line)
    monkeypatch.setattr(forked, "_LOADAVG", str(fake))
    assert forked._others_running() == others


def test_a_task_running_for_a_moment_is_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three readings a millisecond apart: a task seen in one of them only (a kernel's
    # thread sending output) is not keeping a core busy; one seen in all three is.
    fake = tmp_path / "loadavg"
    lines = iter([b"0 0 0 3/88 1\n", b"0 0 0 2/88 1\n", b"0 0 0 3/88 1\n"])
    fake.write_bytes(next(lines))
    monkeypatch.setattr(forked, "_LOADAVG", str(fake))
    monkeypatch.setattr(forked.time, "sleep", lambda _: fake.write_bytes(next(lines)))
    assert forked._others_running() == 1.0


def test_this_process_own_past_work_leaves_the_cores_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook's kernel that just ran a cell for a minute has a load average of its
    own work (0.83 after 75 s busy, measured): only what runs now elsewhere counts."""
    fake = tmp_path / "loadavg"
    fake.write_bytes(b"0.83 0.55 0.61 1/88 27604\n")
    monkeypatch.setattr(forked, "_LOADAVG", str(fake))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.83, 0.55, 0.61))
    assert forked.idle_cores() == 2


def test_no_running_count_means_the_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "_LOADAVG", "/nonexistent/loadavg")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.9, 0.9, 0.9))
    assert forked.idle_cores() == 1

    def unreadable() -> tuple[float, float, float]:
        raise OSError("no /proc/loadavg")

    monkeypatch.setattr(os, "getloadavg", unreadable)
    assert forked.idle_cores() == 1


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="Linux's running count")
def test_a_process_spinning_beside_this_one_is_seen_running() -> None:
    import subprocess
    import sys

    spin = subprocess.Popen(
        [sys.executable, "-c", "import sys; print(flush=True); sys.stdin.close()\nwhile 1: pass"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert spin.stdout is not None and spin.stdout.readline() == b"\n"  # it is spinning
        others = forked._others_running()
        assert others is not None and others >= 1
    finally:
        spin.kill()
        spin.wait()


def kineto_file(tmp_path: Path, events: list[dict[str, Any]], name: str = "k.json") -> Path:
    """``events`` written as Kineto lays them out, so the reader cuts them into pieces."""
    p = tmp_path / name
    p.write_text(kineto_text(events))
    return p


@pytest.fixture(params=["stream", "whole"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a Kineto layout is read in parallel: "stream" as it is decompressed, helper
    processes taking pieces; "whole" (streaming turned off) cut in place and shared out."""
    if request.param == "whole":
        monkeypatch.setenv(reader_mod.STREAM_ENV, "0")
    return str(request.param)


#: What reads a Kineto layout in parallel, by :func:`reading`.
PARALLEL_PATH = {"stream": "stream", "whole": "pieces"}


def test_kineto_layout_is_decoded_by_pieces_in_parallel(
    tmp_path: Path, forced: list[str], reading: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4000 events of ~250 bytes in pieces of 1024 * 256 bytes: a few pieces, shared out.
    p = kineto_file(tmp_path, big_trace(tmp_path, n=2000).events)
    single = one_process(p, monkeypatch)
    many = read(p, progress=False)
    assert forced == [PARALLEL_PATH[reading]]
    assert_same(single, many)
    assert diagnosis_json(single) == diagnosis_json(many)


def test_pieces_in_parallel_keep_flow_positions(
    tmp_path: Path, forced: list[str], reading: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without correlation ids, kernels are linked to their launches by flow events, found
    by their file positions: a child's positions count from its own first event, so the
    parent must shift them, or the late kernels lose their launches. (Streamed, the flow
    events are found in the whole file: it is read whole after the stream.)"""
    b = big_trace(tmp_path, n=2000)
    events: list[dict[str, Any]] = []
    for i, e in enumerate(b.events):
        e = dict(e)
        e.get("args", {}).pop("correlation", None)
        events.append(e)
        if e.get("cat") == "kernel":
            at, pid = e["ts"] - 3, e["pid"]
            events += [
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid,
                 "tid": 1, "ts": at, "dur": 2, "args": {}},
                {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": pid, "tid": 1,
                 "ts": at},
                {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": i, "pid": pid,
                 "tid": e["tid"], "ts": e["ts"], "bp": "e"},
            ]  # fmt: skip
    p = kineto_file(tmp_path, events)
    single = one_process(p, monkeypatch)
    many = read(p, progress=False)
    assert forced == {"stream": ["stream", "pieces"], "whole": ["pieces"]}[reading]
    assert_same(single, many)
    linked = single.kernels["launch_name"] == "cudaLaunchKernel"
    assert int(linked.sum()) == len(single.kernels) > 1000  # every kernel found its launch


def test_pieces_in_parallel_a_bad_late_event_is_the_same_error(
    tmp_path: Path, forced: list[str], reading: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [dict(e) for e in big_trace(tmp_path, n=2000).events]
    events[-5]["dur"] = "soon"
    p = kineto_file(tmp_path, events)
    with pytest.raises(TraceError) as one:
        one_process(p, monkeypatch)
    with pytest.raises(TraceError) as many:
        read(p, progress=False)
    assert str(many.value) == str(one.value)
    assert not forced  # a child's run failed: the whole file was read here again


def test_pieces_in_parallel_text_thread_ids_fall_back(
    tmp_path: Path, forced: list[str], reading: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [dict(e) for e in big_trace(tmp_path, n=2000).events]
    for i, e in enumerate(events):
        if e.get("cat") == "cpu_op":
            e["tid"] = f"thread {i % 3}"
    p = kineto_file(tmp_path, events)
    single = one_process(p, monkeypatch)
    assert_same(single, read(p, progress=False))
    # Streamed, the helpers' pieces came back, then were dropped for their codes.
    assert forced == {"stream": ["stream"], "whole": []}[reading]


def _die_on_two(x: int) -> int:
    if x == 2:
        os._exit(3)  # a worker killed mid-part (out of memory, a crash)
    return x * 10


def _raise_on_two(x: int) -> int:
    if x == 2:
        raise ValueError("bad part")
    return x * 10


def _children() -> set[int]:
    """Process ids of this process's children that are still there (zombies included)."""
    me = os.getpid()
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            out.add(int(stat.parent.name))
    return out


def test_map_forked_gives_results_in_order() -> None:
    before = _children()
    assert forked.map_forked(lambda x: x * 10, [1, 3, 5, 7]) == [10, 30, 50, 70]
    assert _children() == before  # every child waited for


def test_map_forked_big_results_cross_the_pipe() -> None:
    got = forked.map_forked(lambda n: bytes(n), [10, 5_000_000, 3_000_000])
    assert got is not None and [len(g) for g in got] == [10, 5_000_000, 3_000_000]


@pytest.mark.parametrize("fn", [_die_on_two, _raise_on_two])
def test_map_forked_a_failed_child_gives_none(fn: Any) -> None:
    before = _children()
    assert forked.map_forked(fn, [1, 2, 3]) is None
    assert _children() == before


def test_map_forked_a_failed_first_part_gives_none_and_stops_the_children() -> None:
    before = _children()

    def slow_unless_first(x: int) -> int:
        if x == 0:
            raise ValueError("first part is bad")
        time.sleep(30)  # killed, not waited for
        return x

    t0 = time.monotonic()
    assert forked.map_forked(slow_unless_first, [0, 1, 2]) is None
    assert time.monotonic() - t0 < 20
    assert _children() == before


def _wanted_here(_: int) -> int:
    return forked.workers_wanted()


def test_a_pool_worker_reads_its_file_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's rank worker (or a Dask worker) is one of a pool already using the cores:
    it never splits its own file among more processes, whatever the setting says."""
    import multiprocessing

    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    assert forked.workers_wanted() == 2
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_wanted_here, [0]) == [1]


def test_a_first_load_does_not_import_multiprocessing(corpus: Path) -> None:
    """Asking whether this is a pool's worker needs no import of multiprocessing: a process
    that never imported it is none (the import costs every first load about 3 ms)."""
    trace = corpus / "tracelens__bert-small-inference-h100.json.gz"
    code = (
        "import sys, nbprof\n"
        f"p = nbprof.load({str(trace)!r}, progress=False, cache=False)\n"
        "assert p.diagnosis.verdict.bottleneck\n"
        "print('multiprocessing' in sys.modules)\n"
    )
    env = {**os.environ, forked.WORKERS_ENV: "2"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_map_forked_without_a_fork_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """No process can be started (a process limit): the caller decodes everything itself,
    and no pipe is left open."""

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    fds = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fork", no_fork)
    assert forked.map_forked(lambda x: x, [1, 2, 3]) is None
    assert len(os.listdir("/proc/self/fd")) == fds
