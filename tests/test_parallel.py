"""nbprof.parallel and jobs run elsewhere: local processes and a Dask LocalCluster give the
in-process answer, a dying worker is retried and reported, fsspec URLs are read."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbprof
from nbprof import parallel
from nbprof.job import Job
from tests.jobs import STRAGGLER, die_on, die_once, refault_pages, square, write_job


def test_import_nbprof_does_not_import_dask() -> None:
    code = "import sys, nbprof, nbprof.job; assert 'dask' not in sys.modules, 'dask'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_run_here_and_in_processes_agree() -> None:
    items = [3, -1, 5]
    here = parallel.run(square, items)
    there = parallel.run(square, items, workers=2)
    for got in (here, there):
        assert [o.value for o in got] == [9, None, 25]
        assert got[1].error == "ValueError: negative: -1"
        assert all(o.retries == 0 for o in got)


def test_items_go_out_in_shrinking_batches() -> None:
    """Every item once, in order, in batches that start at the items over twice the
    workers and shrink to one; with few items, one at a time."""
    cut = parallel._batches(list(range(64)), 2)
    assert [i for b in cut for i in b] == list(range(64))
    sizes = [len(b) for b in cut]
    assert sizes[0] == 64 // 4 and sizes[-1] == 1
    assert sizes == sorted(sizes, reverse=True)
    assert parallel._batches([7, 8, 9], 2) == [[7], [8], [9]]


def test_batch_mates_of_a_failing_item_keep_their_answers() -> None:
    """Forty items in batches: each failure stays its own item's, in the items' order."""
    items = [i if i % 7 else -i - 1 for i in range(40)]
    got = parallel.run(square, items, workers=2)
    assert got == parallel.run(square, items)
    assert [o.value for o in got][:3] == [None, 1, 4]
    assert got[7].error == "ValueError: negative: -8"


def test_an_item_that_kills_its_batch_is_reported_alone() -> None:
    """Its batch mates lost with it are tried again and answered; it is reported."""
    items = list(range(16))
    got = parallel.run(die_on, items, workers=2)
    assert [o.value for o in got] == [x * x if x != 13 else None for x in items]
    assert "died each time it was tried" in str(got[13].error)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_workers_keep_freed_memory_for_the_next_item() -> None:
    """A worker's allocator keeps what one item freed for the next: no page is faulted
    in again (2048 faults for 8 MiB where freed memory goes back to the system, as it
    does by default, and still does in the caller's process)."""
    code = "from tests.jobs import refault_pages; print(refault_pages(8))"
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert here.returncode == 0, here.stderr
    if int(here.stdout) < 1024:
        pytest.skip("this C library keeps freed memory by default")
    got = parallel.run(refault_pages, [8, 8, 8], workers=2)
    assert all(o.value is not None and o.value < 64 for o in got), got


def test_a_worker_process_that_dies_is_retried_then_reported() -> None:
    got = parallel.run(die_on, [1, 13, 2, 3], workers=2)
    assert [o.value for o in got] == [1, None, 4, 9]
    assert got[1].error is not None and "died each time it was tried" in got[1].error


def test_a_worker_process_that_dies_once_is_retried(tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    got = parallel.run(die_once, [(marker, 4), (marker, 5)], workers=2)
    assert [o.value for o in got] == [16, 25]
    # The first run of one of them killed the pool: what was in it ran again.
    assert any(o.retries >= 1 for o in got)


def test_job_in_processes_equals_in_process(tmp_path: Path) -> None:
    write_job(tmp_path)
    here = nbprof.load(tmp_path, workers=1)
    there = nbprof.load(tmp_path, workers=2)
    assert isinstance(here, Job) and isinstance(there, Job)
    assert there.to_json() == here.to_json()


def test_workers_fork_without_threads_and_spawn_beside_one() -> None:
    # Forked workers start with the parent's modules (no second import of pandas and the
    # analysis); a thread running beside the fork could leave a child stuck on its lock.
    code = (
        "import threading\n"
        "from nbprof import parallel\n"
        "print(parallel.start_method())\n"
        "stop = threading.Event()\n"
        "t = threading.Thread(target=stop.wait); t.start()\n"
        "print(parallel.start_method())\n"
        "stop.set(); t.join()\n"
        "print(parallel.start_method())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    expected = ["fork", "spawn", "fork"] if sys.platform == "linux" else ["spawn"] * 3
    assert out.stdout.split() == expected


_FORKED_JOB = """
import sys
from nbprof import parallel
from tests.jobs import die_on, die_once
assert parallel.start_method() == "fork", parallel.start_method()
got = parallel.run(die_on, [1, 13, 2, 3], workers=2)
assert [o.value for o in got] == [1, None, 4, 9], got
assert "died each time it was tried" in str(got[1].error)
again = parallel.run(die_once, [(sys.argv[2], 4), (sys.argv[2], 5)], workers=2)
assert [o.value for o in again] == [16, 25] and any(o.retries for o in again), again
import nbprof
job = nbprof.load(sys.argv[1], workers=2)
assert parallel.start_method() == "fork"
import json
sys.stdout.write(json.dumps(job.to_json(), sort_keys=True))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="workers fork only on Linux")
def test_forked_workers_retry_and_give_the_in_process_answer(tmp_path: Path) -> None:
    # In a fresh interpreter, so that no thread of this test process forbids the fork.
    write_job(tmp_path / "job")
    out = subprocess.run(
        [sys.executable, "-c", _FORKED_JOB, str(tmp_path / "job"), str(tmp_path / "died")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.returncode == 0, out.stderr
    here = nbprof.load(tmp_path / "job", workers=1)
    assert isinstance(here, Job)
    assert json.loads(out.stdout) == here.to_json()


def test_spawned_workers_give_the_in_process_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "start_method", lambda: "spawn")
    write_job(tmp_path)
    here = nbprof.load(tmp_path, workers=1)
    there = nbprof.load(tmp_path, workers=2)
    assert isinstance(here, Job) and isinstance(there, Job)
    assert there.to_json() == here.to_json()
    got = parallel.run(die_on, [1, 13, 2], workers=2)
    assert [o.value for o in got] == [1, None, 4]


def test_a_job_uses_every_core_only_where_workers_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbprof import job as job_mod

    monkeypatch.setattr(parallel, "cpus", lambda: 2)
    monkeypatch.setattr(parallel, "start_method", lambda: "fork")
    assert job_mod.local_workers(None, 64) == 2
    assert job_mod.local_workers(None, 1) == 1  # one file: nothing to share out
    assert job_mod.local_workers(2, 64) == 2  # the caller's number stands, where it can
    assert job_mod.local_workers(1, 64) == 1
    # A spawned worker would import pandas and the analysis again: this process alone.
    monkeypatch.setattr(parallel, "start_method", lambda: "spawn")
    assert job_mod.local_workers(None, 64) == 1


def test_workers_that_cannot_start_leave_the_items_to_this_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_pool(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/dev/shm")

    monkeypatch.setattr(parallel, "_processes", no_pool)
    got = parallel.run(square, [2, -1, 3], workers=2)
    assert [o.value for o in got] == [4, None, 9]
    assert "could not start worker processes" in caplog.text


def test_job_over_fsspec_urls(tmp_path: Path) -> None:
    write_job(tmp_path)
    here = nbprof.load(tmp_path, workers=1)
    url = nbprof.load(f"file://{tmp_path}")
    assert isinstance(url, Job)
    assert [r.rank for r in url.diagnosis.ranks] == [r.rank for r in here.diagnosis.ranks]
    assert url.diagnosis.stragglers[0].rank == STRAGGLER
    # The URL's own paths are named; the numbers are the local load's.
    assert url.diagnosis.breakdown == here.diagnosis.breakdown


def test_missing_url_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(nbprof.TraceError, match="no such file or folder"):
        nbprof.load(f"file://{tmp_path}/nope/", job=True)


# -- Dask ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import dask
    import distributed

    # Two deaths per task (Dask's default is 3) are enough to see it give up on an item
    # that always kills its worker; a worker's death also counts against the tasks queued
    # on it, so one would fail innocent items.
    with dask.config.set({"distributed.scheduler.allowed-failures": 2}):
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=40,
        )
        try:
            yield cluster
        finally:
            cluster.close()


@pytest.fixture(scope="module")
def client(cluster: Any) -> Iterator[Any]:
    from distributed import Client

    with Client(cluster) as c:
        yield c


@pytest.mark.slow
def test_dask_answer_equals_in_process_on_dlrm(corpus: Path, client: Any, cluster: Any) -> None:
    folder = corpus / "param__dlrm_kineto_8ranks"
    if not folder.is_dir():
        pytest.skip("no DLRM rank folder")
    here = nbprof.load(folder, workers=1)
    on_client = nbprof.load(folder, scheduler=client)
    on_address = nbprof.load(folder, scheduler=cluster.scheduler_address)
    assert isinstance(on_client, Job) and isinstance(on_address, Job)
    assert on_client.to_json() == here.to_json()
    assert on_address.to_json() == here.to_json()
    # What came back is the summaries, not the traces: no kernel table in them.
    assert all(not hasattr(s, "trace") for s in on_client.summaries)


@pytest.mark.slow
def test_dask_worker_death_retried_and_reported(client: Any, tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    once = parallel.run(die_once, [(marker, 3)], scheduler=client)
    assert once[0].value == 9 and once[0].retries >= 1
    (always,) = parallel.run(die_on, [13], scheduler=client)
    assert always.value is None and "died each time it was tried" in str(always.error)
    assert always.retries == 2
    # The cluster goes on: the next items run on the restarted workers.
    assert [o.value for o in parallel.run(die_on, [2, 3], scheduler=client)] == [4, 9]
