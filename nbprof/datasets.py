"""Real public GPU traces, on demand: a small registry, a hash-checked cache, a local corpus.

Each dataset is a Kineto trace recorded by another public project on a real GPU, pinned to
a commit of its repository and to the SHA-256 of its bytes. :func:`path` finds it:

1. in the folder named by ``NBPROF_TRACE_CORPUS`` (by file name; the hash is checked), so
   CI and air-gapped machines never need the network;
2. else in the download cache (``NBPROF_CACHE_DIR``, default the user cache folder), where
   pooch keeps one verified copy;
3. else it downloads it once with pooch, checking the hash.

A copy whose hash does not match is rejected with :class:`DatasetError`, never analysed.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbprof.errors import NbprofError

if TYPE_CHECKING:
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

__all__ = [
    "Dataset", "DatasetError", "available", "cache_dir", "corpus_dir", "info", "load", "names",
    "path", "table",
]  # fmt: skip

#: Environment variable naming a folder that holds the registered files (CI, offline use).
CORPUS_ENV = "NBPROF_TRACE_CORPUS"
#: Environment variable overriding where downloads are cached.
CACHE_ENV = "NBPROF_CACHE_DIR"


class DatasetError(NbprofError):
    """A registered dataset could not be found, fetched or verified; says what to do."""


@dataclass(frozen=True)
class Dataset:
    """One registered trace: where it came from, what it shows, and how to verify it."""

    name: str
    title: str
    description: str
    gpu: str
    repository: str
    upstream_path: str
    commit: str
    licence: str
    #: The local file name: in ``NBPROF_TRACE_CORPUS`` and in the cache.
    file_name: str
    sha256: str
    size: int
    #: True for recordings nbprof made itself and ships inside the package
    #: (``nbprof/data/<file_name>``): found there first, never downloaded.
    bundled: bool = False

    @property
    def url(self) -> str:
        """Download URL pinned to :attr:`commit` (never to a branch)."""
        return (
            f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/"
            f"{self.upstream_path}"
        )

    @property
    def origin(self) -> str:
        """One line: repository, path and commit, for labels and reports."""
        return f"{self.repository}: {self.upstream_path} @ {self.commit[:10]} ({self.licence})"


# Commits: the full commit at which the file index records each file, except TraceLens's,
# known only by the abbreviated commit the corpus copy was taken at. Hashes and sizes were
# computed from byte-for-byte copies of the upstream files.
_REGISTRY: tuple[Dataset, ...] = (
    Dataset(
        name="resnet50-v100-workers0",
        title="ResNet50 training on a V100, DataLoader num_workers=0",
        description=(
            "torchvision ResNet50 training, batch 32, 6 profiled steps, with the DataLoader "
            "loading in the training process (num_workers=0): the 'before' of the input "
            "pipeline pair. Uses the old Kineto category names (Kernel, Runtime, Memcpy)."
        ),
        gpu="NVIDIA V100",
        repository="pytorch/kineto",
        upstream_path=(
            "tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
        ),
        commit="be239c044d2f4b62982e1ff64144097acd69f59a",
        licence="BSD-3-Clause",
        file_name="kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
        sha256="a91798b500ce9d6e21c416ce32dcd8ecf4788489df86f59ba2f944906c90b853",
        size=1159569,
    ),
    Dataset(
        name="resnet50-v100-workers4",
        title="ResNet50 training on a V100, DataLoader num_workers=4",
        description=(
            "The same ResNet50 training as resnet50-v100-workers0, with 4 DataLoader worker "
            "processes: the 'after' of the input pipeline pair."
        ),
        gpu="NVIDIA V100",
        repository="pytorch/kineto",
        upstream_path=(
            "tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
        ),
        commit="c6e5fe205a8be11181aac547f88424cb3a28c8f8",
        licence="BSD-3-Clause",
        file_name="kineto-tbplugin__resnet50_num_workers_4__worker0.1623212756351.pt.trace.json.gz",
        sha256="c290eb249e74824736f81886587614fc5d96660d3e60d0c256dee4b4a0e268f6",
        size=1095617,
    ),
    Dataset(
        name="dlrm-a100-launch-bound",
        title="DLRM-style training on an A100, rank 0 of 16",
        description=(
            "Recommendation-model training (DLRM style), rank 0 of a 16-rank job, from "
            "HolisticTraceAnalysis's test data: thousands of tiny kernels (launch-bound), "
            "pageable host-to-device copies, TF32 tensor-op GEMMs."
        ),
        gpu="NVIDIA A100 80GB",
        repository="facebookresearch/HolisticTraceAnalysis",
        upstream_path="tests/data/negative_queue_length_values_check/rank0.json.gz",
        commit="d54e43fdbf03ea5c7569dd6534f4984db3894c53",
        licence="MIT",
        file_name="hta__negative_queue_length_values_check__rank0.json.gz",
        sha256="b8ce7a1a143b55dd1811d269272b09d1c693ffea85b91858f5fb246e7ad8c5f8",
        size=1384658,
    ),
    Dataset(
        name="qwen-h100-inference",
        title="Qwen1.5-0.5B-Chat bf16 inference on an H100",
        description=(
            "LLM inference in bf16 on an H100 (132 SMs), from TraceLens's tests: Hopper "
            "kernel names (sm90_xmma, flash_fwd) and a metadata block."
        ),
        gpu="NVIDIA H100",
        repository="AMD-AGI/TraceLens",
        upstream_path="tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        commit="171dd747",
        licence="MIT",
        file_name="tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        sha256="7c4a4b817b79db0aa90f0df0368de88ac6f6e22261864b68fa88d0a3f9c5c63d",
        size=444829,
    ),
    Dataset(
        name="resnet-v100-ns-resolution",
        title="ResNet training on a V100, nanosecond timestamps",
        description=(
            "ResNet training from HolisticTraceAnalysis's test data, with float timestamps "
            "of nanosecond precision; FP32 (no Tensor Core kernels)."
        ),
        gpu="NVIDIA V100",
        repository="facebookresearch/HolisticTraceAnalysis",
        upstream_path="tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        commit="c980c48309f7d59edf89271e771db4233dd3ccfa",
        licence="MIT",
        file_name="hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        sha256="e279d7280e73719e8dd9550e120cfe081fbe268596bd297fe5fcbf63e2b75a09",
        size=1152519,
    ),
    Dataset(
        name="alexnet-a100-sync",
        title="AlexNet benchmark on an A100, with CUDA synchronizations",
        description=(
            "An AlexNet benchmark from HolisticTraceAnalysis's critical-path tests: "
            "cudaDeviceSynchronize / stream sync events, pageable copies, GPU mostly idle."
        ),
        gpu="NVIDIA A100",
        repository="facebookresearch/HolisticTraceAnalysis",
        upstream_path=(
            "tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
        ),
        commit="66e3c5475683bd5f2cc79884dfe9a60a085f5cb6",
        licence="MIT",
        file_name="hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
        sha256="b9febb1abc8cc729a2890fb6a4171de9867ba72c944437ee046067e7c89912dc",
        size=24808,
    ),
)

#: Where bundled recordings live inside the installed package.
_DATA_DIR = Path(__file__).resolve().parent / "data"
_BY_NAME: dict[str, Dataset] = {d.name: d for d in _REGISTRY}
# (path, size, mtime_ns) of files whose hash already matched: a 1 MB hash is cheap, but
# notebooks call path() in every cell.
_VERIFIED: set[tuple[str, int, int]] = set()


def names() -> list[str]:
    """The registered dataset names, in registry order."""
    return [d.name for d in _REGISTRY]


def info(name: str) -> Dataset:
    """The registry entry for ``name``; :class:`DatasetError` lists the names when unknown."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise DatasetError(f"unknown dataset {name!r}; registered: {', '.join(names())}") from None


