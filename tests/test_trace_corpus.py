"""Every real trace in the corpus loads, and its tables agree with an independent count.

The expected numbers are computed here from the raw JSON with the standard library and the
category rules of DESIGN.md, not with any of the reader's code.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from nbprof.trace import Trace, read
from nbprof.trace.model import TABLES

pytestmark = pytest.mark.corpus

GPU_KIND = {"kernel": "kernels", "Kernel": "kernels", "gpu_memcpy": "memcpy",
            "Memcpy": "memcpy", "gpu_memset": "memset", "Memset": "memset"}  # fmt: skip
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
STEP = re.compile(r"^ProfilerStep#\d+$")


def corpus_items(corpus: Path) -> list[Path]:
    return sorted(corpus.glob("*.json*")) + sorted(p for p in corpus.iterdir() if p.is_dir())


@cache
def load(path: Path) -> Trace:
    return read(path, progress=False)


@cache
def raw_docs(path: Path, exact: bool = False) -> tuple[tuple[int, dict[str, Any]], ...]:
    """(rank, document) per file, ranks as the reader's contract defines them.

    ``exact`` parses decimals as :class:`Decimal` (slow; only where ns matter).
    """
    files = sorted(path.glob("*.json*")) if path.is_dir() else [path]
    out = []
    for i, f in enumerate(files):
        with gzip.open(f, "rt") if f.name.endswith(".gz") else open(f) as fh:
            doc = json.load(fh, parse_float=Decimal if exact else float)
        rank = doc.get("distributedInfo", {}).get("rank", i if path.is_dir() else 0)
        out.append((rank, doc))
    return tuple(out)


def test_corpus_has_the_expected_variety(corpus: Path) -> None:
    names = " ".join(p.name for p in corpus_items(corpus))
    for must in ("amd_trace", "cupti_profiler", "ns_resolution", "df_index_resolver",
                 "8ranks", "resnet50"):  # fmt: skip
        assert must in names


def test_every_trace_loads_with_contract_columns(corpus: Path) -> None:
    for p in corpus_items(corpus):
        tr = load(p)
        assert tr.event_count == sum(len(d["traceEvents"]) for _, d in raw_docs(p)), p.name
        for name, cols in TABLES.items():
            frame = getattr(tr, name)
            assert tuple(frame.columns[: len(cols)]) == cols, (p.name, name)
            if "ts" in frame and len(frame):
                assert frame["ts"].min() >= 0, (p.name, name)
            if "dur" in frame and len(frame):
                assert frame["dur"].min() >= 0, (p.name, name)


def test_gpu_event_counts_per_device_match_an_independent_count(corpus: Path) -> None:
    for p in corpus_items(corpus):
        expected: Counter[tuple[str, int, str]] = Counter()
        for rank, doc in raw_docs(p):
            for e in doc["traceEvents"]:
                table = GPU_KIND.get(e.get("cat", ""))
                if table is None or e.get("ph") != "X":
                    continue
                args = e.get("args", {})
                device = args.get("device", e.get("pid"))
                expected[(table, rank, str(device))] += 1
        tr = load(p)
        got: Counter[tuple[str, int, str]] = Counter()
        for table in ("kernels", "memcpy", "memset"):
            for (rank, device), n in getattr(tr, table).groupby(["rank", "device"]).size().items():
                got[(table, int(rank), str(device))] = int(n)
        assert got == expected, p.name


def test_device_names_and_sm_counts_match_device_properties(corpus: Path) -> None:
    for p in corpus_items(corpus):
        tr = load(p)
        for rank, doc in raw_docs(p):
            for props in doc.get("deviceProperties", []):
                row = tr.devices[(tr.devices["rank"] == rank)
                                 & (tr.devices["device"] == str(props["id"]))]  # fmt: skip
                assert len(row) == 1, (p.name, rank, props["id"])
                assert row["name"].iloc[0] == props["name"]
                assert row["sm_count"].iloc[0] == props["numSms"]
                assert row["total_memory"].iloc[0] == props["totalGlobalMem"]


def test_step_counts_match_profiler_step_events(corpus: Path) -> None:
    for p in corpus_items(corpus):
        expected = Counter()
        for rank, doc in raw_docs(p):
            for e in doc["traceEvents"]:
                if (e.get("ph") == "X" and STEP.match(str(e.get("name", "")))
                        and e.get("cat") != "gpu_user_annotation"):  # fmt: skip
                    expected[rank] += 1
        tr = load(p)
        got = Counter({int(r): int(n) for r, n in tr.steps.groupby("rank").size().items()})
        assert got == expected, p.name


def test_kernels_linked_to_their_launch_where_the_file_has_correlations(corpus: Path) -> None:
    linked_total = kernels_total = 0
    for p in corpus_items(corpus):
        expected = 0
        for _, doc in raw_docs(p):
            launched = {e["args"].get("correlation") for e in doc["traceEvents"]
                        if e.get("cat") in LAUNCH_CATS and "args" in e}  # fmt: skip
            launched.discard(None)
            expected += sum(1 for e in doc["traceEvents"]
                            if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X"
                            and e.get("args", {}).get("correlation") in launched)  # fmt: skip
        k = load(p).kernels
        linked = int(k["launch_ts"].notna().sum())
        # Exactly the kernels whose launching call is in the file; the rest were launched
        # before the profiler's window opened.
        assert linked == expected, p.name
        assert (k["launch_name"] != "").sum() == linked
        assert (
            k.loc[k["launch_ts"].notna(), "launch_ts"] <= k.loc[k["launch_ts"].notna(), "ts"]
        ).all()
        linked_total += linked
        kernels_total += len(k)
    assert linked_total / kernels_total > 0.9


def test_ops_are_found_for_launched_kernels(corpus: Path) -> None:
    for p in corpus_items(corpus):
        tr = load(p)
        k = tr.kernels[tr.kernels["op_index"] >= 0]
        if tr.kernels["launch_ts"].notna().sum() == 0:
            continue
        ops = tr.cpu_ops.loc[k["op_index"].to_numpy()]
        assert (ops["name"].to_numpy() == k["op"].to_numpy()).all(), p.name
        assert (ops["rank"].to_numpy() == k["rank"].to_numpy()).all(), p.name
        # The op encloses the launch call's start.
        assert (ops["ts"].to_numpy() <= k["launch_ts"].to_numpy() + 1e-6).all(), p.name
        ends = (ops["ts"] + ops["dur"]).to_numpy()
        assert (ends >= k["launch_ts"].to_numpy() - 1e-6).all(), p.name
        assert len(k) / tr.kernels["launch_ts"].notna().sum() > 0.8, p.name


def test_ns_precision_preserved(corpus: Path) -> None:
    (p,) = [q for q in corpus_items(corpus) if "ns_resolution" in q.name]
    tr = load(p)
    (_, doc), = raw_docs(p, exact=True)  # fmt: skip
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert any(Decimal(e["ts"]) % 1 != 0 for e in kernels)
    want = sorted(int(Decimal(e["ts"]) * 1000) - tr.origin_ns for e in kernels)
    got = sorted(round(t * 1000) for t in tr.kernels["ts"])
    assert got == want


def test_amd_trace_is_amd_and_claims_no_nvidia_facts(corpus: Path) -> None:
    (p,) = [q for q in corpus_items(corpus) if "amd_trace" in q.name]
    tr = load(p)
    assert len(tr.kernels) > 0
    assert set(tr.devices["vendor"]) == {"amd"}
    assert set(tr.devices["compute_capability"]) == {""}


def test_cupti_profiler_trace_has_counters_and_says_it_has_no_kernels(corpus: Path) -> None:
    (p,) = [q for q in corpus_items(corpus) if "cupti_profiler" in q.name]
    tr = load(p)
    assert tr.kernels.empty
    assert any("no kernel events" in n for n in tr.notes)
    (_, doc), = raw_docs(p)  # fmt: skip
    ranges = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    expected = sum(1 for e in ranges for v in e["args"].values() if isinstance(v, (int, float)))
    assert len(tr.counters) == expected > 0
    assert tr.counters["name"].nunique() == len({e["name"] for e in ranges})


def test_eight_rank_folder(corpus: Path) -> None:
    (p,) = [q for q in corpus_items(corpus) if q.is_dir() and "8ranks" in q.name]
    tr = load(p)
    assert tr.ranks == list(range(8))
    assert sorted(tr.metadata) == list(range(8))
    for name in ("kernels", "cpu_ops", "devices", "runtime"):
        assert set(getattr(tr, name)["rank"]) == set(range(8)), name
