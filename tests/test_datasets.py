"""nbprof.datasets: the registry, the corpus lookup, the hash check, the cache and downloads.

Downloads are tested against an HTTP server on 127.0.0.1 only (never a public address).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import io
import json
import re
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbprof import datasets
from nbprof.datasets import Dataset, DatasetError


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No test may see the user's corpus or cache unless it sets them itself.
    monkeypatch.delenv(datasets.CORPUS_ENV, raising=False)
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(datasets, "_VERIFIED", set())


# -- registry ------------------------------------------------------------------------------


def test_registry_names_are_unique_and_cover_the_required_traces() -> None:
    names = datasets.names()
    assert len(names) == len(set(names))
    for required in (
        "resnet50-v100-workers0",
        "resnet50-v100-workers4",
        "dlrm-a100-queued-idle",
        "dlrm-v100-8ranks",
        "qwen-h100-inference",
        "bert-small-h100-host-bound",
        "resnet-v100-ns-resolution",
    ):
        assert required in names
    assert len({datasets.info(n).file_name for n in names}) == len(names)
    folders = [datasets.info(n).folder_name for n in names if datasets.info(n).members]
    assert len(folders) == len(set(folders)) and all(folders)


@pytest.mark.parametrize("old", ["dlrm-a100-launch-bound", "dlrm-a100-sync-bound"])
def test_the_old_names_of_the_dlrm_a100_trace_still_resolve_and_warn(old: str) -> None:
    with pytest.warns(DeprecationWarning, match="dlrm-a100-queued-idle"):
        ds = datasets.info(old)
    assert ds is datasets.info("dlrm-a100-queued-idle")
    assert old not in datasets.names()


@pytest.mark.parametrize("name", datasets.names())
def test_entry_is_complete_and_pinned(name: str) -> None:
    ds = datasets.info(name)
    assert re.fullmatch(r"[0-9a-f]{64}", ds.sha256)
    assert ds.size > 0
    assert ds.licence in {"MIT", "BSD-3-Clause"}
    assert ds.title and ds.description and ds.gpu
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", ds.repository)
    # Pinned: the URL carries the commit, which is hexadecimal (no branch or tag name).
    assert re.fullmatch(r"[0-9a-f]{7,40}", ds.commit)
    prefix = f"https://raw.githubusercontent.com/{ds.repository}/{ds.commit}/"
    assert ds.url == prefix + ds.upstream_path
    segments = ds.url.split("/")
    for branch in ("main", "master", "HEAD", "develop", "trunk"):
        assert branch not in segments
    # The local file is the upstream file under another name: the same kind of file.
    upstream = Path(ds.upstream_path).name
    kind = ".tar.gz" if ds.members else ".json.gz"
    assert upstream.endswith(kind) and ds.file_name.endswith(kind)
    for m in ds.members:
        assert re.fullmatch(r"[0-9a-f]{64}", m.sha256) and m.name.endswith(".json")
    assert bool(ds.members) == bool(ds.folder_name)
    if ds.bundled:
        # Shipped inside the package, with the licence text of its origin beside it.
        assert (DATA / (ds.folder_name or ds.file_name)).exists()
        assert (DATA / ds.licence_file).is_file()
        assert datasets.licence_path(name) == DATA / ds.licence_file
    else:
        assert datasets.licence_path(name) is None


DATA = Path(datasets.__file__).parent / "data"
BUNDLED = [n for n in datasets.names() if datasets.info(n).bundled]
#: What the bundle must cover: the demo's default (queued work waiting, the host blocked
#: behind it), the DataLoader pair, a Hopper Tensor-Core run, a host-bound small-kernel run
#: and a multi-rank job.
REQUIRED_BUNDLED = {
    "dlrm-a100-queued-idle",
    "resnet50-v100-workers0",
    "resnet50-v100-workers4",
    "qwen-h100-inference",
    "bert-small-h100-host-bound",
    "dlrm-v100-8ranks",
}
#: Words each licence's text must hold (its name and its redistribution clause).
LICENCE_WORDS = {
    "MIT": ("MIT License", "Permission is hereby granted, free of charge"),
    "BSD-3-Clause": ("BSD License", "Redistribution and use in source and binary forms"),
}


def _bundled_files(name: str) -> list[Path]:
    ds = datasets.info(name)
    if ds.members:
        return [DATA / ds.folder_name / f"{m.name}.gz" for m in ds.members]
    return [DATA / ds.file_name]


def test_the_bundle_covers_what_the_demo_and_the_notebooks_need() -> None:
    from nbprof import demo

    assert set(BUNDLED) == REQUIRED_BUNDLED
    assert demo.DEFAULT_DATASET in BUNDLED


def test_the_bundled_traces_stay_within_5_mb_together() -> None:
    total = sum(f.stat().st_size for n in BUNDLED for f in _bundled_files(n))
    assert 0 < total <= 5_000_000, f"{total:,} bytes bundled"
    # Nothing else heavy hides in the folder: every file there is a registered trace, a
    # licence text or the README.
    known = {f for n in BUNDLED for f in _bundled_files(n)}
    known |= {DATA / datasets.info(n).licence_file for n in BUNDLED} | {DATA / "README.md"}
    assert {p for p in DATA.rglob("*") if p.is_file() and "__pycache__" not in p.parts} == known


@pytest.mark.parametrize("name", BUNDLED)
def test_a_bundled_file_is_the_pinned_recording_unedited(name: str) -> None:
    ds = datasets.info(name)
    if ds.members:
        # Gzipped member by member: the JSON text is the upstream member's, hash for hash.
        for m, f in zip(ds.members, _bundled_files(name), strict=True):
            assert hashlib.sha256(gzip.decompress(f.read_bytes())).hexdigest() == m.sha256
    else:
        data = (DATA / ds.file_name).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (ds.sha256, ds.size)
    assert datasets.source(name) == "bundled"
    assert datasets.path(name, download=False) == DATA / (ds.folder_name or ds.file_name)


@pytest.mark.parametrize("name", BUNDLED)
def test_a_bundled_file_ships_its_licence_text(name: str) -> None:
    ds = datasets.info(name)
    text = (DATA / ds.licence_file).read_text(encoding="utf-8")
    for words in LICENCE_WORDS[ds.licence]:
        assert words in text, (ds.licence_file, words)
    assert "Copyright (c)" in text


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(DatasetError, match="resnet50-v100-workers0"):
        datasets.info("no-such-trace")


def test_table_has_a_row_per_dataset_saying_where_it_is() -> None:
    t = datasets.table()
    assert list(t["name"]) == datasets.names()
    # No corpus and an empty cache (see _isolated): only the bundled ones are here.
    here = dict(zip(t["name"], t["here"], strict=True))
    assert here == {n: "bundled" if n in BUNDLED else "download on first use" for n in here}
    assert list(t["bundled"]) == [datasets.info(n).bundled for n in datasets.names()]


# -- the corpus folder ---------------------------------------------------------------------


@pytest.mark.corpus
def test_every_dataset_is_found_and_verified_in_the_corpus(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    for name in datasets.names():
        ds = datasets.info(name)
        # The corpus copy of a bundled trace is looked up as if it were not bundled.
        monkeypatch.setitem(datasets._BY_NAME, name, dataclasses.replace(ds, bundled=False))
        p = datasets.path(name, download=False)
        if ds.members:
            # The corpus keeps the job's rank files gzipped, each under a source prefix.
            assert p == corpus / ds.folder_name
            for m in ds.members:
                f = next(p.glob(f"*{m.name}*"))
                assert hashlib.sha256(gzip.decompress(f.read_bytes())).hexdigest() == m.sha256
        else:
            assert p.parent == corpus
            assert hashlib.sha256(p.read_bytes()).hexdigest() == ds.sha256
        assert datasets.available(name) and datasets.source(name) == "corpus"
        if ds.bundled:
            # The bundled copy is the same recording as the corpus's, file for file.
            for a, b in zip(_bundled_files(name), datasets.files(name), strict=True):
                assert a.read_bytes() == b.read_bytes(), (a, b)
    assert set(datasets.table()["here"]) == {"corpus"}
    assert not datasets.cache_dir().exists()  # nothing was unpacked or downloaded


@pytest.mark.corpus
def test_the_deprecated_name_loads_the_same_trace(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    with pytest.warns(DeprecationWarning):
        old = datasets.path("dlrm-a100-launch-bound", download=False)
    assert old == datasets.path("dlrm-a100-queued-idle", download=False)


def test_the_bundled_8_rank_job_loads_as_8_ranks() -> None:
    # No corpus and no cache (see _isolated): the job is read from inside the package.
    job = datasets.load("dlrm-v100-8ranks", download=False, progress=False)
    # A Job: one row per rank, one V100 each.
    assert sorted(job.ranks["rank"]) == list(range(8))
    assert set(job.ranks["device_name"]) == {"Tesla V100-SXM2-32GB"}
    assert any("facebookresearch/param" in n for n in job.notes)
    # One rank's own trace, with its kernels: files() lists them in rank order.
    rank_files = datasets.files("dlrm-v100-8ranks", download=False)
    assert rank_files == _bundled_files("dlrm-v100-8ranks")
    import nbprof

    rank0 = nbprof.load(rank_files[0], progress=False)
    assert set(rank0.kernels["rank"]) == {0} and len(rank0.kernels) > 0
    assert not datasets.cache_dir().exists()


@pytest.mark.corpus
def test_corpus_lookup_accepts_the_upstream_file_name(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ds = datasets.info("alexnet-a100-sync")
    folder = tmp_path / "plain"
    folder.mkdir()
    upstream_name = Path(ds.upstream_path).name
    (folder / upstream_name).write_bytes((corpus / ds.file_name).read_bytes())
    monkeypatch.setenv(datasets.CORPUS_ENV, str(folder))
    assert datasets.path(ds.name, download=False) == folder / upstream_name


@pytest.mark.corpus
def test_corrupt_corpus_copy_is_rejected(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ds = datasets.info("alexnet-a100-sync")
    data = bytearray((corpus / ds.file_name).read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / ds.file_name).write_bytes(bytes(data))
    monkeypatch.setenv(datasets.CORPUS_ENV, str(folder))
    with pytest.raises(DatasetError, match="SHA-256 does not match"):
        datasets.path(ds.name, download=False)
    assert not datasets.available(ds.name)


@pytest.mark.corpus
def test_load_gives_a_profile_noting_its_origin(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    prof = datasets.load("alexnet-a100-sync", download=False)
    assert len(prof.kernels) > 0
    assert any("facebookresearch/HolisticTraceAnalysis" in n for n in prof.notes)


def test_offline_without_corpus_or_cache_says_what_to_set() -> None:
    with pytest.raises(DatasetError) as err:
        datasets.path("alexnet-a100-sync", download=False)
    msg = str(err.value)
    assert datasets.CORPUS_ENV in msg and "not available offline" in msg
    assert "\n" not in msg


# -- downloads, from a server on 127.0.0.1 -------------------------------------------------


class _Server:
    """A bounded static HTTP server on 127.0.0.1 that counts the requests it answers."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="nbprof-test-http"
        )
        self.thread.daemon = True

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _tiny_trace() -> bytes:
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
    ]  # fmt: skip
    return gzip.compress(json.dumps({"traceEvents": events}).encode(), mtime=0)


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server({})
    s.thread.start()
    try:
        yield s
    finally:
        s.httpd.shutdown()
        s.httpd.server_close()
        s.thread.join(timeout=5)


