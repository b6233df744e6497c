"""The table cache under hostile and unlucky conditions: it owns only what it wrote, reads
an entry with the guards a trace is read with, and trusts no entry it cannot check.

Forged entries are made from the entry nbprof itself wrote for the trace, with one thing
changed, so each test shows the one check that catches it. Each forged or damaged entry
costs one warning and a read of the trace, never a wrong table or an internal error.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbprof import cli
from nbprof.trace import cache as table_cache
from nbprof.trace import read
from nbprof.trace import reader as reader_mod
from tests.test_trace_cache import assert_same, build, entry_of, write_old

REPO = Path(__file__).resolve().parent.parent
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's files")


def cached(tmp_path: Path) -> tuple[Path, Path]:
    """A trace whose tables are cached: (trace, its entry)."""
    p = write_old(build(), tmp_path)
    read(p, progress=False, cache=True)
    entry = entry_of(p)
    assert entry.is_file()
    return p, entry


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def reads_trace(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each trace file the reader parses (a cache hit parses none)."""
    seen: list[str] = []
    real = reader_mod._read_file

    def spy(f: Path, *args: Any) -> Any:
        seen.append(str(f))
        return real(f, *args)

    monkeypatch.setattr(reader_mod, "_read_file", spy)
    return seen


# -- forging an entry from the real one ----------------------------------------------------


def members(entry: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(entry) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=False)
    return buf.getvalue()


def header_of(parts: list[tuple[str, bytes]]) -> tuple[int, dict[str, Any]]:
    for i, (_, data) in enumerate(parts):
        try:
            doc = json.loads(np.load(io.BytesIO(data)).tobytes())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and "tables" in doc:
            return i, doc
    raise AssertionError("no header member")


def rewrite(
    entry: Path, parts: list[tuple[str, bytes]], compress: int = zipfile.ZIP_STORED
) -> None:
    with zipfile.ZipFile(entry, "w", compress) as z:
        for name, data in parts:
            z.writestr(name, data)


def forge(entry: Path, change: Callable[[dict[str, Any], list[tuple[str, bytes]]], None]) -> None:
    """Rewrite ``entry`` with its header changed by ``change(header, members)`` (which may
    change the members too), every check that does not look at what changed still met."""
    parts = members(entry)
    at, header = header_of(parts)
    change(header, parts)
    data = np.frombuffer(json.dumps(header, separators=(",", ":")).encode(), np.uint8)
    parts[at] = (parts[at][0], npy(data))
    rewrite(entry, parts)


def column(header: dict[str, Any], table: str, name: str) -> list[Any]:
    return next(c for c in header["tables"][table] if c[0] == name)


def member_of(parts: list[tuple[str, bytes]], array: str) -> int:
    return next(i for i, (n, _) in enumerate(parts) if n == f"{array}.npy")


def drop_grid(header: dict[str, Any], parts: list[tuple[str, bytes]]) -> None:
    header["tables"]["kernels"] = [c for c in header["tables"]["kernels"] if c[0] != "grid"]


def numeric_name(header: dict[str, Any], parts: list[tuple[str, bytes]]) -> None:
    """kernels.name pointed at the (int64, same length) grid column's array."""
    name, grid = column(header, "kernels", "name"), column(header, "kernels", "grid")
    name[1:] = [grid[1], list(grid[2])]


def ts_as_integers(header: dict[str, Any], parts: list[tuple[str, bytes]]) -> None:
    ts = column(header, "kernels", "ts")
    i = member_of(parts, ts[2][0])
    values = np.load(io.BytesIO(parts[i][1]))
    parts[i] = (parts[i][0], npy(values.astype(np.int64)))
    ts[1] = "<i8"


def short_column(header: dict[str, Any], parts: list[tuple[str, bytes]]) -> None:
    dur = column(header, "kernels", "dur")
    i = member_of(parts, dur[2][0])
    parts[i] = (parts[i][0], npy(np.load(io.BytesIO(parts[i][1]))[:-1]))


def undeclared_column(header: dict[str, Any], parts: list[tuple[str, bytes]]) -> None:
    """A column no table declares, stored like the grid column it copies."""
    grid = column(header, "kernels", "grid")
    header["tables"]["kernels"].append(["grid_copy", grid[1], list(grid[2])])


