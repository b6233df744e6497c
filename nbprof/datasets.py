"""Real public GPU traces, on demand: a small registry, a hash-checked cache, a local corpus.

Each dataset is a Kineto trace recorded on a real GPU, by another public project (pinned
to a commit of its repository) or by nbprof itself, and pinned to the SHA-256 of its bytes.
:func:`path` finds it, never trusting a copy whose hash does not match:

1. inside the package (``nbprof/data/``) when the entry is ``bundled``: no network, ever;
2. in the folder named by ``NBPROF_TRACE_CORPUS`` (by file name), so CI and air-gapped
   machines never need the network;
3. in the download cache (``NBPROF_CACHE_DIR``, default the user cache folder);
4. else it downloads it once with pooch, checking the hash.

A dataset is one trace file, or a multi-rank job shipped upstream as one archive of rank
files (``members``): then :func:`path` gives a folder of rank files, which
:func:`nbprof.load` reads as one job. Each member is pinned by the SHA-256 of its JSON
text, so a copy of it gzipped (as a corpus keeps it) verifies as well as the original.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import shutil
import sys
import tarfile
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nbprof.errors import NbprofError

if TYPE_CHECKING:
    from nbprof.job import Job
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

__all__ = [
    "Dataset", "DatasetError", "Member", "available", "cache_dir", "corpus_dir", "files",
    "info", "licence_path", "load", "names", "path", "source", "table",
]  # fmt: skip

#: Environment variable naming a folder that holds the registered files (CI, offline use).
CORPUS_ENV = "NBPROF_TRACE_CORPUS"
#: Environment variable overriding where downloads are cached.
CACHE_ENV = "NBPROF_CACHE_DIR"

#: Where a dataset was found without the network (see :func:`source`).
Source = Literal["bundled", "corpus", "cache"]


class DatasetError(NbprofError):
    """A registered dataset could not be found, fetched or verified; says what to do."""


@dataclass(frozen=True)
class Member:
    """One rank file of a multi-file dataset."""

    #: The file name inside the upstream archive (a corpus may prefix it and gzip it).
    name: str
    #: SHA-256 of the file's JSON text (uncompressed).
    sha256: str


@dataclass(frozen=True)
class Dataset:
    """One registered trace: where it came from, what it shows, and how to verify it."""

    name: str
    title: str
    description: str
    #: The GPU(s) the trace was recorded on, as a person names them.
    gpu: str
    repository: str
    upstream_path: str
    commit: str
    licence: str
    #: The local file name: in ``NBPROF_TRACE_CORPUS``, in the cache and in ``nbprof/data``.
    #: For a multi-file dataset, the upstream archive's.
    file_name: str
    #: SHA-256 and size of that file (of the archive, for a multi-file dataset).
    sha256: str
    size: int
    #: True for traces that ship inside the package (``nbprof/data/<file_name>``, with
    #: the licence text beside them, see :attr:`licence_file`): found there first, never
    #: downloaded.
    bundled: bool = False
    #: The rank files of a multi-file dataset (an archive upstream); empty for one file.
    members: tuple[Member, ...] = ()
    #: Folder of the rank files, in the corpus, the cache and ``nbprof/data``.
    folder_name: str = ""

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

    @property
    def licence_file(self) -> str:
        """Where a bundled trace's licence text lives, relative to ``nbprof/data``."""
        return f"licences/{self.repository.replace('/', '__')}.txt"