def _tiny_dataset(
    monkeypatch: pytest.MonkeyPatch, name: str, data: bytes, *, bundled: bool = False
) -> Dataset:
    """A registered dataset (a real entry renamed) whose pinned hash and size are ``data``'s."""
    ds = dataclasses.replace(
        datasets.info("alexnet-a100-sync"),
        name=name,
        file_name=f"{name}.json.gz",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        bundled=bundled,
    )
    monkeypatch.setitem(datasets._BY_NAME, ds.name, ds)
    return ds


def _register(monkeypatch: pytest.MonkeyPatch, data: bytes, url: str) -> Dataset:
    ds = _tiny_dataset(monkeypatch, "tiny-local", data)
    # Only the URL moves, to the local server; everything else is the real code path.
    monkeypatch.setattr(Dataset, "url", property(lambda self: url))
    return ds


def test_download_goes_to_the_cache_once_with_the_hash_checked(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = _tiny_trace()
    server.files["/tiny.json.gz"] = data
    ds = _register(monkeypatch, data, server.url("/tiny.json.gz"))

    got = datasets.path(ds.name, timeout=5)
    assert got == tmp_path / "cache" / ds.file_name
    assert got.read_bytes() == data
    assert server.requests == ["/tiny.json.gz"]

    # Second time: from the cache, no request.
    assert datasets.path(ds.name, timeout=5) == got
    assert datasets.available(ds.name)
    assert server.requests == ["/tiny.json.gz"]


def test_download_with_the_wrong_bytes_is_rejected_and_not_kept(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = _tiny_trace()
    server.files["/tiny.json.gz"] = data[:-1] + bytes([data[-1] ^ 0xFF])
    ds = _register(monkeypatch, data, server.url("/tiny.json.gz"))
    with pytest.raises(DatasetError, match="did not match its pinned SHA-256"):
        datasets.path(ds.name, timeout=5)
    assert not (tmp_path / "cache" / ds.file_name).exists()


def test_corrupt_cache_copy_is_replaced_by_a_fresh_download(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = _tiny_trace()
    server.files["/tiny.json.gz"] = data
    ds = _register(monkeypatch, data, server.url("/tiny.json.gz"))
    cached = tmp_path / "cache" / ds.file_name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not the trace")
    assert not datasets.available(ds.name)
    assert datasets.path(ds.name, timeout=5).read_bytes() == data
    assert len(server.requests) == 1


def test_no_corpus_and_no_network_gives_one_clear_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A local port nobody listens on: bind, read the port, close.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = _tiny_trace()
    ds = _register(monkeypatch, data, f"http://127.0.0.1:{port}/tiny.json.gz")
    with pytest.raises(DatasetError) as err:
        datasets.path(ds.name, timeout=5)
    msg = str(err.value)
    assert "\n" not in msg
    assert f"{datasets.CORPUS_ENV} is not set" in msg
    assert "download" in msg and "connect to the network" in msg
    assert ds.file_name in msg


def test_loading_a_downloaded_trace(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _tiny_trace()
    server.files["/tiny.json.gz"] = data
    ds = _register(monkeypatch, data, server.url("/tiny.json.gz"))
    prof = datasets.load(ds.name)
    assert len(prof.kernels) == 1


# -- recordings shipped inside the package -------------------------------------------------


def _bundle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: bytes) -> Dataset:
    ds = _tiny_dataset(monkeypatch, "tiny-bundled", data, bundled=True)
    monkeypatch.setattr(datasets, "_DATA_DIR", tmp_path / "data")
    (tmp_path / "data").mkdir()
    # Unreachable on purpose: a bundled file must never be fetched.
    monkeypatch.setattr(Dataset, "url", property(lambda self: "http://127.0.0.1:9/none"))
    return ds


def test_bundled_recording_is_found_in_the_package_without_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = _tiny_trace()
    ds = _bundle(monkeypatch, tmp_path, data)
    (tmp_path / "data" / ds.file_name).write_bytes(data)
    assert datasets.path(ds.name) == tmp_path / "data" / ds.file_name
    assert len(datasets.load(ds.name).kernels) == 1
    assert datasets.files(ds.name) == [tmp_path / "data" / ds.file_name]


def test_bundled_recording_that_is_missing_or_altered_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = _tiny_trace()
    ds = _bundle(monkeypatch, tmp_path, data)
    with pytest.raises(DatasetError, match="is missing"):
        datasets.path(ds.name)
    (tmp_path / "data" / ds.file_name).write_bytes(data + b"x")
    with pytest.raises(DatasetError, match="SHA-256 does not match"):
        datasets.path(ds.name)


def test_source_says_bundled_before_corpus_before_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = _tiny_trace()
    ds = _bundle(monkeypatch, tmp_path, data)
    for folder in (tmp_path / "cache", tmp_path / "corpus"):
        folder.mkdir()
        (folder / ds.file_name).write_bytes(data)
    monkeypatch.setenv(datasets.CORPUS_ENV, str(tmp_path / "corpus"))
    (tmp_path / "data" / ds.file_name).write_bytes(data)
    assert datasets.source(ds.name) == "bundled"
    monkeypatch.setitem(datasets._BY_NAME, ds.name, dataclasses.replace(ds, bundled=False))
    assert datasets.source(ds.name) == "corpus"
    monkeypatch.delenv(datasets.CORPUS_ENV)
    assert datasets.source(ds.name) == "cache"
    (tmp_path / "cache" / ds.file_name).unlink()
    assert datasets.source(ds.name) is None and not datasets.available(ds.name)


# -- multi-rank jobs: an archive of rank files upstream --------------------------------------


def _rank_trace(rank: int) -> bytes:
    """One rank's tiny trace: one 5 µs kernel, its rank in distributedInfo."""
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{rank}", "pid": 0, "tid": 7, "ts": 10.0,
         "dur": 5.0, "args": {"device": rank, "stream": 7, "correlation": 1}},
    ]  # fmt: skip
    return json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}).encode()


