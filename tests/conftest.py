"""Shared fixtures: the real-trace corpus, and a guard that nothing is left running."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def corpus_dir() -> Path | None:
    """The folder of real traces: $NBPROF_TRACE_CORPUS, else ../shared/traces beside the repo."""
    env = os.environ.get("NBPROF_TRACE_CORPUS")
    candidates = [Path(env)] if env else [REPO.parent / "shared" / "traces"]
    for c in candidates:
        if c.is_dir() and any(c.glob("*.json*")):
            return c
    return None


def corpus_params() -> list[Any]:
    """Every trace file and rank folder of the corpus, as test parameters marked ``corpus``
    (one skipped parameter when there is no corpus)."""
    d = corpus_dir()
    if d is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="trace corpus not found"))]
    items = sorted(d.glob("*.json*")) + sorted(p for p in d.iterdir() if p.is_dir())
    return [pytest.param(p, id=p.name.split(".")[0], marks=pytest.mark.corpus) for p in items]


@pytest.fixture(scope="session")
def corpus() -> Path:
    d = corpus_dir()
    if d is None:
        pytest.skip("trace corpus not found (set NBPROF_TRACE_CORPUS or place ../shared/traces)")
    return d


def _nbprof_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("nbprof") and t.is_alive()]


def _profiler_enabled() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)  # type: ignore[attr-defined]
    except AttributeError:
        return bool(torch._C._autograd._profiler_enabled())


@pytest.fixture(scope="session", autouse=True)
def session_table_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Before any module- or session-wide fixture copies the environment (for kernels or
    subprocesses that outlive one test), point the table cache away from the user's."""
    d = tmp_path_factory.mktemp("nbprof-tables")
    with pytest.MonkeyPatch.context() as m:
        m.setenv("NBPROF_TABLE_CACHE", str(d))
        yield d


@pytest.fixture(autouse=True)
def private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A table cache of the test's own (in ``d/tables``): loads never touch the user's
    cache, and no test sees tables another test cached (subprocesses inherit it)."""
    d = tmp_path_factory.mktemp("nbprof-cache")
    # The tables' own variable, so tests that point NBPROF_CACHE_DIR at a download folder
    # still find in it only what was downloaded.
    monkeypatch.setenv("NBPROF_TABLE_CACHE", str(d / "tables"))
    return d


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    """Every test must leave no torch profiler active and no nbprof thread alive."""
    yield
    deadline = time.monotonic() + 2.0
    while _nbprof_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    left = _nbprof_threads()
    assert not left, f"nbprof threads left running: {[t.name for t in left]}"
    assert not _profiler_enabled(), "a torch profiler was left running"
