"""The ``nbprof`` command: ``analyze``, ``report``, ``compare`` and ``demo``.

A folder of rank files whose ``distributedInfo`` agree is analysed as one job (``--job``
forces it; ``--workers N`` / ``--scheduler ADDRESS`` spread the ranks over local processes
or a Dask cluster); files that are not one job are refused in one line naming them.

Bad input (a missing file, an unreadable trace, an unknown device) prints one line,
``nbprof: error: <file>: <reason>``, on stderr and exits with status 2: never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbprof import _memory
from nbprof._version import __version__
from nbprof.errors import NbprofError, OutputError, plain_json, plain_lines, plain_text, valid_text

if TYPE_CHECKING:
    from nbprof.analysis.model import Diagnosis
    from nbprof.job import Job
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


class _BadInput(Exception):
    """Reported as one line and exit status 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nbprof",
        description="What your GPU was really doing: diagnose PyTorch profiler traces.",
    )
    p.add_argument("--version", action="version", version=f"nbprof {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    a = sub.add_parser(
        "analyze",
        help="diagnose a trace: a compact text report, or JSON",
        description="Diagnose a trace (.json, .json.gz, or a folder of per-rank files).",
    )
    a.add_argument("trace", metavar="TRACE")
    a.add_argument(
        "--json", action="store_true", help="print the diagnosis as schema nbprof.analysis/1"
    )
    a.add_argument(
        "--device",
        metavar="D",
        action="append",
        help="only this device (its id, or RANK:ID for multi-rank traces); repeatable",
    )
    _job_options(a)
    _cache_option(a)

    r = sub.add_parser(
        "report",
        help="write the standalone HTML report (works offline)",
        description="Write the dashboard of a trace as one self-contained HTML file.",
    )
    r.add_argument("trace", metavar="TRACE")
    r.add_argument(
        "-o",
        "--output",
        metavar="OUT.html",
        help="where to write (default: beside TRACE, its name + .html); never over TRACE",
    )
    _job_options(r)
    _cache_option(r)

    c = sub.add_parser(
        "compare",
        help="what changed between two runs, and why",
        description="Compare two traces (before and after a change): the verdicts, what "
        "changed with numbers, every key metric, the kernels and CPU ops that moved most.",
    )
    c.add_argument("before", metavar="BEFORE")
    c.add_argument("after", metavar="AFTER")
    c.add_argument(
        "--json", action="store_true", help="print the comparison as schema nbprof.compare/1"
    )
    c.add_argument(
        "-o",
        "--output",
        metavar="OUT.html",
        help="also write the comparison, both timelines included, as one HTML file",
    )
    _cache_option(c)

    sub.add_parser(
        "demo",
        help="profile live on a GPU, else diagnose a bundled real GPU trace (`nbprof demo -h`)",
        add_help=False,
    )
    return p


def _job_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("multi-rank jobs (a folder of rank files, or an fsspec URL)")
    g.add_argument(
        "--job",
        action="store_true",
        help="analyse the files as one job even where their distributedInfo disagree",
    )
    g.add_argument(
        "--workers",
        metavar="N",
        type=_positive,
        help="read and analyse the ranks in N local processes (default: one per core where "
        "they can be forked, else this process alone; 1: this process)",
    )
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the ranks on this Dask scheduler (tcp://host:8786); needs nbprof[dask]",
    )


def _cache_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="read the trace file itself, not the tables cached from an earlier read "
        "(and cache nothing)",
    )


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    """Run the ``nbprof`` command; returns the exit status."""
    handler = _warnings_to_stderr()
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        if handler is not None:
            logging.getLogger("nbprof").removeHandler(handler)


