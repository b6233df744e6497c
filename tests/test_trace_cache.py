"""The table cache: a cached load is the uncached load, and a bad cache is never trusted.

Every test runs with its own ``NBPROF_TABLE_CACHE`` (conftest's ``private_cache``), so
nothing here reads or writes the user's cache.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof import cli
from nbprof.analysis import analyze
from nbprof.trace import cache as table_cache
from nbprof.trace import read
from nbprof.trace import reader as reader_mod
from nbprof.trace.model import TABLES, Trace
from tests.conftest import corpus_params
from tests.golden import KinetoBuilder

#: A time well in the past, so that a freshly written test trace is not "racy".
OLD_NS = 1_600_000_000_000_000_000


def assert_same(a: Trace, b: Trace) -> None:
    """Every table equal, column order, dtypes, index and values (NaN == NaN), bit for bit."""
    for t in TABLES:
        fa, fb = getattr(a, t), getattr(b, t)
        assert list(fa.columns) == list(fb.columns), t
        assert fa.dtypes.to_dict() == fb.dtypes.to_dict(), t
        pd.testing.assert_frame_equal(fa, fb, check_exact=True, obj=t)
    assert (a.source, a.event_count, a.origin_ns) == (b.source, b.event_count, b.origin_ns)
    assert a.metadata == b.metadata
    assert a.notes == b.notes


def diagnosis_json(t: Trace) -> str:
    return json.dumps(analyze(t, None).to_json(), sort_keys=True)


def files_of(p: Path) -> list[Path]:
    return sorted(p.glob("*.json*")) if p.is_dir() else [p]


def entry_of(p: Path) -> Path:
    key = table_cache.Key.of(p)
    assert key is not None
    return key.entry()


@pytest.mark.parametrize("path", corpus_params())
def test_cached_load_is_the_uncached_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = read(path, progress=False, cache=False)
    assert not table_cache.cache_dir().exists()  # cache=False writes nothing
    first = read(path, progress=False, cache=True)  # parses, and writes the cache
    for f in files_of(path):
        assert entry_of(f).is_file(), f
    assert_same(plain, first)

    def refuse(p: object) -> bytes:
        raise AssertionError(f"{p} was read: the cache was not used")

    monkeypatch.setattr(reader_mod.io, "open_source", refuse)
    again = read(path, progress=False, cache=True)
    assert_same(plain, again)
    assert diagnosis_json(again) == diagnosis_json(plain)


# -- hand-built traces --------------------------------------------------------------------


def build(extra_kernels: int = 0, name: str = "gemm") -> KinetoBuilder:
    b = KinetoBuilder()
    b.step(1, 0.0, 400.0)
    b.cpu_op("aten::mm", 10.0, 50.0)
    b.kernel(name, 100.0, 40.0, grid=(264, 1, 1))
    b.kernel("relu", 150.0, 5.0)
    b.memcpy(200.0, 10.0, 4096)
    for i in range(extra_kernels):
        b.kernel(f"extra{i}", 250.0 + 20 * i, 3.0)
    return b


def write_old(b: KinetoBuilder, where: Path, name: str = "trace.json", ns: int = OLD_NS) -> Path:
    p = b.write(where, name)
    os.utime(p, ns=(ns, ns))
    return p


def test_a_file_written_just_now_is_not_cached(tmp_path: Path) -> None:
    p = build().write(tmp_path)  # its mtime is now: a same-size rewrite could hide in a tick
    read(p, progress=False, cache=True)
    assert not entry_of(p).exists()
    os.utime(p, ns=(OLD_NS, OLD_NS))
    read(p, progress=False, cache=True)
    assert entry_of(p).is_file()


def _cached_then(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Path:
    p = write_old(build(), tmp_path)
    read(p, progress=False, cache=True)
    assert entry_of(p).is_file()
    caplog.clear()
    return p


def test_a_bigger_file_is_read_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = _cached_then(tmp_path, caplog)
    before = p.stat().st_size
    write_old(build(extra_kernels=3), tmp_path, ns=OLD_NS + 10**9)
    assert p.stat().st_size != before
    with caplog.at_level(logging.INFO, "nbprof.trace.cache"):
        got = read(p, progress=False, cache=True)
    assert len(got.kernels) == 2 + 3  # the new file's kernels, not the cached two
    assert_same(got, read(p, progress=False, cache=False))
    assert "stale" in caplog.text and "size" in caplog.text
    # The entry was replaced by one for the new file: it is used from now on.
    assert entry_of(p).is_file()


def test_a_touched_file_is_read_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = _cached_then(tmp_path, caplog)
    os.utime(p, ns=(OLD_NS + 5 * 10**9, OLD_NS + 5 * 10**9))
    with caplog.at_level(logging.INFO, "nbprof.trace.cache"):
        read(p, progress=False, cache=True)
    assert "stale" in caplog.text and "mtime_ns" in caplog.text


def test_a_same_size_rewrite_with_the_old_mtime_is_read_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What size and mtime cannot see (``cp -p``, ``touch -d``), the ctime does."""
    p = _cached_then(tmp_path, caplog)
    size = p.stat().st_size
    write_old(build(name="gemx"), tmp_path)  # same length of name: same size, same mtime
    assert (p.stat().st_size, p.stat().st_mtime_ns) == (size, OLD_NS)
    with caplog.at_level(logging.INFO, "nbprof.trace.cache"):
        got = read(p, progress=False, cache=True)
    assert "gemx" in set(got.kernels["name"])
    assert "stale" in caplog.text and "ctime_ns" in caplog.text


