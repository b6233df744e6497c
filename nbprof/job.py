"""The public result of a multi-rank job, and how a job is loaded.

:func:`load_job` lists a job's rank files (a local folder, a list of files, or an fsspec
URL such as ``s3://bucket/run/``), has each one read and summarised where it is cheapest
(:mod:`nbprof.parallel`: in this process, in local worker processes, or on a Dask cluster
whose workers can read the paths), and joins the summaries into a :class:`Job`. Only the
summaries travel back: the client never holds a rank's trace, so its memory does not grow
with the size of the ranks' files.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pandas as pd

from nbprof import _collector, parallel
from nbprof._files import inputs_of, render_page
from nbprof.analysis import rank as rank_analysis
from nbprof.analysis.job import JobDiagnosis, NotOneJob, analyze_job, check
from nbprof.analysis.model import SCHEMA
from nbprof.analysis.rank import RankFailure, RankSummary
from nbprof.errors import TraceError
from nbprof.result import Profile
from nbprof.trace import read
from nbprof.trace.io import trace_files
from nbprof.trace.model import Trace
from nbprof.views import render

logger = logging.getLogger(__name__)

#: Timeline events the whole job keeps (shared among its ranks, each keeps 200 to 5000).
TIMELINE_EVENTS = 200_000
_SUFFIXES = (".json", ".json.gz")


class Job:
    """A multi-rank job: per-rank table, stragglers, collectives, skew and the job verdict.

    ``ranks``, ``collectives`` and ``steps`` are DataFrames; ``diagnosis`` is the analysis
    (:class:`nbprof.analysis.job.JobDiagnosis`); ``rank(r)`` is one rank's own diagnosis
    as a :class:`~nbprof.Profile` (its panel; it holds no trace events).
    """

    def __init__(
        self,
        diagnosis: JobDiagnosis,
        summaries: list[RankSummary],
        *,
        notes: list[str] | None = None,
    ) -> None:
        self.diagnosis = diagnosis
        self.summaries = summaries
        #: How the job was loaded (workers that died and were replaced, ...).
        self.notes: list[str] = list(notes or [])

    # -- tables -----------------------------------------------------------------------
    @property
    def ranks(self) -> pd.DataFrame:
        rows = [r.to_json() for r in self.diagnosis.ranks]
        return pd.DataFrame(rows).drop(columns=["steps", "step_exposed_comm_us"], errors="ignore")

    @property
    def steps(self) -> pd.DataFrame:
        """rank, step, dur (µs), exposed_comm_us: one row per rank and ProfilerStep."""
        rows = [
            {"rank": r.rank, "step": k, "dur": v, "exposed_comm_us": r.step_exposed_comm_us.get(k)}
            for r in self.diagnosis.ranks
            for k, v in r.steps.items()
        ]
        return pd.DataFrame(rows, columns=["rank", "step", "dur", "exposed_comm_us"])

    @property
    def collectives(self) -> pd.DataFrame:
        rows = []
        for c in self.diagnosis.collectives:
            d = c.to_json()
            d.pop("basis")
            rows.append(d)
        return pd.DataFrame(rows)

    @property
    def stragglers(self) -> list[int]:
        return [s.rank for s in self.diagnosis.stragglers]

    def rank(self, rank: int) -> Profile:
        """Rank ``rank``'s own diagnosis, as a Profile without trace events."""
        for s, row in zip(self.summaries, self._order(), strict=True):
            if row == rank:
                p = Profile(Trace(source=s.path, event_count=0, origin_ns=s.origin_ns,
                                  notes=list(s.notes)))  # fmt: skip
                p.__dict__["diagnosis"] = s.diagnosis  # the cached_property's value
                return p
        raise KeyError(f"no rank {rank} in this job (ranks: {self._order()})")

    def _order(self) -> list[int]:
        by_path = {r.path: r.rank for r in self.diagnosis.ranks}
        return [by_path[s.path] for s in self.summaries]

    def to_json(self) -> dict[str, Any]:
        """Schema ``nbprof.analysis/1``: every rank's devices, the job's verdict and
        findings, and the ``job`` section."""
        d = self.diagnosis
        devices = [m.to_json() for s in self.summaries for m in s.diagnosis.devices]
        v = d.verdict
        notes = [*self.notes, *d.notes]
        source: dict[str, Any] = {
            "path": d.source,
            "ranks": len(self.summaries),
            "events": sum(int(s.diagnosis.source.get("events", 0)) for s in self.summaries),
        }
        if notes:
            source["notes"] = notes
        return {
            "schema": SCHEMA,
            "source": source,
            "devices": devices,
            "verdict": {
                "bottleneck": v.bottleneck,
                "summary": v.summary,
                "confidence": v.confidence,
                "basis": v.basis,
                "cause": v.cause,
                "fixes": list(v.fixes),
            },
            "findings": [f.to_json() for f in d.findings],
            "explanation": "",
            "job": d.to_json(),
        }

    # -- display (nbprof.views.render) ------------------------------------------------
    def text(self) -> str:
        """The plain-text report (what ``nbprof analyze DIR`` prints)."""
        return render.text(self)

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The job's standalone dashboard (works offline). Writes it when given a path."""
        # As Profile.to_html: never over a rank file of the job.
        return render_page(path, lambda: render.page(self), inputs=inputs_of(self.diagnosis.source))

    def show(self) -> None:
        """Display the job dashboard below the current cell."""
        render.show(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return render.notebook(self)

    def __repr__(self) -> str:
        d = self.diagnosis
        return (
            f"<nbprof.Job {d.source!r}: {len(d.ranks)} ranks, {d.verdict.bottleneck}, "
            f"stragglers {self.stragglers}>"
        )


# -- loading -------------------------------------------------------------------------------


def is_url(path: object) -> bool:
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def list_files(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """The rank files of ``source``: a list of files as given, or a folder's (or fsspec
    URL's) ``*.json`` / ``*.json.gz`` files sorted by name."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise TraceError(None, "no trace files given")
        return [os.fspath(p) for p in source]
    text = os.fspath(cast("str | os.PathLike[str]", source))
    if is_url(text):
        return _list_url(text)
    p = Path(text.removeprefix("file://"))
    if p.is_dir():
        return [str(f) for f in trace_files(p)]
    if not p.exists():
        raise TraceError(str(p), "no such file or folder")
    return [str(p)]


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec comes with the dask extra
        raise TraceError(None, "reading URLs needs fsspec: pip install 'nbprof[dask]'") from None
    return fsspec


def _list_url(url: str) -> list[str]:
    fsspec = _fsspec()
    try:
        fs, root = fsspec.core.url_to_fs(url)
        if not fs.isdir(root):
            if not fs.exists(root):
                raise TraceError(url, "no such file or folder")
            return [url]
        names = sorted(
            (p for p in fs.ls(root, detail=False) if str(p).endswith(_SUFFIXES)),
            key=lambda p: str(p).rsplit("/", 1)[-1],
        )
    except TraceError:
        raise
    except Exception as e:  # the file system's own errors (credentials, network), in a line
        raise TraceError(url, f"could not list it ({type(e).__name__}: {e})") from None
    if not names:
        raise TraceError(url, "folder holds no trace files (*.json or *.json.gz)")
    return [fs.unstrip_protocol(p) for p in names]


@contextmanager
def _local(path: str) -> Iterator[str]:
    """A local file holding ``path`` (an fsspec URL is copied to a temporary folder)."""
    if not is_url(path):
        yield path.removeprefix("file://")
        return
    fsspec = _fsspec()
    tmp = tempfile.mkdtemp(prefix="nbprof-")
    try:
        target = os.path.join(tmp, path.rstrip("/").rsplit("/", 1)[-1] or "trace.json")
        try:
            with fsspec.open(path, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except FileNotFoundError:
            raise TraceError(path, "file not found") from None
        except Exception as e:
            raise TraceError(path, f"could not read it ({type(e).__name__}: {e})") from None
        yield target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def summarize_file(task: tuple[str, int, bool]) -> RankSummary | RankFailure:
    """Read and summarise one rank file: what a worker runs. Bad input comes back as a
    :class:`~nbprof.analysis.rank.RankFailure` naming the reason, never as an exception.
    ``task`` is (path, timeline cap, use the table cache)."""
    path, cap, cache = task
    try:
        with _local(path) as local:
            # A URL's local copy is new on every read, so it could never be found again.
            trace = read(local, progress=False, cache=cache and not is_url(path))
        # The analysis makes and drops tens of thousands of small objects (frames, their
        # indexes and blocks, arrays, dicts), almost all freed by their reference counts;
        # the collector would scan the young ones every 700 allocations and, now and then,
        # every object the worker holds: about 0.5 ms of a DLRM rank's 10. What it leaves
        # in cycles is a few frames at most, collected once the collector runs again.
        with _collector.paused():
            return rank_analysis.summarize(trace, path, cap=cap)
    except TraceError as e:
        return RankFailure(path, e.reason)
    except MemoryError as e:
        from nbprof import _memory

        size = _memory.size_on_disk(path) if not is_url(path) else 0
        return RankFailure(path, _memory.not_enough(size, _memory.free_bytes(), detail=str(e)))


def local_workers(workers: int | None, n_files: int) -> int:
    """How many local processes read the ranks: ``workers`` when given; else every core
    this process may use, where workers can be forked (they start at once, with everything
    imported), and this process alone where they would be spawned (a spawned worker spends
    about a second of CPU importing before its first rank: more than a small job takes)."""
    if workers is not None:
        n, why = parallel.bounded(workers, n_files)
        if why:
            logger.warning(
                "%d worker processes asked for, %d started: no more can run at once (%s)",
                workers,
                n,
                " and ".join(w.replace("item", "rank file") for w in why),
            )
        return n
    if n_files < 2 or parallel.start_method() != "fork":
        return 1
    return max(1, min(n_files, parallel.cpus()))


def load_job(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    job: bool | None = None,
    workers: int | None = None,
    scheduler: Any = None,
    progress: bool | None = None,
    cache: bool = True,
) -> Job | Profile:
    """A job of rank files (see :func:`nbprof.load`); one file alone is a Profile unless
    ``job=True``. ``cache``: each local rank file's tables go through the table cache
    (:mod:`nbprof.trace.cache`), in whichever process reads that rank."""
    label = (
        f"{len(source)} files"
        if isinstance(source, (list, tuple))
        else os.fspath(cast("str | os.PathLike[str]", source))
    )
    files = list_files(source)
    if job is False:
        if len(files) == 1 or (not is_url(label) and Path(label).is_dir()):
            return Profile(
                read(label if len(files) > 1 else files[0], progress=progress, cache=cache)
            )
        raise TraceError(label, "job=False takes one trace file or a local folder")
    if len(files) == 1 and not job:
        with _local(files[0]) as local:
            return Profile(read(local, progress=progress, cache=cache and not is_url(files[0])))
    if cache:
        from nbprof.trace import cache as table_cache

        # Asked here, once: a refused cache folder is one warning, not one per worker.
        cache = table_cache.ready()
    cap = max(200, min(5000, TIMELINE_EVENTS // len(files)))
    if scheduler is None:
        workers = local_workers(workers, len(files))
    try:
        outcomes = parallel.run(
            summarize_file, [(f, cap, cache) for f in files], workers=workers, scheduler=scheduler
        )
    except parallel.NeedsDask as e:
        raise TraceError(None, str(e)) from None
    summaries: list[Any] = []
    failures: list[RankFailure] = []
    notes: list[str] = []
    for f, o in zip(files, outcomes, strict=True):
        if o.error is not None:
            failures.append(RankFailure(f, o.error))
        elif isinstance(o.value, RankFailure):
            failures.append(o.value)
        else:
            summaries.append(o.value)
        if o.retries and o.error is None:
            notes.append(
                f"{_base(f)}: the worker analysing it died {o.retries} time"
                f"{'s' if o.retries != 1 else ''}; it was analysed again on another"
            )
    if not summaries:
        if len(failures) == 1:
            raise TraceError(failures[0].path, failures[0].reason)
        why = "; ".join(f"{_base(x.path)}: {x.reason}" for x in failures[:3])
        more = len(failures) - 3
        if more > 0:
            why += f"; and {more:,} more"
        raise TraceError(label, f"no rank file of {len(failures):,} could be read ({why})")
    problem = check(summaries)
    if problem is not None and not job:
        raise NotOneJob(
            label,
            f"not one job: {problem} (pass job=True, or --job, to analyse them as one anyway)",
        )
    try:
        diag = analyze_job(summaries, failures, source=label, forced=bool(job))
    except NotOneJob as e:
        raise NotOneJob(label, e.reason) from None
    if problem is not None:
        notes.append(f"analysed as one job although {problem}")
    return Job(diag, summaries, notes=notes)


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