_RANKS = {f"worker{r}_step_1.pt.trace.json": _rank_trace(r) for r in range(2)}


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, body in files.items():
            entry = tarfile.TarInfo(name)
            entry.size = len(body)
            tar.addfile(entry, io.BytesIO(body))
    return buf.getvalue()


def _job(monkeypatch: pytest.MonkeyPatch, archive: bytes, url: str) -> Dataset:
    """A registered two-rank job whose archive is ``archive``, served at ``url``."""
    members = tuple(
        datasets.Member(n, hashlib.sha256(body).hexdigest()) for n, body in _RANKS.items()
    )
    ds = dataclasses.replace(
        datasets.info("dlrm-v100-8ranks"),
        name="tiny-job",
        file_name="tiny-job.tar.gz",
        folder_name="tiny-job-ranks",
        sha256=hashlib.sha256(archive).hexdigest(),
        size=len(archive),
        members=members,
        bundled=False,
    )
    monkeypatch.setitem(datasets._BY_NAME, ds.name, ds)
    monkeypatch.setattr(Dataset, "url", property(lambda self: url))
    return ds


def test_a_job_is_downloaded_once_and_unpacked_into_a_folder_of_ranks(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    archive = _tar({f"job/{n}": body for n, body in _RANKS.items()})
    server.files["/job.tar.gz"] = archive
    ds = _job(monkeypatch, archive, server.url("/job.tar.gz"))

    got = datasets.path(ds.name, timeout=5)
    assert got == tmp_path / "cache" / ds.folder_name
    assert {p.name: p.read_bytes() for p in got.iterdir()} == _RANKS
    assert datasets.path(ds.name, timeout=5) == got and len(server.requests) == 1
    assert datasets.source(ds.name) == "cache"
    job = datasets.load(ds.name)
    assert sorted(job.ranks["rank"]) == [0, 1]
    assert [f.name for f in datasets.files(ds.name)] == list(_RANKS)

    # An unpacked rank file damaged later is rebuilt from the kept archive, offline.
    (got / next(iter(_RANKS))).write_bytes(b"{}")
    assert datasets.path(ds.name, download=False) == got
    assert {p.name: p.read_bytes() for p in got.iterdir()} == _RANKS
    assert len(server.requests) == 1


def test_an_archive_member_with_other_bytes_is_refused_and_nothing_is_unpacked(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    name = next(iter(_RANKS))
    # The archive's own hash is pinned to these bytes, so only the member check catches it.
    archive = _tar({**_RANKS, name: _RANKS[name].replace(b"5.0", b"6.0")})
    server.files["/job.tar.gz"] = archive
    ds = _job(monkeypatch, archive, server.url("/job.tar.gz"))
    with pytest.raises(DatasetError, match=f"{name} inside it does not match"):
        datasets.path(ds.name, timeout=5)
    assert not (tmp_path / "cache" / ds.folder_name).exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [ds.file_name]


def test_paths_inside_an_archive_never_choose_where_files_are_written(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    archive = _tar({f"../../{n}": body for n, body in _RANKS.items()} | {"../../evil.json": b"x"})
    server.files["/job.tar.gz"] = archive
    ds = _job(monkeypatch, archive, server.url("/job.tar.gz"))
    got = datasets.path(ds.name, timeout=5)
    assert sorted(p.name for p in got.iterdir()) == sorted(_RANKS)
    assert not list(tmp_path.rglob("evil.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_job_in_the_corpus_is_a_folder_of_gzipped_prefixed_rank_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ds = _job(monkeypatch, b"never fetched", "http://127.0.0.1:9/none")
    folder = tmp_path / "corpus" / ds.folder_name
    folder.mkdir(parents=True)
    monkeypatch.setenv(datasets.CORPUS_ENV, str(tmp_path / "corpus"))
    names = list(_RANKS)
    (folder / f"src__{names[0]}.gz").write_bytes(gzip.compress(_RANKS[names[0]]))
    with pytest.raises(DatasetError, match=f"lacks {re.escape(names[1])}"):
        datasets.path(ds.name, download=False)
    (folder / names[1]).write_bytes(_RANKS[names[1]] + b" ")
    with pytest.raises(DatasetError, match="SHA-256 does not match"):
        datasets.path(ds.name, download=False)
    (folder / names[1]).write_bytes(_RANKS[names[1]])
    assert datasets.path(ds.name, download=False) == folder
    assert datasets.source(ds.name) == "corpus"
    assert not (tmp_path / "cache").exists()


def test_a_bundled_job_is_a_folder_in_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ds = _job(monkeypatch, b"never fetched", "http://127.0.0.1:9/none")
    monkeypatch.setitem(datasets._BY_NAME, ds.name, dataclasses.replace(ds, bundled=True))
    monkeypatch.setattr(datasets, "_DATA_DIR", tmp_path / "data")
    with pytest.raises(DatasetError, match="should ship with nbprof"):
        datasets.path(ds.name)
    (tmp_path / "data" / ds.folder_name).mkdir(parents=True)
    for n, body in _RANKS.items():
        (tmp_path / "data" / ds.folder_name / n).write_bytes(body)
    assert datasets.path(ds.name) == tmp_path / "data" / ds.folder_name
    assert datasets.source(ds.name) == "bundled"


# -- python -m nbprof.datasets: what Binder's postBuild runs ---------------------------------


def test_download_command_fetches_into_the_cache_and_says_where(
    server: _Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _tiny_trace()
    server.files["/tiny.json.gz"] = data
    ds = _register(monkeypatch, data, server.url("/tiny.json.gz"))
    assert datasets.main(["download", ds.name]) == 0
    assert capsys.readouterr().out == f"{ds.name}: {datasets.cache_dir() / ds.file_name}\n"
    assert datasets.main(["list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(ds.name))
    assert " cache " in line


def test_download_command_without_network_fails_with_one_line_per_dataset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ds = _register(monkeypatch, _tiny_trace(), f"http://127.0.0.1:{port}/tiny.json.gz")
    assert datasets.main(["download", ds.name]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{ds.name}: not fetched: cannot get dataset")
    assert datasets.main(["fetch"]) == 2