FORGED = {
    "a declared column missing": drop_grid,
    "a column nbprof does not declare": undeclared_column,
    "text stored as numbers": numeric_name,
    "a column of another dtype": ts_as_integers,
    "a column shorter than the others": short_column,
}


@pytest.mark.parametrize("how", FORGED)
def test_a_forged_entry_is_rebuilt_with_one_warning(
    tmp_path: Path,
    how: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p, entry = cached(tmp_path)
    truth = read(p, progress=False, cache=False)
    forge(entry, FORGED[how])
    seen = reads_trace(monkeypatch)
    with caplog.at_level(logging.INFO, "nbprof"):
        got = read(p, progress=False, cache=True)
    assert_same(got, truth)
    assert seen == [str(p)]  # read again, not taken from the forged entry
    assert len(warnings_of(caplog)) == 1, warnings_of(caplog)
    # Rebuilt: the next load is a cache hit.
    assert_same(read(p, progress=False, cache=True), truth) and seen == [str(p)]
    forge(entry, FORGED[how])
    code = cli.main(["analyze", "--json", str(p)])
    out, err = capsys.readouterr()
    assert code == 0 and "internal error" not in err and json.loads(out)["devices"]


# -- reading an entry as a trace is read --------------------------------------------------


@linux_only
@pytest.mark.timeout(30)
def test_a_fifo_at_an_entry_is_not_read_and_is_replaced(tmp_path: Path) -> None:
    p, entry = cached(tmp_path)
    truth = read(p, progress=False, cache=False)
    entry.unlink()
    os.mkfifo(entry)
    assert_same(read(p, progress=False, cache=True), truth)  # no wait for a writer
    assert entry.is_file() and not entry.is_fifo()


def test_a_folder_at_an_entry_is_left_alone_and_costs_only_that_trace_its_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It may hold someone's files: it is not removed, and not read (one warning says so);
    the cache folder stays in use for every other trace, where giving the whole folder up
    left the rest uncached."""
    p, entry = cached(tmp_path)
    truth = read(p, progress=False, cache=False)
    entry.unlink()
    entry.mkdir()
    (entry / "theirs.txt").write_text("kept")
    (tmp_path / "other").mkdir()
    other = write_old(build(), tmp_path / "other")
    with caplog.at_level(logging.INFO, "nbprof"):
        assert_same(read(p, progress=False, cache=True), truth)
        read(other, progress=False, cache=True)
    assert (entry / "theirs.txt").read_text() == "kept"
    [warned] = warnings_of(caplog)  # the entry, once; not the whole folder
    assert entry.name in warned and "cannot be used" not in warned
    assert entry_of(other).is_file()


@linux_only
@pytest.mark.parametrize("target", ["a valid entry", "a folder", "nothing"])
def test_a_symlink_entry_is_ignored_and_replaced(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, entry = cached(tmp_path)
    truth = read(p, progress=False, cache=False)
    elsewhere = tmp_path / "elsewhere"
    if target == "a valid entry":  # even one that would pass every check
        elsewhere.write_bytes(entry.read_bytes())
    elif target == "a folder":
        elsewhere.mkdir()
    before = elsewhere.read_bytes() if elsewhere.is_file() else None
    entry.unlink()
    entry.symlink_to(elsewhere)
    seen = reads_trace(monkeypatch)
    assert_same(read(p, progress=False, cache=True), truth)
    assert seen == [str(p)]
    assert entry.is_file() and not entry.is_symlink()
    if before is not None:
        assert elsewhere.read_bytes() == before
    assert elsewhere.exists() == (target != "nothing")


def test_an_entry_larger_than_the_memory_free_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from nbprof import _memory

    p, entry = cached(tmp_path)
    truth = read(p, progress=False, cache=False)
    monkeypatch.setattr(_memory, "free_bytes", lambda: entry.stat().st_size)
    seen = reads_trace(monkeypatch)
    with caplog.at_level(logging.INFO, "nbprof"):
        assert_same(read(p, progress=False, cache=True), truth)
    assert seen == [str(p)]
    assert any("more than an entry may be" in w for w in warnings_of(caplog))


def claims_more(header: dict[str, Any], parts: list[tuple[str, bytes]]) -> None:
    """An array whose .npy header claims 2**28 values (2 GiB) over the bytes it holds."""
    ts = column(header, "kernels", "ts")
    i = member_of(parts, ts[2][0])
    data = np.load(io.BytesIO(parts[i][1]))
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": data.dtype.str, "fortran_order": False, "shape": (2**28,)}
    )
    parts[i] = (parts[i][0], head.getvalue() + data.tobytes() + bytes(1 << 20))


def compressed_zeros(entry: Path) -> None:
    """The same members deflated, one of them 1 GiB of zeros that deflates to ~1 MB."""
    parts = members(entry)
    _, header = header_of(parts)
    ts = column(header, "kernels", "ts")
    big = f"{ts[2][0]}.npy"
    with zipfile.ZipFile(entry, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts:
            if name != big:
                z.writestr(name, data)
                continue
            with z.open(name, "w", force_zip64=True) as m:
                np.lib.format.write_array_header_1_0(
                    m, {"descr": "<f8", "fortran_order": False, "shape": (2**27,)}
                )
                zeros = bytes(1 << 20)
                for _ in range(2**30 // len(zeros)):
                    m.write(zeros)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["a length it does not hold", "a compressed member"])
def test_an_entry_costs_no_more_memory_than_its_size(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, entry = cached(tmp_path)
    truth = read(p, progress=False, cache=False)
    if how == "a length it does not hold":
        forge(entry, claims_more)
    else:
        compressed_zeros(entry)
    assert entry.stat().st_size < 3 << 20
    seen = reads_trace(monkeypatch)
    tracemalloc.start()
    try:
        with caplog.at_level(logging.INFO, "nbprof"):
            got = read(p, progress=False, cache=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_same(got, truth)
    assert seen == [str(p)]
    assert peak < 200 << 20, f"reading a {entry.stat().st_size} byte entry took {peak} bytes"
    [warning] = warnings_of(caplog)
    assert "claims" in warning or "compressed" in warning


# -- the cache owns only what it wrote ----------------------------------------------------


def test_eviction_touches_only_nbprofs_own_entries(
    tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = table_cache.cache_dir()
    assert folder is not None
    folder.mkdir(parents=True)
    mine = {
        "dataset.npz": b"PK\x03\x04 a user's own arrays",
        "notes.txt": b"notes",
        # An entry's name, but not an entry nbprof wrote.
        "nbprof-tables-0123456789abcdef0123456789abcdef.npz": b"PK\x03\x04 someone's",
        ".dataset.npz.tmp": b"a user's temporary file",
    }
    for name, data in mine.items():
        (folder / name).write_bytes(data)
        os.utime(folder / name, ns=(1, 1))  # older than everything: first to go
    monkeypatch.setattr(table_cache, "MAX_BYTES", 1)  # every store evicts all it may
    for i in range(3):
        p = write_old(build(extra_kernels=i), tmp_path, name=f"t{i}.json")
        read(p, progress=False, cache=True)
    for name, data in mine.items():
        assert (folder / name).read_bytes() == data, name
    # nbprof's own entries did go: only the newest is left.
    entries = [e for e in folder.iterdir() if e.name.startswith("nbprof-tables-")]
    assert len(entries) == 2 and entry_of(tmp_path / "t2.json") in entries


@linux_only
@pytest.mark.timeout(120)
def test_a_cache_write_cut_short_by_sigterm_leaves_nothing_behind(tmp_path: Path) -> None:
    p = write_old(build(), tmp_path)
    folder = table_cache.cache_dir()
    assert folder is not None
    code = f"""
import time
import numpy.lib.format as fmt
real = fmt.write_array
def slow(*a, **k):
    real(*a, **k)
    time.sleep(300)  # the writer is killed here, its entry half written
fmt.write_array = slow
from nbprof.trace import read
read({str(p)!r}, progress=False, cache=True)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (folder.is_dir() and any(folder.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = list(folder.iterdir())
        assert left, "the write never started"
        child.send_signal(signal.SIGTERM)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert list(folder.iterdir()) == left  # what a killed writer leaves
    read(p, progress=False, cache=True)  # the next run
    assert [e.name for e in folder.iterdir()] == [entry_of(p).name]


@linux_only
@pytest.mark.timeout(120)
def test_a_report_write_cut_short_by_sigterm_is_cleaned_up_next_time(tmp_path: Path) -> None:
    p = write_old(build(), tmp_path)
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    code = f"""
import os, sys, time
def slow(fd):
    time.sleep(300)  # killed while the page is being made durable
os.fsync = slow
from nbprof import cli
sys.exit(cli.main(["report", {str(p)!r}, "-o", {str(out)!r}]))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(
            f.name.endswith(".tmp") for f in out.parent.iterdir()
        ):
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert [f.name for f in out.parent.iterdir() if f.name.endswith(".tmp")], "no write began"
    assert not out.exists()
    assert cli.main(["report", str(p), "-o", str(out)]) == 0
    assert [f.name for f in out.parent.iterdir()] == ["report.html"]


# -- where the cache is -------------------------------------------------------------------


@pytest.fixture
def no_table_cache_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """NBPROF_TABLE_CACHE unset (conftest sets it), run from an empty folder."""
    monkeypatch.delenv(table_cache.TABLE_CACHE_ENV)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_a_tilde_in_the_cache_folder_is_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_table_cache_env: Path
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(table_cache.CACHE_ENV, "~/nbprof-cache")
    p = write_old(build(), tmp_path)
    read(p, progress=False, cache=True)
    assert entry_of(p).parent == home / "nbprof-cache" / "tables"
    assert entry_of(p).is_file()
    assert not any(no_table_cache_env.iterdir())  # no folder named "~"


@pytest.mark.parametrize("value", ["", " ", "relative/cache", "~user-that-is-not-there/x"])
@pytest.mark.parametrize("var", ["NBPROF_CACHE_DIR", "NBPROF_TABLE_CACHE"])
def test_a_blank_or_relative_cache_folder_is_refused_in_one_line(
    tmp_path: Path, value: str, var: str, no_table_cache_env: Path
) -> None:
    job = tmp_path / "job"
    from tests.jobs import write_job

    write_job(job)
    for f in job.iterdir():
        os.utime(f, ns=(table_cache.time.time_ns() - 10**10,) * 2)
    env = {**os.environ, "PYTHONPATH": str(REPO), var: value}
    env.pop("NBPROF_TABLE_CACHE" if var == "NBPROF_CACHE_DIR" else "NBPROF_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", "--json", "--workers", "2", str(job)],
        capture_output=True,
        text=True,
        env=env,
        cwd=no_table_cache_env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["job"]["ranks"]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and var in lines[0] and "table cache is off" in lines[0], lines
    assert not any(no_table_cache_env.iterdir())  # nothing made in the working folder


def unnamespaced_entry(path: Path, of: str, fmt: int) -> None:
    """An entry as nbprof wrote them before they were namespaced (formats 1 and 2): named
    by the hash alone, its facts in a ``header`` member, written by ``np.savez``."""
    key = {"path": of, "size": 1, "mtime_ns": 1, "ctime_ns": 1, "inode": 1,
           "version": "0.1.0", "format": fmt}  # fmt: skip
    header = {"format": fmt, "key": key, "tables": {}, "info": {}}
    np.savez(path, ts=np.zeros(1000), header=np.frombuffer(json.dumps(header).encode(), np.uint8))


def test_entries_of_the_format_before_are_removed_and_nothing_else(tmp_path: Path) -> None:
    """They are nbprof's, and never read again: left, they would hold the space forever,
    unseen by the size limit. A file with such a name that is not one is left alone."""
    folder = table_cache.cache_dir()
    assert folder is not None
    folder.mkdir(parents=True)
    old_entry = folder / ("0123456789abcdef" * 2 + ".npz")
    unnamespaced_entry(old_entry, str(tmp_path / "gone.json"), 1)
    old_entry_2 = folder / ("1123456789abcdef" * 2 + ".npz")
    unnamespaced_entry(old_entry_2, str(tmp_path / "gone2.json"), 2)
    old_temp = folder / f".{'fedcba9876543210' * 2}.npz.0badc0de.tmp"
    old_temp.write_bytes(b"PK\x03\x04 half an entry")
    os.utime(old_temp, (1, 1))  # written long ago: its writer is gone
    recent_temp = folder / f".{'ab' * 16}.npz.12345678.tmp"
    recent_temp.write_bytes(b"its writer may still run")
    theirs = {
        "a user's arrays": ("ab" * 16 + ".npz", b"PK\x03\x04 not an entry"),
        "a user's zip": ("cd" * 16 + ".npz", None),
    }
    np.savez(folder / theirs["a user's zip"][0], header=np.zeros(3, np.uint8))
    (folder / theirs["a user's arrays"][0]).write_bytes(theirs["a user's arrays"][1] or b"")
    kept = {n: (folder / n).read_bytes() for n, _ in theirs.values()}
    p = write_old(build(), tmp_path)
    read(p, progress=False, cache=True)  # a write, then the folder's clean-up
    assert not old_entry.exists() and not old_entry_2.exists() and not old_temp.exists()
    assert recent_temp.exists()
    for name, data in kept.items():
        assert (folder / name).read_bytes() == data, name
    assert entry_of(p).is_file()


def blocked_cache(tmp_path: Path) -> dict[str, str]:
    """An environment whose table cache folder cannot be made: a file is in its way."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    return {**os.environ, "PYTHONPATH": str(REPO), "NBPROF_TABLE_CACHE": str(blocker / "t")}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_cache_folder_that_cannot_be_made_is_one_line_for_a_whole_job(
    tmp_path: Path, workers: str
) -> None:
    """Not one line per rank and per read and write (a 512-rank job said it 1024 times)."""
    from tests.jobs import write_job

    job = tmp_path / "job"
    write_job(job)
    for f in job.iterdir():
        os.utime(f, ns=(table_cache.time.time_ns() - 10**10,) * 2)
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", "--json", "--workers", workers, str(job)],
        capture_output=True, text=True, env=blocked_cache(tmp_path), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["job"]["ranks"]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "table cache folder" in lines[0], lines
    assert "traces are read without it" in lines[0]


def test_a_trace_read_without_a_usable_cache_folder_says_so_once(tmp_path: Path) -> None:
    p = write_old(build(), tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", str(p)],
        capture_output=True, text=True, env=blocked_cache(tmp_path), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "cannot be used" in lines[0], lines


def test_a_read_only_cache_folder_is_read_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its entries are used; no write is tried, and that is said once for the job. (The
    folder is made read-only in the one way a test run as root sees it: os.access.)"""
    import nbprof
    from tests.jobs import write_job

    job = tmp_path / "job"
    write_job(job)
    for f in sorted(job.iterdir())[:2]:
        os.utime(f, ns=(table_cache.time.time_ns() - 10**10,) * 2)
    nbprof.load(job, workers=1)  # two of the four ranks cached
    folder = table_cache.cache_dir()
    assert folder is not None
    before = sorted(folder.iterdir())
    assert len(before) == 2
    for f in sorted(job.iterdir())[2:]:  # the other two could be cached now
        os.utime(f, ns=(table_cache.time.time_ns() - 10**10,) * 2)
    real = os.access
    monkeypatch.setattr(
        table_cache.os,
        "access",
        lambda p, mode, **k: False if Path(p) == folder else real(p, mode, **k),
    )
    seen = reads_trace(monkeypatch)
    with caplog.at_level(logging.INFO, "nbprof"):
        nbprof.load(job, workers=1)
    assert len(seen) == 2  # the two cached ranks came from the cache
    assert sorted(folder.iterdir()) == before  # nothing written
    [said] = warnings_of(caplog)
    assert "read-only" in said


def test_the_download_folder_reads_the_same_variable_the_same_way(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    no_table_cache_env: Path,
) -> None:
    """NBPROF_CACHE_DIR also names where downloaded traces go: "~" is the home folder
    there too, and a relative value makes no folder where the command runs."""
    from nbprof import datasets

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(table_cache.CACHE_ENV, "~/nbprof-cache")
    assert datasets.cache_dir() == tmp_path / "home" / "nbprof-cache"
    monkeypatch.setenv(table_cache.CACHE_ENV, "relative/downloads")
    with caplog.at_level(logging.WARNING, "nbprof"):
        folder = datasets.cache_dir()
    assert folder.is_absolute() and "relative" not in str(folder)
    assert len(warnings_of(caplog)) == 1 and "NBPROF_CACHE_DIR" in caplog.text
