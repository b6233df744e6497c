"""``%%gpuprof`` / ``%gpuprof``: profile a cell (or one statement) and show the dashboard.

The body runs in the user namespace the way an unprofiled cell would: IPython transforms
it (so magics and ``!shell`` lines inside still work), assignments land in the namespace
and the value of a final expression is returned, so IPython displays it as the cell's
``Out[n]`` (``;`` silences it, as usual). Frames of this module are hidden from tracebacks
(``__tracebackhide__``) so an error in the body points into the cell.
"""

from __future__ import annotations

import ast
import html
import keyword
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, needs_local_scope
from IPython.display import display

from nbprof._files import check_writable
from nbprof.capture import ALREADY_RUNNING, _profiler_active, profile
from nbprof.comparison import Comparison
from nbprof.errors import NbprofError, NestedProfilerError, OutputError, plain_text
from nbprof.result import Profile
from nbprof.views.gauge import GaugeWidget

_F = TypeVar("_F", bound=Callable[..., Any])

if TYPE_CHECKING:
    # One signature for both decorators whichever IPython is installed: some releases (8.12)
    # leave IPython's own untyped, and mypy rejects a typed fallback beside an untyped one.
    def output_can_be_silenced(magic_func: _F) -> _F: ...
    def no_var_expand(magic_func: _F) -> _F: ...

else:
    try:  # IPython >= 8.12: a trailing ';' in the body silences the displayed value
        from IPython.core.magic import output_can_be_silenced
    except ImportError:  # pragma: no cover - older IPython just displays it

        def output_can_be_silenced(magic_func):
            return magic_func

    try:
        from IPython.core.magic import no_var_expand
    except ImportError:  # pragma: no cover

        def no_var_expand(magic_func):
            return magic_func


if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from nbprof.capture import Capture

logger = logging.getLogger(__name__)

_MAGIC = "gpuprof"


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def _non_negative(text: str) -> int:
    n = int(text)
    if n < 0:
        raise ValueError(text)
    return n


