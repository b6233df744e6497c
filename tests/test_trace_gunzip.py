"""Gunzip through ISA-L (the optional ``isal``) and through zlib gives the same bytes and the
same refusals, so a user without the extra loses speed, never correctness."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from types import ModuleType

import pytest

from nbprof.errors import TraceError
from nbprof.trace import io
from tests.conftest import corpus_dir

isal_zlib = pytest.importorskip("isal.isal_zlib")

BACKENDS = {"zlib": (zlib, (zlib.error,)), "isal": (isal_zlib, (zlib.error, isal_zlib.error))}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module, errors = BACKENDS[request.param]
    monkeypatch.setattr(io, "_inflate", module)
    monkeypatch.setattr(io, "_INFLATE_ERRORS", errors)
    return module


def test_isal_is_used_when_installed() -> None:
    assert io._inflate is isal_zlib


def gz_corpus() -> list[object]:
    d = corpus_dir()
    if d is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="trace corpus not found"))]
    return [
        pytest.param(p, id=p.name.split(".")[0], marks=pytest.mark.corpus)
        for p in sorted(d.rglob("*.gz"))
    ]


@pytest.mark.parametrize("path", gz_corpus())
def test_corpus_gunzips_to_the_same_bytes(path: Path, backend: ModuleType) -> None:
    raw = path.read_bytes()
    assert bytes(io._gunzip(raw, str(path))) == gzip.decompress(raw)


def test_concatenated_members(backend: ModuleType) -> None:
    a, b = b'{"traceEvents": [' + b" " * 300_000, b'{"ph": "X"}]}'
    raw = gzip.compress(a) + gzip.compress(b) + b"\0" * 8  # trailing padding ends it
    assert bytes(io._gunzip(raw, "x")) == a + b


@pytest.mark.parametrize(
    ("damage", "reason"),
    [("cut", "gzip data is truncated"), ("flip", "gzip data is corrupt")],
)
def test_damage_is_refused_alike(backend: ModuleType, damage: str, reason: str) -> None:
    body = b'{"traceEvents": [' + b'{"ph": "X", "ts": 1, "dur": 2},' * 20_000 + b"{}]}"
    raw = bytearray(gzip.compress(body))
    if damage == "cut":
        raw = raw[: len(raw) // 2]
    else:
        raw[len(raw) // 2] ^= 0xFF
    with pytest.raises(TraceError, match=reason):
        io._gunzip(bytes(raw), "x")