def _largest_member_data(entry: Path) -> tuple[int, int]:
    """(offset, length) in the file of the biggest array's bytes inside the .npz."""
    with zipfile.ZipFile(entry) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
    with open(entry, "rb") as f:
        f.seek(info.header_offset + 26)
        n, m = np.frombuffer(f.read(4), "<u2")
    start = info.header_offset + 30 + int(n) + int(m)
    return start, info.compress_size


def _truncate_half(entry: Path) -> None:
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])


def _empty(entry: Path) -> None:
    entry.write_bytes(b"")


def _garbage(entry: Path) -> None:
    entry.write_bytes(np.random.default_rng(7).bytes(entry.stat().st_size))


def _flip_a_byte(entry: Path) -> None:
    start, length = _largest_member_data(entry)
    data = bytearray(entry.read_bytes())
    data[start + length - 3] ^= 0xFF  # inside the array's values, past the .npy header
    entry.write_bytes(bytes(data))


def _foreign(entry: Path) -> None:
    """Another trace's (valid) entry under this trace's name."""
    other = write_old(build(extra_kernels=1), entry.parent.parent, name="other.json")
    read(other, progress=False, cache=True)
    shutil.copyfile(entry_of(other), entry)


def _older_format(entry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole, matching entry, written by an nbprof whose cache format was 0."""
    trace = entry.parent.parent / "trace.json"
    key = table_cache.Key.of(trace)
    assert key is not None
    frames = {t: getattr(read(trace, progress=False), t) for t in TABLES}
    entry.unlink()
    with monkeypatch.context() as m:
        m.setattr(table_cache, "FORMAT", 0)
        old = dataclasses.replace(key, format=0)
        table_cache.store(old, frames, {})
    assert entry.is_file()


#: Each kind of damage, and what the log line must say about it.
DAMAGE = {
    "truncated": (_truncate_half, "damaged"),
    "empty": (_empty, "damaged"),
    "garbage": (_garbage, "damaged"),
    "flipped_byte": (_flip_a_byte, "Bad CRC-32"),
    "foreign": (_foreign, "belongs to another file"),
    "older_format": (None, f"cache format 0, this nbprof writes {table_cache.FORMAT}"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cache_is_ignored_and_rebuilt(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    private_cache: Path,
    damage: str,
) -> None:
    # The trace sits beside the cache folder's parent, so the damage helpers find both.
    base = private_cache
    p = write_old(build(), base)
    truth = read(p, progress=False, cache=False)
    read(p, progress=False, cache=True)
    entry = entry_of(p)
    assert entry.is_file()
    good = entry.read_bytes()
    spoil, why = DAMAGE[damage]
    if spoil is None:
        _older_format(entry, monkeypatch)
    else:
        spoil(entry)
    assert entry.read_bytes() != good
    with caplog.at_level(logging.INFO, "nbprof.trace.cache"):
        got = read(p, progress=False, cache=True)
    assert_same(got, truth)
    assert "ignoring" in caplog.text and "reading the trace again" in caplog.text
    assert why in caplog.text
    # Rebuilt: the next load comes from the cache alone, and is still the same.
    monkeypatch.setattr(reader_mod.io, "open_source", lambda path: pytest.fail("not cached"))
    assert_same(read(p, progress=False, cache=True), truth)


def test_a_file_read_alone_then_in_a_folder_takes_the_folder_rank(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    write_old(build(), folder, "a.json")
    b = write_old(build(extra_kernels=2), folder, "b.json")
    alone = read(b, progress=False, cache=True)  # cached as rank 0
    assert set(alone.kernels["rank"]) == {0}
    truth = read(folder, progress=False, cache=False)
    got = read(folder, progress=False, cache=True)  # b from the cache, second: rank 1
    assert_same(got, truth)
    assert set(got.kernels["rank"]) == {0, 1}


def test_nbprof_load_caches_unless_told_not_to(tmp_path: Path) -> None:
    p = write_old(build(), tmp_path)
    nbprof.load(p, cache=False)
    assert not entry_of(p).exists()
    nbprof.load(p)
    assert entry_of(p).is_file()


def test_cli_no_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_old(build(), tmp_path)
    assert cli.main(["analyze", "--json", "--no-cache", str(p)]) == 0
    uncached = capsys.readouterr().out
    assert not entry_of(p).exists()
    assert cli.main(["analyze", "--json", str(p)]) == 0
    assert entry_of(p).is_file()
    assert cli.main(["analyze", "--json", str(p)]) == 0  # from the cache
    assert capsys.readouterr().out == uncached * 2
    assert cli.main(["report", "--no-cache", "-o", str(tmp_path / "r.html"), str(p)]) == 0


def test_a_cache_that_cannot_be_written_does_not_fail_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv(table_cache.TABLE_CACHE_ENV, str(blocker / "tables"))
    p = write_old(build(), tmp_path)
    with caplog.at_level(logging.WARNING, "nbprof.trace.cache"):
        got = read(p, progress=False, cache=True)
    assert_same(got, read(p, progress=False, cache=False))
    # Said once, for the folder: not once for the read and again for the write.
    [said] = [r.getMessage() for r in caplog.records]
    assert "the table cache folder" in said and "cannot be used" in said


def test_an_entry_is_written_without_waiting_for_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_cache: Path
) -> None:
    """A cache entry is not fsync'ed (one cut short by a crash fails its checks and is made
    again, as the damage tests show); the outputs a user asked for still are."""
    from nbprof import _files

    synced: list[int] = []
    monkeypatch.setattr(_files.os, "fsync", synced.append)
    p = write_old(build(), private_cache)
    read(p, progress=False, cache=True)
    assert entry_of(p).is_file() and synced == []
    with _files.atomic_output(tmp_path / "report.html") as out:
        out.write(b"<p>")
    assert len(synced) == 1


def test_where_the_tables_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(table_cache.TABLE_CACHE_ENV, str(tmp_path / "own"))
    monkeypatch.setenv(table_cache.CACHE_ENV, str(tmp_path / "all"))
    assert table_cache.cache_dir() == tmp_path / "own"
    monkeypatch.delenv(table_cache.TABLE_CACHE_ENV)
    assert table_cache.cache_dir() == tmp_path / "all" / "tables"  # beside the downloads
    p = write_old(build(), tmp_path)
    nbprof.load(p)
    assert [e.parent for e in (tmp_path / "all").rglob("*.npz")] == [tmp_path / "all" / "tables"]
    if sys.platform == "linux":  # the user cache folder by the XDG rules
        monkeypatch.delenv(table_cache.CACHE_ENV)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert table_cache.cache_dir() == tmp_path / "xdg" / "nbprof" / "tables"


def test_text_of_any_kind_survives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-ASCII names (stored as UTF-8 with offsets) and empty ones come back as they were."""
    b = build(name="gemm_αβ_😀")
    b.kernel("", 300.0, 1.0)
    p = write_old(b, tmp_path)
    truth = read(p, progress=False, cache=False)
    read(p, progress=False, cache=True)
    monkeypatch.setattr(reader_mod.io, "open_source", lambda path: pytest.fail("not cached"))
    got = read(p, progress=False, cache=True)
    assert_same(got, truth)
    assert {"gemm_αβ_😀", ""} <= set(got.kernels["name"])