@magics_class
class GpuprofMagics(Magics):
    """The ``gpuprof`` line/cell magic."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument(
        "-o",
        "--out-var",
        metavar="NAME",
        help="Store the resulting nbprof.Profile in this variable (like %%timeit -o).",
    )
    @magic_arguments.argument(
        "--compare",
        metavar="NAME",
        help="Show what changed against the nbprof.Profile stored in NAME (e.g. by an "
        "earlier %%gpuprof -o NAME) instead of the dashboard.",
    )
    @magic_arguments.argument(
        "--trace", metavar="PATH", help="Save the raw Kineto trace here (.json or .json.gz)."
    )
    @magic_arguments.argument(
        "--html", metavar="PATH", help="Save the standalone HTML report here (works offline)."
    )
    @magic_arguments.argument(
        "--no-gauge", action="store_true", help="Do not show the live gauge while running."
    )
    @magic_arguments.argument(
        "--memory", action="store_true", help="Record memory allocations (profile_memory)."
    )
    @magic_arguments.argument("--stack", action="store_true", help="Record Python call stacks.")
    @magic_arguments.argument(
        "--lite",
        action="store_true",
        help="No shapes and no FLOPs: the lowest overhead (no roofline numbers).",
    )
    @magic_arguments.argument(
        "--repeat",
        metavar="N",
        type=_positive,
        help="Run the body --warmup + N times and record the last N runs.",
    )
    @magic_arguments.argument(
        "--warmup",
        metavar="W",
        type=_non_negative,
        default=0,
        help="Unrecorded runs before the --repeat ones (default 0).",
    )
    @magic_arguments.argument("-h", "--help", action="store_true", help="Show this help.")
    @no_var_expand
    @needs_local_scope
    @output_can_be_silenced
    @line_cell_magic
    def gpuprof(self, line: str = "", cell: str | None = None, local_ns: Any = None) -> Any:
        """Profile a cell (``%%gpuprof``) or a statement (``%gpuprof stmt``) on the GPU.

        Runs the code under torch.profiler (CPU + CUDA) with NVML sampling, shows a live
        gauge while it runs, then the dashboard: the timeline and the diagnosis of what the
        GPU was really doing. Without CUDA it profiles the CPU and says so.

        Examples::

            %%gpuprof -o prof --trace run.json.gz
            loss = model(x).sum(); loss.backward()

            %%gpuprof -o after --compare prof
            loss = model(x.half()).sum(); loss.backward()

            %gpuprof --repeat 5 --warmup 2 model(x)
        """
        __tracebackhide__ = True
        parser = self.gpuprof.parser
        if cell is None:
            opts, stmt = _split_line(parser, line)
        else:
            opts, stmt = line, ""
        args = parser.parse_argstring(opts)
        if args.help:
            sys.stdout.write(parser.format_help())
            return None
        if cell is not None and stmt:
            raise UsageError("%%gpuprof takes options on its first line, the code below it")
        code = cell if cell is not None else stmt
        if not code.strip():
            raise UsageError("nothing to profile: %gpuprof STATEMENT, or %%gpuprof above a cell")
        if args.warmup and args.repeat is None:
            raise UsageError("--warmup needs --repeat N (the runs to record)")
        for option in ("trace", "html"):
            # IPython splits magic lines keeping the quotes (arg_split, posix=False).
            path = _unquote(getattr(args, option))
            setattr(args, option, path)
            if path is not None:
                # Up front: the body may run for hours, and its profile must not be lost to
                # an output that could never be written (a folder, /proc, no permission).
                try:
                    check_writable(os.path.expanduser(path))  # a trailing / kept
                except OutputError as e:
                    raise UsageError(f"--{option} {e.path}: {e.reason}") from None
        if args.trace and args.html and _same_place(args.trace, args.html):
            raise UsageError(f"--trace and --html both name {args.html}: give them two files")
        if args.out_var is not None and not _is_variable_name(args.out_var):
            raise UsageError(f"-o {args.out_var}: not a valid variable name")
        # Checked before the body runs: a typo must not cost the user a whole profile.
        args.baseline = self._baseline(args.compare)

        run = self._compile(code, line if cell is not None else None, local_ns)
        return self._profile(run, args)

    def _baseline(self, name: str | None) -> Profile | None:
        """The Profile that ``--compare NAME`` names, or a UsageError saying what is wrong."""
        if name is None:
            return None
        assert self.shell is not None
        if not name.isidentifier():
            raise UsageError(f"--compare {name}: not a valid variable name")
        if name not in self.shell.user_ns:
            raise UsageError(
                f"--compare {name}: no variable {name!r} (store a profile in it first, e.g. "
                f"%%gpuprof -o {name})"
            )
        value = self.shell.user_ns[name]
        if not isinstance(value, Profile):
            raise UsageError(
                f"--compare {name}: {name} is a {type(value).__name__}, not an nbprof.Profile"
            )
        return value

    # -- running the body ---------------------------------------------------------------
    def _compile(
        self, code: str, cell_line: str | None, local_ns: dict[str, Any] | None
    ) -> Callable[[], Any]:
        """Compile the body as IPython would; return a function running it once."""
        shell = self.shell
        assert shell is not None
        transformed = shell.transform_cell(code)
        if cell_line is not None:
            # Line 1 of the visible cell is the %%gpuprof line: keep the body's line numbers
            # those of the cell, so tracebacks point at the line the user sees.
            source = "\n" + transformed
            shown = f"%%{_MAGIC} {cell_line}".rstrip() + "\n" + transformed
        else:
            source = shown = transformed
        # Tracebacks print lines from this cached text (which shows the %%gpuprof line).
        filename = shell.compile.cache(shown, shell.execution_count)
        tree = shell.compile.ast_parse(source, filename=filename)
        tree = shell.transform_ast(tree)
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body.pop().value
        body = shell.compile(tree, filename, "exec")
        # compile() takes an AST as well as text; typeshed's codeop.Compile says text only.
        expr = ast.Expression(last) if last else None
        value = shell.compile(expr, filename, "eval") if expr else None
        glob = shell.user_ns
        loc = local_ns if (local_ns is not None and cell_line is None) else glob

        def run() -> Any:
            __tracebackhide__ = True
            exec(body, glob, loc)
            return eval(value, glob, loc) if value is not None else None

        return run

    def _profile(self, run: Callable[[], Any], args: Any) -> Any:
        __tracebackhide__ = True
        widget, reason = (None, "") if args.no_gauge else _make_gauge()
        try:
            try:
                cap = profile(
                    memory=args.memory,
                    stack=args.stack,
                    lite=args.lite,
                    repeat=args.repeat,
                    warmup=args.warmup,
                    trace_path=Path(args.trace).expanduser() if args.trace else None,
                    gauge=widget,
                )
            except (ImportError, ValueError, NbprofError) as e:
                raise UsageError(str(e)) from None
            if _profiler_active(cap._torch):
                # Refused before anything is shown (e.g. %gpuprof inside a %%gpuprof cell).
                raise UsageError(ALREADY_RUNNING)
            handle = None
            if widget is not None:
                handle = display(widget, display_id=True)
            elif not args.no_gauge:
                line = f"nbprof: no live gauge ({reason})"
                bundle = {"text/plain": line, "text/html": f"<pre>{html.escape(line)}</pre>"}
                handle = display(bundle, raw=True, display_id=True)
            try:
                cap.__enter__()
            except NbprofError as e:
                raise UsageError(str(e)) from None
            try:
                value = _run_all(run, cap, args)
            except BaseException as e:
                # The partial profile first, then the body's own exception and traceback
                # (which a failure to show the profile must not replace).
                try:
                    self._finish(cap, args, handle, display)
                except Exception:
                    logger.exception("could not show the partial profile")
                if isinstance(e, NestedProfilerError):
                    raise UsageError(str(e)) from None
                raise
            self._finish(cap, args, handle, display)
            return value
        finally:
            if widget is not None:
                _close(widget)

    def _finish(self, cap: Capture, args: Any, handle: Any, display: Any) -> None:
        prof: Profile | None = cap.result
        if prof is None:
            return
        if args.out_var:
            assert self.shell is not None
            self.shell.user_ns[args.out_var] = prof
        shown: Any = prof
        if args.baseline is not None and prof.error is None:
            # A partial run (the body raised) is shown as itself: set against a whole run,
            # every difference would be the missing part.
            shown = Comparison(args.baseline, prof)
        if handle is not None:
            # Replace the gauge by the dashboard: the saved notebook keeps one bundle.
            handle.update(shown)
        else:
            display(shown)
        # What could not be written is said in one line each; the profile above stands.
        if cap.save_error:
            _say(f"nbprof: the raw trace was not saved: {cap.save_error}")
        if args.html:
            try:
                prof.to_html(Path(args.html).expanduser())
            except NbprofError as e:
                _say(f"nbprof: the HTML report was not saved: {e}")


def _run_all(run: Callable[[], Any], cap: Capture, args: Any) -> Any:
    """Run the body (``--warmup + --repeat`` times) inside the entered capture; exit it."""
    __tracebackhide__ = True
    value = None
    try:
        for _ in range((args.warmup + args.repeat) if args.repeat is not None else 1):
            value = run()
            if args.repeat is not None:
                cap.step()
    except BaseException:
        cap.__exit__(*sys.exc_info())
        raise
    cap.__exit__(None, None, None)
    return value


def _say(line: str) -> None:
    """One line for the user below the cell (stderr: a notebook shows it, logs keep it)."""
    sys.stderr.write(plain_text(line) + "\n")
    sys.stderr.flush()


def _is_variable_name(name: str) -> bool:
    # `class` or `None` are identifiers too, but assigning to them is a syntax error.
    return name.isidentifier() and not keyword.iskeyword(name)


def _same_place(a: str, b: str) -> bool:
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    try:
        return pa.resolve() == pb.resolve()
    except OSError:
        return pa == pb


def _unquote(value: str | None) -> str | None:
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _make_gauge() -> tuple[Any, str]:
    """The live gauge (not started: the capture drives it), or why there is none."""
    reason = _no_nvml_reason()
    if reason:
        return None, reason
    try:
        return GaugeWidget(), ""
    except Exception as e:  # no ipywidgets, a broken view: profile without it
        logger.warning("no live gauge", exc_info=True)
        return None, str(e) or type(e).__name__


def _close(gauge: Any) -> None:
    try:
        gauge.close()
    except Exception:
        logger.warning("could not close the live gauge", exc_info=True)


def _no_nvml_reason() -> str:
    """Why NVML cannot sample here, when that is known before starting; else ""."""
    try:
        from nbprof.telemetry import get_sampler
        from nbprof.telemetry.nvml import library_reason
    except ImportError as e:
        return f"the NVML sampler is not available: {e}"
    sampler = get_sampler()
    gpus, _, unavailable = sampler.state()
    if unavailable and not gpus:
        return unavailable
    if sys.platform == "darwin":
        return "NVML does not exist on macOS"
    # Not sampled yet in this process: ask the bindings the sampler uses whether they can
    # load the library (they search where this module would not, and a loaded or injected
    # library counts), without nvmlInit, which can take seconds.
    return library_reason(sampler.nvml)


# A shell-like word: quoted parts (which may hold spaces) glued to unquoted ones.
_TOKEN = re.compile(r"""(?:"[^"]*"|'[^']*'|[^\s"'])+""")