# Commits: the commit each file was taken at (each file is present there). Hashes and sizes
# were computed from byte-for-byte copies of the upstream files; the members' hashes from
# the files inside the upstream archive. Bundled entries ship in nbprof/data (see its
# README.md): the files byte for byte, a job's members gzipped one by one (their JSON text
# unchanged, which is what their hashes pin).
_REGISTRY: tuple[Dataset, ...] = (
    Dataset(
        name="dlrm-a100-queued-idle",
        title=(
            "DLRM-style training on an A100, rank 0 of 16: the GPU idles with work queued, "
            "the host blocked on a tiny copy behind it"
        ),
        description=(
            "Recommendation-model training (DLRM style), rank 0 of a 16-rank job, from "
            "HolisticTraceAnalysis's test data. The GPU idles more than half the time with "
            "work queued 164 ms ahead, waiting on work outside the trace (CUDA graph "
            "replays that pause with nothing running); every step the host blocks for about "
            "150 ms in a device-to-host copy of a few hundred bytes that waits on that same "
            "queue, a consequence, not the cause; most kernels run under 10 µs; pageable "
            "copies, NCCL send/receive, TF32 tensor-op GEMMs."
        ),
        gpu="NVIDIA A100-SXM4-80GB",
        repository="facebookresearch/HolisticTraceAnalysis",
        upstream_path="tests/data/negative_queue_length_values_check/rank0.json.gz",
        commit="d54e43fdbf03ea5c7569dd6534f4984db3894c53",
        licence="MIT",
        file_name="hta__negative_queue_length_values_check__rank0.json.gz",
        sha256="b8ce7a1a143b55dd1811d269272b09d1c693ffea85b91858f5fb246e7ad8c5f8",
        size=1384658,
        bundled=True,
    ),
    Dataset(
        name="resnet50-v100-workers0",
        title="ResNet50 training on a V100, DataLoader num_workers=0",
        description=(
            "torchvision ResNet50 training, batch 32, 6 profiled steps, with the DataLoader "
            "loading in the training process (num_workers=0): the 'before' of the input "
            "pipeline pair. Uses the old Kineto category names (Kernel, Runtime, Memcpy)."
        ),
        gpu="NVIDIA Tesla V100-DGXS-32GB",
        repository="pytorch/kineto",
        upstream_path=(
            "tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
        ),
        commit="be239c044d2f4b62982e1ff64144097acd69f59a",
        licence="BSD-3-Clause",
        file_name="kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
        sha256="a91798b500ce9d6e21c416ce32dcd8ecf4788489df86f59ba2f944906c90b853",
        size=1159569,
        bundled=True,
    ),
    Dataset(
        name="resnet50-v100-workers4",
        title="ResNet50 training on a V100, DataLoader num_workers=4",
        description=(
            "The same ResNet50 training as resnet50-v100-workers0, with 4 DataLoader worker "
            "processes: the 'after' of the input pipeline pair."
        ),
        gpu="NVIDIA Tesla V100-DGXS-32GB",
        repository="pytorch/kineto",
        upstream_path=(
            "tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
        ),
        commit="c6e5fe205a8be11181aac547f88424cb3a28c8f8",
        licence="BSD-3-Clause",
        file_name="kineto-tbplugin__resnet50_num_workers_4__worker0.1623212756351.pt.trace.json.gz",
        sha256="c290eb249e74824736f81886587614fc5d96660d3e60d0c256dee4b4a0e268f6",
        size=1095617,
        bundled=True,
    ),
    Dataset(
        name="dlrm-v100-8ranks",
        title="DLRM training on 8 V100s, one step on each rank",
        description=(
            "Recommendation-model (DLRM) training, one profiled step on each of 8 ranks, "
            "from PARAM's execution-trace replay tests: most kernels are NCCL collectives "
            "and kernels under 10 µs with grids far smaller than the 80 SMs, so nvidia-smi's "
            "busy time and the SMs' real use part ways."
        ),
        gpu="8x NVIDIA Tesla V100-SXM2-32GB",
        repository="facebookresearch/param",
        upstream_path="et_replay/tests/inputs/dlrm_kineto.tar.gz",
        commit="1e115ffc62c6d048405d9b963191736c13811b1d",
        licence="MIT",
        file_name="param__dlrm_kineto.tar.gz",
        sha256="cdeb818c32d6f11d7d6f3eed89f2561811ad4860fefd799322eed4522db2fcd0",
        size=468880,
        bundled=True,
        folder_name="param__dlrm_kineto_8ranks",
        members=(
            Member(
                "worker0_step_12.1694128201545.pt.trace.json",
                "c557c7023ec6bbc114cbc3eef48870b03ae43395852057561a004ccb4171e9a4",
            ),
            Member(
                "worker1_step_12.1694128201556.pt.trace.json",
                "8b0cb7201603dd9161ec25568f7b3066182fc4a437e6f760299a9b98db1f5f52",
            ),
            Member(
                "worker2_step_12.1694128201554.pt.trace.json",
                "273afd40b147b5a7640e09b1a4d32181750eb0244693cfd313fcd996676ad9c9",
            ),
            Member(
                "worker3_step_12.1694128201557.pt.trace.json",
                "2fb6093f90d39f0fe2d6acaa854b14329d85cf29f122d6435fa3444b393f8c7a",
            ),
            Member(
                "worker4_step_12.1694128201547.pt.trace.json",
                "7c7cdf660f12097abd1abbe87448eecec7de362051d4049dd2a60f65a0fe80ea",
            ),
            Member(
                "worker5_step_12.1694128201549.pt.trace.json",
                "2c7af1f4566f871d4e164b81dbb635a6a1dad97f45187613d5b4f8d9aab6ec79",
            ),
            Member(
                "worker6_step_12.1694128201553.pt.trace.json",
                "2341786c77d87fa460f1ef52ede9555774b1fa2210acbc603ef7d0139b34429f",
            ),
            Member(
                "worker7_step_12.1694128201553.pt.trace.json",
                "a7225d0782bbf039e4a1513f3fdc1e2832b16d7c2c1fab9955a6f5caf12bf975",
            ),
        ),
    ),
    Dataset(
        name="qwen-h100-inference",
        title="Qwen1.5-0.5B-Chat bf16 inference on an H100",
        description=(
            "LLM inference in bf16 on an H100 (132 SMs), from TraceLens's tests: Hopper "
            "kernel names (sm90_xmma, flash_fwd), input shapes for the GEMMs' FLOPs, and a "
            "metadata block."
        ),
        gpu="NVIDIA H100 80GB HBM3",
        repository="AMD-AGI/TraceLens",
        upstream_path="tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        commit="171dd74721ca1ec45709e5805b68ae1f65e27811",
        licence="MIT",
        file_name="tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        sha256="7c4a4b817b79db0aa90f0df0368de88ac6f6e22261864b68fa88d0a3f9c5c63d",
        size=444829,
        bundled=True,
    ),
    Dataset(
        name="bert-small-h100-host-bound",
        title="BERT-small inference on an H100, eager mode",
        description=(
            "BERT-small (uncased) inference in eager mode on an H100, from TraceLens's "
            "tests: 60 kernels of a few µs each, and the GPU mostly waiting while the host "
            "runs Python and framework code between them (host-bound, not launch-bound)."
        ),
        gpu="NVIDIA H100 80GB HBM3",
        repository="AMD-AGI/TraceLens",
        upstream_path="tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
        commit="171dd74721ca1ec45709e5805b68ae1f65e27811",
        licence="MIT",
        file_name="tracelens__bert-small-inference-h100.json.gz",
        sha256="309220b5130afa8bc5151252fb1fc3fc9fe6cdc099a07854c0c157e03abb4233",
        size=71459,
        bundled=True,
    ),
    Dataset(
        name="resnet-v100-ns-resolution",
        title="ResNet training on a V100, nanosecond timestamps",
        description=(
            "ResNet training from HolisticTraceAnalysis's test data, with float timestamps "
            "of nanosecond precision; FP32 (no Tensor Core kernels)."
        ),
        gpu="NVIDIA Tesla V100-SXM2-32GB",
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
        gpu="NVIDIA A100-PG509-200",
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

#: Old names that still resolve, with a DeprecationWarning: name -> current name.
_ALIASES: dict[str, str] = {
    # It was registered for its tiny kernels, then for the host blocked in a device-to-host
    # copy; the diagnosis finds the GPU's queued work waiting on work outside the trace,
    # the copy waiting on that queue, and the name says what the trace shows.
    "dlrm-a100-launch-bound": "dlrm-a100-queued-idle",
    "dlrm-a100-sync-bound": "dlrm-a100-queued-idle",
}

#: Where bundled traces (and their licence texts) live inside the installed package.
_DATA_DIR = Path(__file__).resolve().parent / "data"
_BY_NAME: dict[str, Dataset] = {d.name: d for d in _REGISTRY}
# (path, size, mtime_ns, sha256) of files whose hash already matched: a 1 MB hash is cheap,
# but notebooks call path() in every cell.
_VERIFIED: set[tuple[str, int, int, str]] = set()


def names() -> list[str]:
    """The registered dataset names, in registry order (deprecated aliases left out)."""
    return [d.name for d in _BY_NAME.values()]


def info(name: str) -> Dataset:
    """The registry entry for ``name``; :class:`DatasetError` lists the names when unknown."""
    if name in _ALIASES:
        new = _ALIASES[name]
        warnings.warn(
            f"dataset name {name!r} is deprecated, use {new!r}", DeprecationWarning, stacklevel=2
        )
        name = new
    try:
        return _BY_NAME[name]
    except KeyError:
        raise DatasetError(f"unknown dataset {name!r}; registered: {', '.join(names())}") from None


def licence_path(name: str) -> Path | None:
    """The licence text shipped beside bundled dataset ``name``; None when not bundled
    (its licence is then the repository's own file at the pinned commit)."""
    ds = info(name)
    return _DATA_DIR / ds.licence_file if ds.bundled else None


def table() -> Any:
    """The registry as a pandas DataFrame (one row per dataset), for notebooks."""
    import pandas as pd

    rows = []
    for d in _BY_NAME.values():
        here: str
        try:
            here = source(d.name) or "download on first use"
        except DatasetError:
            here = "corrupt local copy"
        rows.append(
            {
                "name": d.name,
                "gpu": d.gpu,
                "title": d.title,
                "origin": d.origin,
                "size_mb": round(d.size / 1e6, 2),
                "bundled": d.bundled,
                "here": here,
            }
        )
    return pd.DataFrame(rows)


def cache_dir() -> Path:
    """Where downloads are kept: ``$NBPROF_CACHE_DIR`` (``~`` expanded; a blank or
    relative value is refused in one warning), else the user cache folder."""
    from nbprof._files import env_folder

    env = os.environ.get(CACHE_ENV)
    folder = (
        None if env is None else env_folder(CACHE_ENV, env, "downloads go to the user cache folder")
    )
    if folder is not None:
        return folder
    import pooch

    return Path(pooch.os_cache("nbprof")) / "traces"


def corpus_dir() -> Path | None:
    """The folder named by ``NBPROF_TRACE_CORPUS`` when it is set and exists, else None."""
    env = os.environ.get(CORPUS_ENV)
    if env and Path(env).is_dir():
        return Path(env)
    return None


# -- verifying copies ----------------------------------------------------------------------


def _sha256_stream(f: io.BufferedIOBase) -> str:
    h = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def _check(p: Path, sha256: str, size: int | None, *, text: bool) -> bool:
    """Whether ``p`` hashes to ``sha256`` (its JSON text, gunzipped first, when ``text``)."""
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, sha256)
    if key in _VERIFIED:
        return True
    if size is not None and st.st_size != size:
        return False
    try:
        with gzip.open(p, "rb") if text and p.suffix == ".gz" else open(p, "rb") as f:
            ok = _sha256_stream(f) == sha256
    except (OSError, EOFError):  # a truncated or corrupt gzip stream
        ok = False
    if ok:
        _VERIFIED.add(key)
    return ok


def _member_file(folder: Path, m: Member) -> Path | None:
    """``m`` in ``folder``: under its own name, gzipped, or with a ``<source>__`` prefix."""
    for n in (m.name, m.name + ".gz"):
        if (folder / n).is_file():
            return folder / n
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.name.endswith((f"__{m.name}", f"__{m.name}.gz")):
            return p
    return None


def _members_in(folder: Path, ds: Dataset, where: str) -> Path | None:
    """``folder`` when it holds every member of ``ds``, verified; None when it is absent.

    A folder that is there but incomplete or altered is an error naming the file: it must
    not pass silently for the job (the analysis would read a different set of ranks).
    """
    if not folder.is_dir():
        return None
    for m in ds.members:
        p = _member_file(folder, m)
        if p is None:
            raise DatasetError(
                f"{folder} ({where}) lacks {m.name} of dataset {ds.name!r}; "
                f"remove the folder or add the file"
            )
        if not _check(p, m.sha256, None, text=True):
            raise DatasetError(
                f"{p} ({where}): its SHA-256 does not match {m.name} of dataset {ds.name!r}; "
                f"the file is corrupt or a different version: replace it"
            )
    return folder


def _bundled(ds: Dataset) -> Path | None:
    if not ds.bundled:
        return None
    if ds.members:
        found = _members_in(_DATA_DIR / ds.folder_name, ds, "bundled with nbprof")
        if found is None:
            raise DatasetError(
                f"dataset {ds.name!r} should ship with nbprof but "
                f"{_DATA_DIR / ds.folder_name} is missing; reinstall nbprof"
            )
        return found
    candidate = _DATA_DIR / ds.file_name
    if not candidate.is_file():
        raise DatasetError(
            f"dataset {ds.name!r} should ship with nbprof but {candidate} is missing"
        )
    if not _check(candidate, ds.sha256, ds.size, text=False):
        raise DatasetError(
            f"{candidate}: its SHA-256 does not match dataset {ds.name!r}; reinstall nbprof"
        )
    return candidate


def _from_corpus(ds: Dataset) -> Path | None:
    folder = corpus_dir()
    if folder is None:
        return None
    if ds.members:
        for sub in (ds.folder_name, Path(ds.upstream_path).name.split(".")[0]):
            found = _members_in(folder / sub, ds, CORPUS_ENV)
            if found is not None:
                logger.debug("dataset %s found in corpus: %s", ds.name, found)
                return found
    # The corpus names files <source>__<upstream name>; a folder of plain upstream
    # downloads works too (for a multi-file dataset, its archive: unpacked into the cache).
    for candidate in (folder / ds.file_name, folder / Path(ds.upstream_path).name):
        if candidate.is_file():
            if not _check(candidate, ds.sha256, ds.size, text=False):
                raise DatasetError(
                    f"{candidate}: its SHA-256 does not match dataset {ds.name!r} "
                    f"(expected {ds.sha256}); the file is corrupt or a different version: "
                    f"replace it, or unset {CORPUS_ENV} to download the pinned copy"
                )
            logger.debug("dataset %s found in corpus: %s", ds.name, candidate)
            return _unpacked(ds, candidate) if ds.members else candidate
    return None


def _from_cache(ds: Dataset) -> Path | None:
    archive = cache_dir() / ds.file_name
    if ds.members:
        try:
            found = _members_in(cache_dir() / ds.folder_name, ds, "download cache")
        except DatasetError as e:
            # A damaged unpacked copy is rebuilt from the archive (or downloaded again).
            logger.warning("%s; unpacking it again", e)
            shutil.rmtree(cache_dir() / ds.folder_name, ignore_errors=True)
            found = None
        if found is not None:
            return found
        if archive.is_file() and _check(archive, ds.sha256, ds.size, text=False):
            return _unpacked(ds, archive)
        return None
    if archive.is_file() and _check(archive, ds.sha256, ds.size, text=False):
        return archive
    return None


def _unpacked(ds: Dataset, archive: Path) -> Path:
    """Unpack the members of ``ds`` from its verified ``archive`` into the cache.

    Only the registered member names are taken from the archive, each checked against its
    hash, written into a fresh folder that replaces the old one in one rename: a path in
    the archive never chooses where a file is written.
    """
    target = cache_dir() / ds.folder_name
    target.parent.mkdir(parents=True, exist_ok=True)
    wanted = {m.name: m for m in ds.members}
    tmp = Path(tempfile.mkdtemp(prefix=f".{ds.folder_name}.", dir=target.parent))
    try:
        with tarfile.open(archive, "r:*") as tar:
            for info_ in tar:
                m = wanted.get(Path(info_.name).name)
                if m is None or not info_.isfile():
                    continue
                f = tar.extractfile(info_)
                if f is None:
                    continue
                data = f.read()
                if hashlib.sha256(data).hexdigest() != m.sha256:
                    raise DatasetError(
                        f"{archive}: {m.name} inside it does not match its pinned SHA-256"
                    )
                (tmp / m.name).write_bytes(data)
        missing = [n for n in wanted if not (tmp / n).is_file()]
        if missing:
            raise DatasetError(f"{archive} lacks {', '.join(missing)} of dataset {ds.name!r}")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise DatasetError(f"cannot unpack {archive} ({type(e).__name__}: {e})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _local(ds: Dataset) -> tuple[Source, Path] | None:
    found = _bundled(ds)
    if found is not None:
        return "bundled", found
    found = _from_corpus(ds)
    if found is not None:
        return "corpus", found
    found = _from_cache(ds)
    if found is not None:
        return "cache", found
    return None


# -- downloads -----------------------------------------------------------------------------


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
            f"holding {_held(ds)}, or connect to the network"
        ) from e
    return _unpacked(ds, Path(got)) if ds.members else Path(got)


def _where(ds: Dataset) -> str:
    corpus = os.environ.get(CORPUS_ENV)
    return f"{CORPUS_ENV}={corpus} has no {_held(ds)}" if corpus else f"{CORPUS_ENV} is not set"


def _held(ds: Dataset) -> str:
    """What a corpus folder must hold for ``ds``, in words."""
    if ds.members:
        return f"{ds.folder_name}/ (its {len(ds.members)} rank files) or {ds.file_name}"
    return ds.file_name


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


# -- the public functions ------------------------------------------------------------------


def path(name: str, *, download: bool = True, timeout: float = 30.0) -> Path:
    """A verified local copy of dataset ``name``: bundled, corpus, cache, else downloaded.

    A multi-file dataset gives the folder of its rank files. ``download=False`` never
    touches the network (raises :class:`DatasetError` instead). ``timeout``: seconds to
    wait for the server (connect and each read).
    """
    ds = info(name)
    found = _local(ds)
    if found is not None:
        return found[1]
    if not download:
        raise DatasetError(
            f"dataset {ds.name!r} is not available offline: {_where(ds)} and the cache "
            f"({cache_dir()}) has no copy; set {CORPUS_ENV} or allow the download"
        )
    logger.info("downloading dataset %s from %s", ds.name, ds.url)
    return _download(ds, timeout=timeout)


def source(name: str) -> Source | None:
    """Where ``name`` is at hand without the network: ``"bundled"`` (inside the package),
    ``"corpus"`` (``NBPROF_TRACE_CORPUS``), ``"cache"`` (downloaded before), or None.

    A local copy that is there but does not verify raises :class:`DatasetError`.
    """
    found = _local(info(name))
    return found[0] if found is not None else None


def available(name: str) -> bool:
    """True when ``name`` can be had without the network (package, corpus folder or cache)."""
    try:
        return source(name) is not None
    except DatasetError:
        return False


def files(name: str, *, download: bool = True, timeout: float = 30.0) -> list[Path]:
    """The trace files of dataset ``name``: one, or a job's rank files in rank order.

    One rank of a job, with its kernels, is ``nbprof.load(files(name)[r])``.
    """
    ds = info(name)
    p = path(ds.name, download=download, timeout=timeout)
    if not ds.members:
        return [p]
    found = [_member_file(p, m) for m in ds.members]
    return [f for f in found if f is not None]  # path() checked that each is there


def load(name: str, *, download: bool = True, progress: bool | None = None) -> Profile | Job:
    """Load dataset ``name``: a :class:`nbprof.Profile`, or for a multi-rank dataset the
    :class:`nbprof.job.Job` of its ranks (see :func:`path` and :func:`nbprof.load`).

    ``progress`` as in :func:`nbprof.load` (``False``: no progress bar, e.g. in a notebook
    that is saved with its outputs).
    """
    from nbprof.loading import load as _load

    ds = info(name)
    prof = _load(path(ds.name, download=download), progress=progress)
    prof.notes.append(f"recorded trace: {ds.title}; from {ds.origin}")
    return prof


def main(argv: list[str] | None = None) -> int:
    """``python -m nbprof.datasets [download [NAME ...]]``: list, or fetch into the cache.

    ``download`` fetches the named datasets (all when none is named), hash checked, and
    exits 1 when any could not be had: what a build step (Binder's ``postBuild``) runs.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] == "list":
        for d in _BY_NAME.values():
            here: str
            try:
                here = source(d.name) or "not here"
            except DatasetError:
                here = "corrupt"
            print(f"{d.name:28} {d.size / 1e6:5.2f} MB  {here:8}  {d.title}")
        return 0
    if args[0] != "download":
        print("usage: python -m nbprof.datasets [list | download [NAME ...]]", file=sys.stderr)
        return 2
    failed = 0
    for n in args[1:] or names():
        try:
            print(f"{n}: {path(n)}")
        except DatasetError as e:
            failed += 1
            print(f"{n}: not fetched: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
