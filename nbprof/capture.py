"""Run code under ``torch.profiler`` (plus the NVML sampler) and return a :class:`Profile`.

The live capture exports the Kineto trace to a file and reads it back with
:func:`nbprof.trace.read`, so a live run and a saved trace go through the same reader and
give the same numbers. Whatever happens in the profiled code (an exception, Ctrl-C), the
profiler, the sampler and the gauge are stopped before control returns.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from nbprof._files import atomic_output, check_writable
from nbprof.errors import NbprofError, NestedProfilerError, OutputError, TraceError

if TYPE_CHECKING:
    from nbprof.result import Profile
    from nbprof.telemetry.model import Samples

logger = logging.getLogger(__name__)

NO_GPU_NOTE = (
    "No GPU: torch.cuda.is_available() is False, so only the CPU was profiled "
    "(no kernels, no GPU utilization)."
)
ALREADY_RUNNING = (
    "a torch profiler is already running (nested %gpuprof or an open "
    "torch.profiler.profile); stop it first"
)


NESTED_PROFILER = (
    "a torch profiler cannot start inside %%gpuprof / nbprof.profile(): torch runs one "
    "profiling session per process, and the inner one would end nbprof's (exporting it "
    "then crashes the process, pytorch/pytorch#155146). Remove the inner "
    "torch.profiler.profile() / torch.autograd.profiler.profile(), or profile without nbprof"
)
HIJACKED = (
    "Something in the profiled code ended nbprof's profiling session (a torch profiler of "
    "its own, or torch.autograd.profiler.emit_nvtx/emit_itt): no trace was recorded."
)


class _Startable(Protocol):
    def start(self) -> Any: ...
    def stop(self) -> Any: ...


def _import_torch() -> Any:
    # Kineto prints its own lines to stderr (profiler_start/stop, "gpuGetDeviceCount failed"
    # on a machine without a GPU) into the user's cell. It reads this variable once, when
    # the first profiler starts in the process; nbprof reports what matters in the
    # profile's notes. A value the user set wins. See pytorch/pytorch#83383.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    try:
        import torch
        import torch.profiler
    except ImportError as e:
        raise ImportError(
            "nbprof.profile() needs PyTorch to capture a run (pip install torch); "
            f"reading saved traces with nbprof.load() works without it. ({e})"
        ) from e
    return torch


def _profiler_active(torch: Any) -> bool:
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)
    except AttributeError:  # older torch keeps the flag only in C++
        return bool(torch._C._autograd._profiler_enabled())


def _ended_by_another(prof: Any, torch: Any) -> bool:
    """Whether ``prof``'s session started, has not stopped by its own doing, and yet no
    profiler is active any more (a schedule that finished its cycle stops on its own, and
    one still in warm-up never started: neither counts)."""
    session = getattr(prof, "profiler", None)
    started = getattr(session, "profiling_start_time_ns", 0) or 0
    stopped = getattr(session, "kineto_results", None) is not None
    return started > 0 and not stopped and not _profiler_active(torch)


class _NestedGuard:
    """While installed, a torch profiler other than ``own()`` refuses to start.

    torch has one profiling session per process: a second profiler started inside it
    silently takes it over, its exit ends it, and exporting the first then segfaults
    (pytorch/pytorch#155146). Both ``torch.profiler.profile`` and
    ``torch.autograd.profiler.profile`` set a session up through
    ``torch.autograd.profiler.profile._prepare_trace``; refusing there leaves nbprof's
    session untouched, so the run still ends with a (partial) profile.
    """

    def __init__(self, torch: Any, own: Any) -> None:
        self._cls = getattr(getattr(torch.autograd, "profiler", None), "profile", None)
        self._orig = getattr(self._cls, "__dict__", {}).get("_prepare_trace")
        self._own = own

    def install(self) -> None:
        if self._orig is None or self._cls is None:  # another torch layout: the end check holds
            return
        orig, own = self._orig, self._own

        def _prepare_trace(prof: Any, *args: Any, **kwargs: Any) -> Any:
            if prof is not own():
                raise NestedProfilerError(NESTED_PROFILER)
            return orig(prof, *args, **kwargs)

        self._cls._prepare_trace = _prepare_trace

    def remove(self) -> None:
        if self._orig is not None and self._cls is not None:
            self._cls._prepare_trace = self._orig


class Capture:
    """A profiling run in progress; after the ``with`` block, :attr:`result` holds the Profile.

    >>> with nbprof.profile() as run:
    ...     model(x)
    >>> run.result.show()      # or simply ``run`` as a cell's last line

    The same object is also filled in when the block raised: :attr:`result` is then the
    partial profile and ``result.error`` the exception (which still propagates).
    """

    def __init__(
        self,
        *,
        memory: bool = False,
        stack: bool = False,
        lite: bool = False,
        repeat: int | None = None,
        warmup: int = 0,
        trace_path: str | os.PathLike[str] | None = None,
        sample: bool = True,
        gauge: _Startable | None = None,
    ) -> None:
        if repeat is not None and repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        if trace_path is not None:
            # Before the run, not after it: a path that cannot be written would cost the
            # trace of a run that may have taken hours. Missing folders are made.
            try:
                Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise OutputError(
                    str(trace_path), f"could not make its folder ({e.strerror})"
                ) from None
            check_writable(trace_path)
        if warmup < 0:
            raise ValueError(f"warmup must be 0 or more, got {warmup}")
        if warmup and repeat is None:
            raise ValueError("warmup needs repeat (the number of runs to record)")
        self._torch = _import_torch()
        self.memory = memory
        self.stack = stack
        self.lite = lite
        self.repeat = repeat
        self.warmup = warmup
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self.sample = sample
        #: The profile, once the ``with`` block has exited (partial if it raised).
        self.result: Profile | None = None
        self._gauge = gauge
        self._prof: Any = None  # while running
        self._finished: Any = None  # the stopped profiler, to export from
        self._sub: Any = None
        self._cuda = False
        self._steps = 0
        self._start_ns = 0
        self._end_ns = 0
        self._notes: list[str] = []
        self._used = False
        self._guard = _NestedGuard(self._torch, self._own_session)
        #: Why the raw trace could not be kept at ``trace_path`` ("" when it was).
        self.save_error = ""

    # -- the context manager ------------------------------------------------------------
    def __enter__(self) -> Capture:
        if self._used:
            raise NbprofError("a profiling run can be used once; call nbprof.profile() again")
        self._used = True
        torch = self._torch
        if _profiler_active(torch):
            raise NbprofError(ALREADY_RUNNING)
        self._cuda = bool(torch.cuda.is_available())
        if not self._cuda:
            self._notes.append(NO_GPU_NOTE)
        try:
            self._start_sampler()
            if self._gauge is not None:
                self._gauge.start()
            self._prof = self._make_profiler()
            self._sync()
            self._start_ns = time.time_ns()
            self._guard.install()
            self._prof.start()
        except BaseException:
            # Undo what started; a profiler that never started may refuse to stop, and that
            # must not replace the reason it did not start.
            try:
                self._stop_all()
            except Exception:
                logger.warning("cleanup after a failed start", exc_info=True)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        sync_error: BaseException | None = None
        try:
            # Synchronize first so the kernels the body queued are in the trace. A failing
            # device (the body's asynchronous CUDA error, surfacing here) must not keep the
            # profiler running, nor cost the partial profile.
            self._sync()
        except Exception as e:
            sync_error = e
        finally:
            self._end_ns = time.time_ns()
            samples = self._stop_all()
        error = exc if exc is not None else sync_error
        if isinstance(error, KeyboardInterrupt):
            self._notes.append("Interrupted (KeyboardInterrupt): the profile is partial.")
        elif error is not None:
            self._notes.append(
                f"The profiled code raised {type(error).__name__}: the profile is partial."
            )
        try:
            self.result = self._build(samples, error)
        except Exception:
            if error is None:
                raise
            # Never mask the user's own exception with a failure to read the partial trace.
            logger.warning("could not build the partial profile", exc_info=True)
        if sync_error is not None and exc is None:
            raise sync_error

    def step(self) -> None:
        """Mark the end of one iteration (``ProfilerStep#N`` in the trace; drives ``repeat``)."""
        if self._prof is None:
            raise NbprofError("step() is only meaningful inside the with block")
        self._steps += 1
        self._prof.step()

    # -- display ------------------------------------------------------------------------
    def show(self) -> None:
        """Display the dashboard of :attr:`result`."""
        self._require().show()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.result is None:
            return {"text/plain": repr(self)}
        return self.result._repr_mimebundle_(include, exclude)

    def __repr__(self) -> str:
        state = "running" if self._prof is not None else ("done" if self.result else "new")
        return f"<nbprof profiling run ({state})>"

    def _require(self) -> Profile:
        if self.result is None:
            raise NbprofError("no profile yet: use it after the `with nbprof.profile()` block")
        return self.result

    # -- internals ----------------------------------------------------------------------
    def _own_session(self) -> Any:
        """The torch autograd profiler behind this run's profiler (None before it exists)."""
        return getattr(self._prof, "profiler", None)

    def _make_profiler(self) -> Any:
        tp = self._torch.profiler
        activities = [tp.ProfilerActivity.CPU]
        if self._cuda:
            activities.append(tp.ProfilerActivity.CUDA)
        schedule = None
        if self.repeat is not None:
            with warnings.catch_warnings():
                # torch warns that warmup=0 "can skew results"; with repeat the user chose it.
                warnings.simplefilter("ignore", UserWarning)
                schedule = tp.schedule(wait=0, warmup=self.warmup, active=self.repeat, repeat=1)
        return tp.profile(
            activities=activities,
            schedule=schedule,
            record_shapes=not self.lite,
            with_flops=not self.lite,
            profile_memory=self.memory,
            with_stack=self.stack,
        )

    def _sync(self) -> None:
        if self._cuda:
            self._torch.cuda.synchronize()

    def _start_sampler(self) -> None:
        if not self.sample:
            return
        try:
            from nbprof.telemetry import subscribe
        except ImportError as e:
            self._notes.append(f"No NVML samples: the sampler is not available ({e}).")
            return
        try:
            self._sub = subscribe()
        except Exception as e:  # no NVML library, no driver: the trace still stands alone
            logger.info("NVML sampler unavailable: %s", e)
            self._notes.append(f"No NVML samples: {e}")

    def _stop_all(self) -> Samples | None:
        """Stop profiler, gauge and sampler, each even if another fails; return the samples."""
        samples = None
        try:
            self._guard.remove()
            if self._prof is not None:
                prof, self._prof = self._prof, None
                if _ended_by_another(prof, self._torch):
                    # Stopping or exporting it now would crash the process
                    # (pytorch/pytorch#155146). Keep the run, without its trace.
                    self._notes.append(HIJACKED)
                else:
                    try:
                        prof.stop()
                    except RuntimeError as e:
                        # torch 2.2 records no start time to tell an ended session by; its
                        # stop() then refuses ("Can't disable Kineto profiler when it's not
                        # running"). Same case: keep the run, without its trace.
                        if _profiler_active(self._torch):
                            raise
                        logger.info("the profiler had already stopped: %s", e)
                        self._notes.append(HIJACKED)
                    else:
                        self._finished = prof
        finally:
            try:
                if self._gauge is not None:
                    self._gauge.stop()
            finally:
                if self._sub is not None:
                    sub, self._sub = self._sub, None
                    try:
                        # Closed first: the thread has then settled (and said why, when
                        # NVML is missing); a closed subscription keeps what it saw.
                        sub.close()
                        samples = sub.samples(since_ns=self._start_ns or None)
                    except Exception:
                        logger.warning("could not read the NVML samples", exc_info=True)
        return samples

    def _build(self, samples: Samples | None, exc: BaseException | None) -> Profile:
        from nbprof.result import Profile
        from nbprof.trace import read
        from nbprof.trace.model import Trace

        if samples is not None:
            if self._end_ns and len(samples.frame):
                samples.frame = samples.frame[samples.frame["time_ns"] <= self._end_ns]
            if samples.unavailable:
                self._notes.append(f"No NVML samples: {samples.unavailable}")
            elif self._cuda:
                self._match_devices(samples)
        prof = self._finished
        if self.repeat is not None:
            runs = self.warmup + self.repeat
            done = self._steps
            if done < runs:
                self._notes.append(
                    f"Only {done} of {runs} runs completed ({self.warmup} warm-up, "
                    f"{self.repeat} recorded)."
                )
            else:
                self._notes.append(
                    f"Recorded the last {self.repeat} of {runs} runs ({self.warmup} warm-up)."
                )
        tmp = Path(tempfile.mkdtemp(prefix="nbprof-"))
        try:
            raw = tmp / "trace.json"
            trace: Trace | None = None
            if prof is not None and prof.profiler is not None:
                prof.export_chrome_trace(str(raw))
                if not self.lite:
                    _add_flops(prof, raw)
            if raw.exists():
                path = self._keep(raw) if self.trace_path is not None else raw
                try:
                    trace = read(path, progress=None)
                except TraceError as e:
                    # Code that ran no torch op, or a run stopped in its warm-up, leaves a
                    # trace of metadata only: an empty profile that says so, not a failure.
                    logger.info("captured trace holds nothing: %s", e)
                    self._notes.append(f"The profiler recorded no events ({e.reason}).")
            elif HIJACKED not in self._notes:
                self._notes.append("The profiler recorded no events (stopped before recording).")
            saved = self.trace_path is not None and not self.save_error
            if trace is None:
                source = str(self.trace_path) if saved else "live capture"
                trace = Trace(source=source, event_count=0, origin_ns=None)
            elif not saved:
                trace.source = "live capture"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return Profile(trace, samples, notes=self._notes, error=exc)

    def _match_devices(self, samples: Samples) -> None:
        """Record which NVML GPU each CUDA device is (by UUID), so the analysis credits the
        traced GPU's samples and not those of whatever GPU shares its index."""
        from nbprof.telemetry.devices import cuda_devices_of, map_cuda_devices

        try:
            cuda = cuda_devices_of(self._torch)
        except Exception as e:  # a failed device after an asynchronous CUDA error
            logger.warning("could not read the CUDA devices' UUIDs", exc_info=True)
            self._notes.append(f"NVML samples not matched to CUDA devices: {e}")
            return
        samples.cuda_devices = map_cuda_devices(
            cuda,
            samples.gpus,
            os.environ.get("CUDA_VISIBLE_DEVICES"),
            os.environ.get("CUDA_DEVICE_ORDER"),
        )
        for device, match in samples.cuda_devices.items():
            if match.get("gpu") is None or match.get("mig"):
                self._notes.append(
                    f"NVML samples not used for CUDA device {device}: {match['why']}"
                )

    def _keep(self, raw: Path) -> Path:
        """Save the raw trace at ``trace_path`` (gzipped when it ends in .gz); the path to
        read it from: the saved copy, or ``raw`` when saving failed (said in the notes)."""
        dest = self.trace_path
        assert dest is not None
        try:
            with atomic_output(dest) as out:
                if dest.name.endswith(".gz"):
                    with (
                        open(raw, "rb") as src,
                        gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as gz,
                    ):
                        shutil.copyfileobj(src, gz, 1 << 20)
                else:
                    with open(raw, "rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
        except OutputError as e:
            # The profile still stands on the temporary copy; only the saving failed.
            self.save_error = str(e)
            self._notes.append(f"The raw trace could not be saved: {e}.")
            logger.warning("could not save the raw trace: %s", e)
            return raw
        logger.info("saved the raw trace to %s", dest)
        return dest


def _add_flops(prof: Any, raw: Path) -> None:
    """Write the FLOPs torch computed (``with_flops``) into the exported trace's op args.

    torch 2.x computes them (``FunctionEvent.flops``) but its Chrome-trace export leaves
    them out, and the analysis reads ``args.flops`` from the trace, as it does in saved
    traces that have it. An op is matched by name and ``External id`` (the event's id).
    """
    import orjson

    try:
        flops = _flops_by_op(prof)
    except Exception:  # FLOPs are an extra: never lose the trace over them
        logger.warning("could not read the FLOPs torch computed", exc_info=True)
        return
    if not flops:
        return
    data = orjson.loads(raw.read_bytes())
    added = 0
    for ev in data.get("traceEvents", ()):
        args = ev.get("args")
        if ev.get("cat") != "cpu_op" or not isinstance(args, dict) or "flops" in args:
            continue
        op: Any = (ev.get("name"), args.get("External id"))  # any JSON: most match no op
        n = flops.get(op)
        if n:
            args["flops"] = n
            added += 1
    logger.debug("added FLOPs to %d ops", added)
    raw.write_bytes(orjson.dumps(data))


def _flops_by_op(prof: Any) -> dict[tuple[str, int], int]:
    """(op name, External id) -> FLOPs, for every op torch computed FLOPs for."""
    try:
        # The raw Kineto events: ~40x faster than prof.events(), which builds the whole
        # FunctionEvent tree (25k ops: 0.12 s against 4.8 s). Their correlation id is
        # what FunctionEvent.id and the trace's "External id" hold.
        events = prof.profiler.kineto_results.events()
        return {(e.name(), int(e.correlation_id())): int(e.flops()) for e in events if e.flops()}
    except AttributeError:  # a torch without these accessors: the public, slower path
        return {(e.name, int(e.id)): int(e.flops) for e in prof.events() if e.flops}


def profile(
    *,
    memory: bool = False,
    stack: bool = False,
    lite: bool = False,
    repeat: int | None = None,
    warmup: int = 0,
    trace_path: str | os.PathLike[str] | None = None,
    sample: bool = True,
    gauge: _Startable | None = None,
) -> Capture:
    """Profile the code in a ``with`` block; the run's :class:`~nbprof.Profile` is ``.result``.

    ``memory``: record allocations (``profile_memory``). ``stack``: record Python stacks.
    ``lite``: no shapes and no FLOPs, for the lowest overhead. ``repeat``/``warmup``: the
    caller runs the body ``warmup + repeat`` times calling :meth:`Capture.step` after each;
    the last ``repeat`` are recorded. ``trace_path``: keep the raw Kineto trace there
    (gzipped when it ends in ``.gz``). ``sample``: record NVML samples alongside.
    ``gauge``: a live gauge (anything with ``start()``/``stop()``) run for the duration.

    CUDA is synchronized before and after. Without CUDA the CPU is profiled and the
    profile's notes say there was no GPU. Raises ImportError when torch is missing.
    """
    return Capture(
        memory=memory,
        stack=stack,
        lite=lite,
        repeat=repeat,
        warmup=warmup,
        trace_path=trace_path,
        sample=sample,
        gauge=gauge,
    )