def _split_line(parser: Any, line: str) -> tuple[str, str]:
    """Split ``%gpuprof`` 's line into its leading options and the statement after them.

    The statement is kept verbatim (quotes, spacing): only the leading ``-x``/``--xx``
    tokens (and the values of options that take one) are options; ``--`` ends them.
    """
    pos = 0
    expect_value = False
    for m in _TOKEN.finditer(line):
        tok = m.group()
        if expect_value:
            expect_value = False
            pos = m.end()
            continue
        if tok == "--":
            return line[: m.start()], line[m.end() :].strip()
        if not tok.startswith("-") or tok == "-":
            return line[:pos], line[m.start() :].strip()
        name = tok.split("=", 1)[0]
        action = parser._option_string_actions.get(name)
        if action is None:
            # Not one of ours (e.g. `-x` as the start of an expression): code from here.
            return line[:pos], line[m.start() :].strip()
        expect_value = action.nargs != 0 and "=" not in tok
        pos = m.end()
    return line[:pos], ""


def register(ipython: InteractiveShell) -> None:
    """Register ``%gpuprof`` / ``%%gpuprof`` (``%load_ext nbprof`` calls this)."""
    ipython.register_magics(GpuprofMagics)


def unregister(ipython: InteractiveShell) -> None:
    """Remove the magics again (``%unload_ext nbprof``)."""
    # IPython has no public call to remove a magic; the registry is a plain dict.
    manager = ipython.magics_manager
    if manager is None:  # traitlets types it Optional; a shell without one has no magics
        return
    magics = manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop(_MAGIC, None)