def test_a_job_reads_its_rank_files_through_the_cache(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = corpus / "param__dlrm_kineto_8ranks"
    ranks = files_of(folder)
    assert len(ranks) == 8
    plain = nbprof.load(folder, cache=False)
    assert not table_cache.cache_dir().exists()  # cache=False writes nothing for a job either
    first = nbprof.load(folder)
    for f in ranks:
        assert entry_of(f).is_file(), f

    def refuse(p: object) -> bytes:
        raise AssertionError(f"{p} was read: the cache was not used")

    monkeypatch.setattr(reader_mod.io, "open_source", refuse)
    again = nbprof.load(folder)
    want = json.dumps(plain.to_json(), sort_keys=True)
    assert json.dumps(first.to_json(), sort_keys=True) == want
    assert json.dumps(again.to_json(), sort_keys=True) == want


def test_compare_caches_unless_told_not_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_old(build(), tmp_path, "before.json")
    b = write_old(build(extra_kernels=3), tmp_path, "after.json")
    nbprof.compare(a, b, cache=False)  # the API's own switch
    assert cli.main(["compare", "--json", "--no-cache", str(a), str(b)]) == 0
    uncached = capsys.readouterr().out
    assert not table_cache.cache_dir().exists()
    assert cli.main(["compare", "--json", str(a), str(b)]) == 0
    assert entry_of(a).is_file() and entry_of(b).is_file()
    assert cli.main(["compare", "--json", str(a), str(b)]) == 0  # both from the cache
    assert capsys.readouterr().out == uncached * 2
