"""Decoding one file in several processes gives exactly what one process gives.

The parallel path only runs on big files; here it is forced onto small ones by lowering
the size threshold and the chunk size (1024 events) (the same chunk size on both sides: chunk bounds
order rows before the final sort), and by allowing the fork in this test process.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from nbprof.errors import TraceError
from nbprof.trace import forked, read
from nbprof.trace import reader as reader_mod
from tests.conftest import corpus_params
from tests.golden import KinetoBuilder
from tests.test_trace_cache import assert_same, diagnosis_json

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parallel path forks")


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Parallel on every file of more than one chunk; the list counts the parallel loads."""
    monkeypatch.setattr(reader_mod, "CHUNK", 1024)
    monkeypatch.setattr(reader_mod, "PARALLEL_MIN_EVENTS", 0)
    monkeypatch.setenv(forked.WORKERS_ENV, "3")
    # Other tests may leave idle threads behind; the children here run pure decoding.
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    ran: list[int] = []
    real = reader_mod._decode_parallel

    def counting(d: Any, path: str) -> Any:
        got = real(d, path)
        if got is not None:
            ran.append(1)
        return got

    monkeypatch.setattr(reader_mod, "_decode_parallel", counting)
    return ran


def one_process(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setenv(forked.WORKERS_ENV, "1")
        return read(path, progress=False)


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_parallel_is_one_process(
    path: Path,
    forced: list[int],
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
    tmp_path: Path, forced: list[int], monkeypatch: pytest.MonkeyPatch
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
    tmp_path: Path, forced: list[int], monkeypatch: pytest.MonkeyPatch
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
    monkeypatch.delenv(forked.WORKERS_ENV, raising=False)
    assert forked.workers_wanted() == 1  # off unless asked for
    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    assert forked.workers_wanted() == 2
    monkeypatch.setenv(forked.WORKERS_ENV, "1000")
    assert forked.workers_wanted() == forked.MAX_WORKERS
    monkeypatch.setenv(forked.WORKERS_ENV, "many")
    assert forked.workers_wanted() == 1