def table() -> Any:
    """The registry as a pandas DataFrame (one row per dataset), for notebooks."""
    import pandas as pd

    rows = [
        {
            "name": d.name,
            "gpu": d.gpu,
            "title": d.title,
            "origin": d.origin,
            "size_mb": round(d.size / 1e6, 2),
        }
        for d in _REGISTRY
    ]
    return pd.DataFrame(rows)


def cache_dir() -> Path:
    """Where downloads are kept: ``$NBPROF_CACHE_DIR``, else the user cache folder."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import pooch

    return Path(pooch.os_cache("nbprof")) / "traces"


def corpus_dir() -> Path | None:
    """The folder named by ``NBPROF_TRACE_CORPUS`` when it is set and exists, else None."""
    env = os.environ.get(CORPUS_ENV)
    if env and Path(env).is_dir():
        return Path(env)
    return None


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verified(p: Path, ds: Dataset) -> bool:
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return True
    if st.st_size != ds.size or _sha256(p) != ds.sha256:
        return False
    _VERIFIED.add(key)
    return True


def _bundled(ds: Dataset) -> Path | None:
    if not ds.bundled:
        return None
    candidate = _DATA_DIR / ds.file_name
    if not candidate.is_file():
        raise DatasetError(
            f"dataset {ds.name!r} should ship with nbprof but {candidate} is missing"
        )
    if not _verified(candidate, ds):
        raise DatasetError(
            f"{candidate}: its SHA-256 does not match dataset {ds.name!r}; reinstall nbprof"
        )
    return candidate


def _from_corpus(ds: Dataset) -> Path | None:
    folder = corpus_dir()
    if folder is None:
        return None
    # The corpus names files <source>__<upstream name>; a folder of plain upstream
    # downloads works too.
    for candidate in (folder / ds.file_name, folder / Path(ds.upstream_path).name):
        if candidate.is_file():
            if not _verified(candidate, ds):
                raise DatasetError(
                    f"{candidate}: its SHA-256 does not match dataset {ds.name!r} "
                    f"(expected {ds.sha256}); the file is corrupt or a different version: "
                    f"replace it, or unset {CORPUS_ENV} to download the pinned copy"
                )
            logger.debug("dataset %s found in corpus: %s", ds.name, candidate)
            return candidate
    return None


def _download(ds: Dataset, *, timeout: float) -> Path:
    """Fetch ``ds`` into the cache (the caller has found no verified copy there)."""
    import pooch

    downloader = pooch.HTTPDownloader(progressbar=False, timeout=timeout)
    try:
        got = pooch.retrieve(
            ds.url,
            known_hash=f"sha256:{ds.sha256}",
            fname=ds.file_name,
            path=cache_dir(),
            downloader=downloader,
            progressbar=False,
        )
    except ValueError as e:
        # pooch raises ValueError when the downloaded bytes do not match the hash.
        raise DatasetError(
            f"the download of dataset {ds.name!r} from {ds.url} did not match its pinned "
            f"SHA-256 ({e}); nothing was kept"
        ) from None
    except Exception as e:  # requests' ConnectionError, HTTPError, Timeout; OSError
        raise DatasetError(
            f"cannot get dataset {ds.name!r}: {_where(ds)}, and the download from "
            f"{_host(ds.url)} failed ({type(e).__name__}); set {CORPUS_ENV} to a folder "
            f"holding {ds.file_name}, or connect to the network"
        ) from e
    return Path(got)


def _where(ds: Dataset) -> str:
    corpus = os.environ.get(CORPUS_ENV)
    return f"{CORPUS_ENV}={corpus} has no {ds.file_name}" if corpus else f"{CORPUS_ENV} is not set"


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


def path(name: str, *, download: bool = True, timeout: float = 30.0) -> Path:
    """A verified local copy of dataset ``name``: corpus folder, else cache, else download.

    ``download=False`` never touches the network (raises :class:`DatasetError` instead).
    ``timeout``: seconds to wait for the server (connect and each read).
    """
    ds = info(name)
    found = _bundled(ds) or _from_corpus(ds)
    if found is not None:
        return found
    cached = cache_dir() / ds.file_name
    if cached.is_file() and _verified(cached, ds):
        return cached
    if not download:
        raise DatasetError(
            f"dataset {name!r} is not available offline: {_where(ds)} and the cache "
            f"({cache_dir()}) has no copy; set {CORPUS_ENV} or allow the download"
        )
    logger.info("downloading dataset %s from %s", ds.name, ds.url)
    return _download(ds, timeout=timeout)


def available(name: str) -> bool:
    """True when ``name`` can be had without the network (corpus folder or cache)."""
    try:
        path(name, download=False)
    except DatasetError:
        return False
    return True


def load(name: str, *, download: bool = True) -> Profile:
    """Load dataset ``name`` as an :class:`nbprof.Profile` (see :func:`path`)."""
    from nbprof.result import load as _load

    prof = _load(path(name, download=download))
    ds = info(name)
    prof.notes.append(f"recorded trace: {ds.title}; from {ds.origin}")
    return prof