class _Escaped(logging.Formatter):
    """A warning as Python prints one with no logging set up, its names escaped: a file
    name or a trace string in it cannot start a line of its own or drive the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return plain_text(super().format(record))


def _warnings_to_stderr() -> logging.Handler | None:
    """Where nothing else shows nbprof's warnings (no handler configured: Python's last
    resort would print them raw), a handler that prints them escaped, one line each."""
    log = logging.getLogger("nbprof")
    if log.hasHandlers():
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_Escaped("%(message)s"))
    log.addHandler(handler)
    return handler


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "demo":
        # The demo owns its own options; hand it everything after the word.
        from nbprof.demo import main as demo_main

        try:
            return demo_main(argv[1:])
        except SystemExit as e:  # its argparse: --help, usage errors (already printed)
            return _exit_status(e)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help, --version, usage errors (already printed)
        return _exit_status(e)
    try:
        if args.command == "compare":
            return _compare(
                args.before, args.after, as_json=args.json, output=args.output,
                cache=not args.no_cache,
            )  # fmt: skip
        opts = _JobOptions(args.job or None, args.workers, args.scheduler, not args.no_cache)
        if args.command == "analyze":
            return _analyze(args.trace, as_json=args.json, devices=args.device, opts=opts)
        if args.command == "report":
            return _report(args.trace, args.output, opts=opts)
    except (_BadInput, NbprofError) as e:  # TraceError says "<file>: <reason>" already
        return _fail(str(e))
    except MemoryError as e:
        # Past the reader (which words its own): the analysis or the report ran out.
        where = getattr(args, "trace", None) or args.before
        size = _memory.size_on_disk(where)
        return _fail(f"{where}: {_memory.not_enough(size, _memory.free_bytes(), detail=str(e))}")
    except BrokenPipeError:  # `nbprof analyze x | head`
        return EXIT_OK
    except OSError as e:
        return _fail(f"{e.filename or getattr(args, 'trace', args.command)}: {e.strerror or e}")
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # A bug, not bad input: still one line, with the way to see the traceback.
        if os.environ.get("NBPROF_DEBUG"):
            raise
        logger.debug("internal error", exc_info=True)
        print(
            f"nbprof: internal error: {type(e).__name__}: {e} "
            "(set NBPROF_DEBUG=1 to see the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    raise AssertionError(args.command)  # pragma: no cover - argparse restricts commands


def _exit_status(e: SystemExit) -> int:
    return int(e.code) if isinstance(e.code, int) else EXIT_BAD_INPUT


def _fail(message: str) -> int:
    # File names and trace text can hold terminal control sequences: never echo them.
    print(f"nbprof: error: {plain_text(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


@dataclasses.dataclass(frozen=True)
class _JobOptions:
    job: bool | None = None
    workers: int | None = None
    scheduler: str | None = None
    cache: bool = True


def _load(path: str, opts: _JobOptions = _JobOptions()) -> Profile | Job:
    from nbprof.loading import load

    # The reader words every way a path can be wrong (missing, a broken or looping link,
    # a FIFO, a device).
    return load(
        path, job=opts.job, workers=opts.workers, scheduler=opts.scheduler, cache=opts.cache
    )


def _select(profile: Profile, path: str, wanted: list[str] | None) -> Diagnosis:
    """The diagnosis, limited to the ``--device`` ones (findings about the whole trace stay)."""
    diag = profile.diagnosis
    if not wanted:
        return diag
    keys = {(d.device, f"{d.rank}:{d.device}") for d in diag.devices}
    known = sorted({k for pair in keys for k in pair})
    unknown = [w for w in wanted if w not in known]
    if unknown:
        have = ", ".join(sorted({d.device for d in diag.devices})) or "none"
        raise _BadInput(f"{path}: no device {unknown[0]!r} in this trace (devices: {have})")
    devices = [d for d in diag.devices if d.device in wanted or f"{d.rank}:{d.device}" in wanted]
    ids = {d.device for d in devices}
    findings = [f for f in diag.findings if not f.device or f.device in ids]
    return dataclasses.replace(diag, devices=devices, findings=findings)


def _analyze(
    path: str, *, as_json: bool, devices: list[str] | None, opts: _JobOptions = _JobOptions()
) -> int:
    from nbprof.job import Job

    profile = _load(path, opts)
    if isinstance(profile, Job):
        return _analyze_job(profile, path, as_json=as_json, devices=devices)
    diag = _select(profile, path, devices)
    if as_json:
        _write(_dumps(diag.to_json()))
        return EXIT_OK
    # The text view renders profile.diagnosis; give it the selected one.
    profile.diagnosis = diag  # cached_property: the instance value wins
    _write(profile.text())
    return EXIT_OK


def _analyze_job(job: Job, path: str, *, as_json: bool, devices: list[str] | None) -> int:
    doc = job.to_json()
    if devices:
        keys = {f"{d['rank']}:{d['device']}" for d in doc["devices"]}
        keys |= {str(d["device"]) for d in doc["devices"]}
        unknown = [w for w in devices if w not in keys]
        if unknown:
            have = ", ".join(sorted(k for k in keys if ":" in k)) or "none"
            raise _BadInput(f"{path}: no device {unknown[0]!r} in this job (devices: {have})")
        doc["devices"] = [
            d
            for d in doc["devices"]
            if d["device"] in devices or f"{d['rank']}:{d['device']}" in devices
        ]
        ranks = {d["rank"] for d in doc["devices"]}
        doc["job"]["ranks"] = [r for r in doc["job"]["ranks"] if r["rank"] in ranks]
    if as_json:
        _write(_dumps(doc))
        return EXIT_OK
    if devices:
        for rank in sorted({d["rank"] for d in doc["devices"]}):
            _write(job.rank(rank).text())
        return EXIT_OK
    _write(job.text())
    return EXIT_OK


def _output(option: str | None) -> Path | None:
    """The file ``-o`` names (None: not given). Refused: an empty name (``-o "$OUT"`` with
    OUT unset, which must not mean "the default" and replace the report beside the trace)
    and a name ending in a slash (see :func:`nbprof._files.output_name`)."""
    from nbprof._files import output_name

    if option is None:
        return None
    if not option.strip():
        raise _BadInput(f"-o {option!r}: an empty file name (is the variable empty?)")
    return output_name(option)


def _report(path: str, output: str | None, *, opts: _JobOptions = _JobOptions()) -> int:
    from nbprof._files import check_writable, inputs_of

    src = Path(path)
    # Beside the trace by default, not in whatever folder the command runs in.
    out = _output(output) or src.parent / (_stem(path) + ".html")
    check_writable(out, not_over=inputs_of(src))  # before the load, which may take a while
    replaced = out.exists()
    profile = _load(path, opts)
    profile.to_html(out)
    size = out.stat().st_size
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size} bytes"
    note = ", replacing the previous file" if replaced else ""
    _write(f"wrote {plain_text(out)} ({shown}{note})")
    return EXIT_OK


def _compare(
    before: str, after: str, *, as_json: bool, output: str | None, cache: bool = True
) -> int:
    from nbprof._files import check_writable, inputs_of
    from nbprof.comparison import compare

    out = _output(output)
    if out is not None:  # before either run is read, which may take a while
        check_writable(out, not_over=[*inputs_of(before), *inputs_of(after)])
    for path in (before, after):  # a missing run is said before the other is read
        if not os.path.lexists(path):  # broken links, loops, FIFOs: the reader words them
            raise _BadInput(f"{path}: no such file or folder")

    cmp = compare(before, after, cache=cache)
    if out is not None:
        cmp.to_html(out)
    if as_json:
        _write(_dumps(cmp.to_json()))
    else:
        _write(cmp.text())
    if out is not None:
        size = out.stat().st_size
        shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size} bytes"
        wrote = f"wrote {plain_text(out)} ({shown})"
        # Beside JSON on stdout, the note goes to stderr so the output stays parseable.
        if as_json:
            print(wrote, file=sys.stderr)
        else:
            _write(wrote)
    return EXIT_OK


def _stem(path: str) -> str:
    name = Path(path.rstrip("/\\")).name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _dumps(obj: Any) -> str:
    import orjson

    # NaN becomes null (valid JSON); numpy scalars serialize as numbers.
    opts = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    try:
        text = orjson.dumps(obj, option=opts, default=str).decode()
    except TypeError:
        # A name that is not UTF-8 (a file's, from os.fsdecode): JSON holds text only, so
        # its bytes are written out, as plain_text shows them. An integer orjson cannot
        # write (beyond 64 bits, read from a trace) is written as its digits, in a string.
        text = orjson.dumps(_valid(obj), option=opts, default=str).decode()
    return plain_json(text)


def _valid(obj: Any) -> Any:
    if isinstance(obj, str):
        return valid_text(obj)
    if isinstance(obj, int) and not isinstance(obj, bool) and not -(2**63) <= obj < 2**64:
        return str(obj)
    if isinstance(obj, dict):
        return {_valid(k): _valid(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_valid(v) for v in obj]
    return obj


def _write(text: str) -> None:
    """``text`` on standard output; an OutputError naming it (never the input) when it
    cannot be written (``> /dev/full``, a closed pipe is left to the caller)."""
    try:
        # Every line escaped, whatever view made it: a trace's string cannot reach the
        # terminal as an escape sequence, a bidirectional control or a forged line.
        sys.stdout.write(plain_lines(text if text.endswith("\n") else text + "\n"))
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        raise
    except OSError as e:
        from nbprof._files import write_reason

        _drop_stdout()
        raise OutputError("standard output", write_reason(e)) from None


def _drop_stdout() -> None:
    """Point standard output at /dev/null: what is still buffered would fail again when
    Python flushes it on exit, with a message of its own on stderr."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
