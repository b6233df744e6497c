"""nbprof.datasets: the registry, the corpus lookup, the hash check, the cache and downloads.

Downloads are tested against an HTTP server on 127.0.0.1 only (never a public address).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import json
import re
import socket
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
        "dlrm-a100-launch-bound",
        "qwen-h100-inference",
        "resnet-v100-ns-resolution",
    ):
        assert required in names
    assert len({datasets.info(n).file_name for n in names}) == len(names)


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
    assert ds.file_name.endswith(Path(ds.upstream_path).name)


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(DatasetError, match="resnet50-v100-workers0"):
        datasets.info("no-such-trace")


def test_table_has_a_row_per_dataset() -> None:
    t = datasets.table()
    assert list(t["name"]) == datasets.names()


def _needs_reader() -> None:
    try:
        from nbprof.trace import read  # noqa: F401
    except ImportError:
        pytest.skip("the trace reader (nbprof.trace.read) is not available")


# -- the corpus folder ---------------------------------------------------------------------


@pytest.mark.corpus
def test_every_dataset_is_found_and_verified_in_the_corpus(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    for name in datasets.names():
        p = datasets.path(name, download=False)
        assert p.parent == corpus
        assert hashlib.sha256(p.read_bytes()).hexdigest() == datasets.info(name).sha256
        assert datasets.available(name)


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
    _needs_reader()
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
    _needs_reader()
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
