"""Tabulating: events as columns -> the trace's tables, one numpy column at a time.

Events are sorted into kinds by their category (their packed codes), then each table
gathers only its own events' fields and reads only its own events' ``args``, in one batch
per kind. Text columns stay dictionary-encoded (:class:`~nbprof.trace.text.Text`) until
the frames are made, where they become ``Categorical`` s. Columns hold ``ts_ns`` as
written until every piece of a file is read (:class:`Parts`); :func:`finish` then makes
the rank's tables: times relative to its first event, launches linked
(:func:`nbprof.trace.links.link`), rows in time order, steps and devices.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from nbprof.errors import plain_text
from nbprof.trace import accel, links
from nbprof.trace import decode as dec
from nbprof.trace import text as tx
from nbprof.trace.events import TEXT_ID, ArgSpans, EventColumns
from nbprof.trace.model import SCHEMA, TABLES, frame_from_arrays
from nbprof.trace.text import Text

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)

#: A table's columns while it is built: numbers, and text dictionary-encoded.
Columns = dict[str, Any]

# Event kinds. Old Kineto (PyTorch <= 1.9) wrote capitalised categories; newer ones use
# snake_case. Both map to the same kind.
OTHER, KERNEL, MEMCPY, MEMSET, RUNTIME, CPU_OP, ANNOTATION, GPU_ANNOTATION, RANGE = range(9)
#: Python frames (``with_stack=True``): only the input pipeline's are kept, as annotations
#: (a stack trace holds a hundred thousand frames; analysis needs those few): the
#: DataLoader's ``__next__`` and the frames of CPU preprocessing (:data:`INPUT_FRAME`).
PYTHON = 10
CATEGORY_KIND: dict[str, int] = {
    "kernel": KERNEL,
    "Kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "Memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "Memset": MEMSET,
    "cuda_runtime": RUNTIME,
    "Runtime": RUNTIME,
    "cuda_driver": RUNTIME,
    "cuda_sync": RUNTIME,
    "cpu_op": CPU_OP,
    "Operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "gpu_user_annotation": GPU_ANNOTATION,
    "cuda_profiler_range": RANGE,
    "python_function": PYTHON,
}
#: Runtime categories as the ``runtime.cat`` column spells them.
RUNTIME_CAT_NAMES: dict[str, str] = {"Runtime": "cuda_runtime"}
#: Flow-event categories that link a launch to its GPU activity.
FLOW_CATEGORIES: frozenset[str] = frozenset({"ac2g", "async"})

_STEP_RE = re.compile(r"^ProfilerStep#(\d{1,18})$")
_MEMCPY_RE = re.compile(r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")
_MEMCPY_KINDS = frozenset({"HtoD", "DtoH", "DtoD", "HtoH", "PtoP"})
_MEMORY_PLACES = frozenset({"Pageable", "Pinned", "Device"})
#: The Python frame of a DataLoader batch fetch, e.g.
#: ``torch/utils/data/dataloader.py(733): __next__``.
DATALOADER_FRAME = re.compile(r"dataloader\.py\(\d+\): __next__$")
#: Python frames of CPU preprocessing, by the library file they run in: image transforms
#: (torchvision, PIL, OpenCV, albumentations), tokenizers and processors (tokenizers,
#: sentencepiece, transformers' tokenization / image-processing / feature-extraction
#: modules), audio (torchaudio's transforms, librosa), numerical work (numpy, scipy), and
#: torch.utils.data's own collate and fetch code.
INPUT_FRAME = re.compile(
    r"(?:^|/)(?:torchvision/transforms|PIL|cv2|albumentations|tokenizers|sentencepiece|"
    r"transformers/(?:models/\w+/)?(?:tokenization|image_processing|feature_extraction)\w*|"
    r"torchaudio/(?:transforms|functional)|librosa|numpy|scipy|torch/utils/data/_utils)"
    r"[/.][^()]*\(\d+\): "
)


def kept_frame(name: str) -> bool:
    """Whether a Python frame is kept (:data:`PYTHON`); a substring test first, as a stack
    trace's frames are many and its DataLoader frames few."""
    return ("dataloader.py" in name and DATALOADER_FRAME.search(name) is not None) or (
        INPUT_FRAME.search(name) is not None
    )


#: The code of a thread id text that no table row holds (codes given out are -2, -3, ...).
UNSEEN = -(2**62)


@dataclass
class Ids:
    """Thread and process ids as int64, shared across a file so equal text maps equally.

    Kineto writes them as numbers, but old traces write ``"tid": "25738"`` or
    ``"tid": "stream 7"``: numeric text becomes its number, other text a stable negative code.
    """

    codes: dict[str, int] = field(default_factory=dict)

    def column(self, values: Sequence[int | str]) -> np.ndarray:
        return self._column(values, self.one)

    def one(self, v: int | str) -> int:
        return _id_of(v, self._code)

    def known_column(self, values: Sequence[int | str]) -> np.ndarray:
        """As :meth:`column`, but text not seen yet gets ``UNSEEN`` instead of a new code."""
        return self._column(values, self.known)

    def known(self, v: int | str) -> int:
        return _id_of(v, lambda t: self.codes.get(t, UNSEEN))

    @staticmethod
    def _column(values: Sequence[int | str], each: Callable[[int | str], int]) -> np.ndarray:
        try:
            return np.asarray(values, dtype=np.int64)
        except (ValueError, TypeError, OverflowError):
            return np.fromiter(map(each, values), np.int64, len(values))

    def _code(self, text: str) -> int:
        got = self.codes.get(text)
        if got is None:
            got = self.codes[text] = -2 - len(self.codes)
        return got


def _id_of(v: int | str, code: Callable[[str], int]) -> int:
    """An id's number: itself, or its numeric text's value, or ``code`` of its text."""
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else code(str(v))
    t = v.strip()
    if t.lstrip("-").isdigit() and len(t) < 19:
        return int(t)
    return code(t)


FLOW = 9
_KIND_OF_CAT: dict[str, int] = {**CATEGORY_KIND, **dict.fromkeys(FLOW_CATEGORIES, FLOW)}
_X, _S, _F, _M, _B, _E = 1, 2, 3, 4, 5, 6
_PHASE: dict[str, int] = {"X": _X, "s": _S, "f": _F, "M": _M, "B": _B, "E": _E}


#: Every category nbprof reads, numbered from 1 (0 is any other), and each number's kind.
_CATS: tuple[str, ...] = ("", *_KIND_OF_CAT)
_CAT_NO: dict[str, int] = {c: i for i, c in enumerate(_CATS) if i}
_KIND_OF_NO = np.array([OTHER] + [_KIND_OF_CAT[c] for c in _CATS[1:]], np.int8)
#: A runtime call's category by number, as the ``runtime.cat`` column spells it.
_RUNTIME_CAT_OF_NO = [RUNTIME_CAT_NAMES.get(c, c) for c in _CATS]
_CAT_BITS = 5
assert len(_CATS) <= 1 << _CAT_BITS
#: Phases, shifted above the category number so that one small int holds both.
_PHASE_CODE: dict[str, int] = {ph: n << _CAT_BITS for ph, n in _PHASE.items()}


@dataclass
class Sorted:
    """Event indices by kind, plus the flow events, for one run of events."""

    by_kind: dict[int, np.ndarray]
    flows_start: np.ndarray
    flows_end: np.ndarray
    is_meta: np.ndarray
    skipped_phases: dict[str, int]
    #: Each event's category number (see ``_CATS``).
    cat_no: np.ndarray

    def runtime_cats(self, idx: np.ndarray) -> Text:
        """The ``runtime.cat`` column of the runtime events ``idx``."""
        return Text(self.cat_no[idx].astype(np.int32), _RUNTIME_CAT_OF_NO)


#: The category and phase numbers by their text, for the two readers of events.
CAT_CODES: dict[bytes, int] = {c.encode(): n for c, n in _CAT_NO.items()}
PHASE_CODES: dict[bytes, int] = {ph.encode(): n for ph, n in _PHASE_CODE.items()}
CAT_NO: dict[str, int] = _CAT_NO
PHASE_CODE: dict[str, int] = _PHASE_CODE


def sort_events(events: EventColumns) -> Sorted:
    """Which events go to which table (duration events ``ph == "X"`` only)."""
    codes = events.codes
    cat_no = codes & ((1 << _CAT_BITS) - 1)
    phases = codes >> _CAT_BITS
    kinds = _KIND_OF_NO[cat_no]
    is_x = phases == _X
    by_kind = {k: np.flatnonzero(is_x & (kinds == k)) for k in (*range(1, 9), PYTHON)}
    flow = kinds == FLOW
    return Sorted(
        by_kind,
        np.flatnonzero(flow & (phases == _S)),
        np.flatnonzero(flow & (phases == _F)),
        phases == _M,
        {"B": int((phases == _B).sum()), "E": int((phases == _E).sum())},
        cat_no,
    )


def _num(values: Sequence[Any], dtype: type, missing: float | int) -> np.ndarray:
    """A numeric column where ``None`` (key absent) becomes ``missing``."""
    n = len(values)
    absent = values.count(None)
    if absent == n:  # a key this trace never writes (e.g. flops without with_flops)
        return np.full(n, missing, dtype)
    out = None
    if not absent:
        try:
            # The same conversion as np.array's below, without its look at each value's type.
            out = np.fromiter(values, np.float64, n)
        except (TypeError, ValueError, OverflowError):
            out = None
    if out is None:
        # None converts to NaN, which the mask below turns into ``missing`` with the rest.
        out = np.array(values, np.float64)
    # Values no real trace holds (inf, beyond int64) are treated as unknown rather than
    # wrapped around by the cast.
    bad = ~np.isfinite(out) | (np.abs(out) > _I64_SAFE)
    if bad.any():
        out[bad] = missing
    return out.astype(np.int64) if dtype is np.int64 else out


_I64_SAFE = float(2**62)


def _i64(v: int | None) -> int:
    return -1 if v is None or not -(2**62) < v < 2**62 else v


def _dims(args: Sequence[dec.KernelArgs], key: str) -> np.ndarray:
    """Total of a launch dimension (x*y*z); -1 unknown. Vectorised for the usual [x, y, z]."""
    vals = list(map(attrgetter(key), args))
    if vals and type(vals[0]) is list:
        arr = None
        try:
            # Only lists of three give this shape (a scalar or None among them has no len);
            # their items are ints (the struct's type), read in one flat C loop without
            # np.array's look at every list's shape and items.
            if set(map(len, vals)) == {3}:
                flat = np.fromiter(chain.from_iterable(vals), np.int64, 3 * len(vals))
                arr = flat.reshape(-1, 3)
        except (OverflowError, TypeError):
            arr = None
        if arr is not None:
            # Exact in int64 wherever the float product says it cannot overflow; the rare
            # rest goes through Python's unbounded ints.
            small = np.abs(arr.astype(np.float64).prod(axis=1)) < 2.0**61
            out = arr.prod(axis=1)
            for i in np.flatnonzero(~small).tolist():
                out[i] = _product(vals[i])
            return out
    return np.array([_product(v) for v in vals], np.int64)


def _product(v: list[int] | int | None) -> int:
    if v is None:
        return -1
    if isinstance(v, int):
        return v if -(2**62) < v < 2**62 else -1
    if not v:
        return -1
    p = 1
    for x in v:
        p *= x
    return p if -(2**62) < p < 2**62 else -1


@dataclass
class Common:
    """The fields every table reads from its events, as columns."""

    name: Text
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray  # as written (ns), before baseTimeNanoseconds
    dur: np.ndarray  # µs float64
    args: list[msgspec.Raw] | ArgSpans

    def take(self, pos: np.ndarray) -> Common:
        """These columns at positions ``pos`` (the same as gathering those events anew)."""
        args = self.args
        return Common(
            name=self.name.take(pos),
            pid=self.pid[pos],
            tid=self.tid[pos],
            ts_ns=self.ts_ns[pos],
            dur=self.dur[pos],
            args=args.take(pos) if isinstance(args, ArgSpans) else [args[i] for i in pos.tolist()],
        )


def common(events: EventColumns, idx: np.ndarray, ids: Ids, path: str, offset: int) -> Common:
    """Shared columns of ``events[idx]``; ``offset`` turns run positions into file ones."""
    ts = events.ts[idx]
    missing = ts == dec.NO_TS
    if missing.any():
        where = offset + int(idx[np.flatnonzero(missing)[0]])
        raise dec.TraceError(path, f"event {where}: duration event has no `ts`")
    pid, tid = events.pid[idx], events.tid[idx]
    # Text ids (rare) get their codes here, in order of first use.
    if events.pid_text and (pid == TEXT_ID).any():
        pid = ids.column(events.ids("pid", idx))
    if events.tid_text and (tid == TEXT_ID).any():
        tid = ids.column(events.ids("tid", idx))
    args = events.args
    got = Common(
        name=events.name.take(idx),
        pid=pid,
        tid=tid,
        ts_ns=ts,
        dur=events.dur[idx],
        args=args.take(idx) if isinstance(args, ArgSpans) else [args[i] for i in idx.tolist()],
    )
    dur = got.dur
    if (dur < 0).any():
        j = int(np.flatnonzero(dur < 0)[0])
        i = int(idx[j])
        raise dec.TraceError(path, f"event {offset + i}: negative duration ({float(dur[j])})")
    if not np.isfinite(dur).all():
        where = offset + int(idx[np.flatnonzero(~np.isfinite(dur))[0]])
        raise dec.TraceError(path, f"event {where}: duration is not a finite number")
    # The bound timestamps have (see decode): a longer duration is no profiled event, and
    # taken as is it would make a device "100% busy" over a span of centuries.
    if (dur > dec.MAX_TS_US).any():
        j = int(np.flatnonzero(dur > dec.MAX_TS_US)[0])
        i = int(idx[j])
        raise dec.TraceError(
            path,
            f"event {offset + i}: duration out of range ({float(dur[j]):g} µs; "
            f"at most {dec.MAX_TS_US:.0e} µs, about 285 years)",
        )
    return got


def _device_col(devs: list[int | str | None], pid: np.ndarray) -> Text:
    # A device is keyed by args.device when present, else by the event's pid (DESIGN.md).
    keys = [p if d is None else d for d, p in zip(devs, pid.tolist(), strict=True)]
    return Text.of(map(str, keys))


def _stream_col(streams: list[int | str | None], tid: np.ndarray, ids: Ids) -> np.ndarray:
    if streams and set(map(type, streams)) == {int}:
        try:
            got = np.array(streams, np.int64)
        except OverflowError:
            got = None
        if got is not None and ((got > -(2**62)) & (got < 2**62)).all():
            return got
    return _stream_each(streams, tid, ids)


def _stream_each(streams: list[int | str | None], tid: np.ndarray, ids: Ids) -> np.ndarray:
    """:func:`_stream_col` one value at a time: ints, numeric text (any base), other text."""
    out = tid.copy()
    for i, s in enumerate(streams):
        if s is None:
            continue
        if isinstance(s, int):
            out[i] = s if -(2**62) < s < 2**62 else ids.one(str(s))
        else:
            try:
                out[i] = _i64(int(s, 0))
            except ValueError:
                out[i] = ids.one(s)
    return out


def rel_us(ts_ns: np.ndarray, origin_ns: int) -> np.ndarray:
    """ns -> µs relative to the origin, exact to the ns before the float step."""
    return (ts_ns - origin_ns).astype(np.float64) / 1000.0


class _Structs:
    """:class:`accel.ArgColumns` of decoded args structs (the pure path)."""

    def __init__(self, args: Sequence[Any]) -> None:
        self.args = args

    def _values(self, attr: str) -> list[Any]:
        return list(map(attrgetter(attr), self.args))

    def num(self, attr: str, dtype: type, missing: float) -> np.ndarray:
        return _num(self._values(attr), dtype, missing)

    def dims(self, attr: str) -> np.ndarray:
        return _dims(self.args, attr)

    def device(self, attr: str, pid: np.ndarray) -> Text:
        return _device_col(self._values(attr), pid)

    def stream(self, attr: str, tid: np.ndarray, ids: Ids) -> np.ndarray:
        return _stream_col(self._values(attr), tid, ids)

    def memcpy_kind(self, attr: str, kinds: frozenset[str]) -> Text:
        return Text.of(k if isinstance(k, str) and k in kinds else "" for k in self._values(attr))

    def raw_texts(self, attr: str) -> Text:
        return _raw_texts(self._values(attr))


_I, _N = accel.INT_FIELD, accel.NUMBER_FIELD
#: The args fields each table reads, and what each may hold to be read by the accelerator.
_FIELDS: dict[type[msgspec.Struct], dict[str, Any]] = {
    dec.KernelArgs: accel.spec_of(
        dec.KernelArgs,
        {
            "device": _I,
            "stream": _I,
            "correlation": _I,
            "registers": _N,
            "shared_mem": _N,
            "blocks_per_sm": _N,
            "occupancy": _N,
            "grid": accel.DIMS_FIELD,
            "block": accel.DIMS_FIELD,
        },
    ),
    dec.CopyArgs: accel.spec_of(
        dec.CopyArgs,
        {"device": _I, "stream": _I, "correlation": _I, "bytes": _N, "kind": accel.KIND_FIELD},
    ),
    dec.RuntimeArgs: accel.spec_of(dec.RuntimeArgs, {"correlation": _I, "wait_on_stream": _I}),
    dec.OpArgs: accel.spec_of(
        dec.OpArgs,
        {
            "external_id": _I,
            "flops": _N,
            "input_dims": accel.RAW_FIELD,
            "input_types": accel.RAW_FIELD,
        },
    ),
}


def _args(c: Common, kind: type[msgspec.Struct], path: str, idx: np.ndarray) -> accel.ArgColumns:
    """The args of ``c``'s events: read by the accelerator where it can, else decoded into
    ``kind`` structs (which words any error)."""
    if isinstance(c.args, ArgSpans) and len(c.args):
        got = accel.fields(c.args, _FIELDS[kind])
        if got is not None:
            return got
    return _Structs(dec.decode_args(c.args, kind, path, idx))


def _gpu_event_columns(c: Common, args: accel.ArgColumns, ids: Ids) -> Columns:
    """The columns every GPU event table starts with (kernels, memcpys, memsets)."""
    return {
        "_pid": c.pid,
        "_tid": c.tid,
        "device": args.device("device", c.pid),
        "stream": args.stream("stream", c.tid, ids),
        "name": c.name,
        "ts_ns": c.ts_ns,
        "dur": c.dur,
        "correlation": args.num("correlation", np.int64, -1),
    }


def kernels(c: Common, idx: np.ndarray, ids: Ids, path: str) -> Columns:
    """Kernel columns (``ts_ns`` as written; ``rank`` and ``ts`` come in :func:`finish`)."""
    args = _args(c, dec.KernelArgs, path, idx)
    return {
        **_gpu_event_columns(c, args, ids),
        "grid": args.dims("grid"),
        "block": args.dims("block"),
        "registers": args.num("registers", np.int64, -1),
        "shared_mem": args.num("shared_mem", np.int64, -1),
        "occupancy": args.num("occupancy", np.float64, np.nan),
        "blocks_per_sm": args.num("blocks_per_sm", np.float64, np.nan),
    }


def _parse_memcpy_names(names: Text) -> tuple[Text, Text, Text]:
    """(kind, src, dst) of each copy, from its name, read once per distinct name."""

    def part(i: int, known: frozenset[str]) -> Callable[[str], str]:
        def one(name: str) -> str:
            m = _MEMCPY_RE.match(name)
            got = m.group(i) if m else ""
            return got if got in known else ""

        return one

    return (
        names.map(part(1, _MEMCPY_KINDS)),
        names.map(part(2, _MEMORY_PLACES)),
        names.map(part(3, _MEMORY_PLACES)),
    )


def copies(c: Common, idx: np.ndarray, ids: Ids, path: str, *, memcpy: bool) -> Columns:
    args = _args(c, dec.CopyArgs, path, idx)
    cols: Columns = {
        **_gpu_event_columns(c, args, ids),
        "bytes": args.num("bytes", np.int64, -1),
    }
    if memcpy:
        kind, src, dst = _parse_memcpy_names(c.name)
        # ROCm writes the direction in args.kind; use it where the name gave none.
        arg_kind = args.memcpy_kind("kind", _MEMCPY_KINDS)
        if len(kind) and "" in kind.values and any(arg_kind.values):
            kinds = kind.texts()
            given = arg_kind.texts()
            kind = Text.of(k or a for k, a in zip(kinds, given, strict=True))
        cols.update(kind=kind, src=src, dst=dst)
    return cols


def runtime(c: Common, idx: np.ndarray, cats: Text, path: str) -> Columns:
    """Runtime call columns; ``cats`` already spelled as the column wants (see Sorted)."""
    args = _args(c, dec.RuntimeArgs, path, idx)
    return {
        "pid": c.pid,
        "tid": c.tid,
        "name": c.name,
        "ts_ns": c.ts_ns,
        "dur": c.dur,
        "correlation": args.num("correlation", np.int64, -1),
        "cat": cats,
        "wait_on_stream": args.num("wait_on_stream", np.int64, -1),
    }


def _raw_texts(raws: list[msgspec.Raw]) -> Text:
    """Raw JSON values as text ("" where absent), dictionary-encoded.

    Decoded in one call: JSON text never holds a NUL byte (control characters in strings
    are escaped), so NUL separates the values safely.
    """
    if not raws:
        return Text(np.zeros(0, np.int32), [])
    return Text.of(b"\x00".join(raws).decode("utf-8", "replace").split("\x00"))


def cpu_ops(c: Common, idx: np.ndarray, path: str) -> Columns:
    args = _args(c, dec.OpArgs, path, idx)
    return {
        "pid": c.pid,
        "tid": c.tid,
        "name": c.name,
        "ts_ns": c.ts_ns,
        "dur": c.dur,
        "external_id": args.num("external_id", np.int64, -1),
        "flops": args.num("flops", np.float64, np.nan),
        "input_dims": args.raw_texts("input_dims"),
        "input_types": args.raw_texts("input_types"),
    }


def annotation_columns(c: Common, on_gpu: np.ndarray) -> Columns:
    return {
        "pid": c.pid,
        "tid": c.tid,
        "name": c.name,
        "ts_ns": c.ts_ns,
        "dur": c.dur,
        "on_gpu": on_gpu.astype(bool),
    }


def steps(ann: Columns) -> Columns:
    """ProfilerStep#N annotations on the CPU side, every one kept (the last, partial, too)."""
    names: Text = ann["name"]
    if not len(names):
        return _empty_columns("steps")
    # Each distinct annotation name is matched once (as pandas' str.extract would, with a
    # search).
    found = [_STEP_RE.search(n) for n in names.values]
    number = np.array([int(m.group(1)) if m else -1 for m in found], np.int64)
    is_step = np.array([m is not None for m in found], bool)
    keep = np.flatnonzero(is_step[names.codes] & ~np.asarray(ann["on_gpu"], bool))
    if not len(keep):
        return _empty_columns("steps")
    rank = np.asarray(ann["rank"], np.int32)
    ts = np.asarray(ann["ts"], np.float64)
    # lexsort is stable: rows at the same rank and start keep their order.
    order = keep[np.lexsort((ts[keep], rank[keep]))]
    kept = names.take(order)
    return {
        "rank": rank[order],
        "step": number[kept.codes],
        "name": kept,
        "ts": ts[order],
        "dur": np.asarray(ann["dur"], np.float64)[order],
    }


def counters(c: Common, idx: np.ndarray, path: str) -> Columns:
    """Per-kernel hardware counters: each numeric arg of a ``cuda_profiler_range`` event."""
    args = dec.decode_args(c.args, dict[str, Any], path, idx)  # type: ignore[type-var]
    rows: list[int] = []
    device, metric, value = [], [], []
    dev = [str(p) for p in c.pid.tolist()]
    for i, a in enumerate(args):
        if not isinstance(a, dict):
            continue
        d = a.get("device")
        for k, v in a.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or k in _NOT_COUNTERS:
                continue
            rows.append(i)
            device.append(dev[i] if d is None else str(d))
            metric.append(k)
            value.append(float(v))
    at = np.asarray(rows, np.int64)
    return {
        "device": Text.of(device),
        "name": c.name.take(at),
        "ts_ns": c.ts_ns[at] if len(at) else np.zeros(0, np.int64),
        "metric": Text.of(metric),
        "value": np.asarray(value, np.float64),
    }


_NOT_COUNTERS = frozenset({"device", "correlation", "External id", "external id", "stream"})


def vendor_of(name: str) -> str:
    """The GPU vendor, from the device name only (no guessing from anything else)."""
    n = name.lower()
    if any(w in n for w in ("nvidia", "tesla", "geforce", "quadro", "rtx")):
        return "nvidia"
    if any(w in n for w in ("amd", "radeon", "instinct")):
        return "amd"
    return "unknown"


def devices(props: list[dec.DeviceProps], seen: Sequence[str], rank: int) -> Columns:
    """One row per device in ``deviceProperties``, plus one per device seen only in events."""
    rows: dict[str, dict[str, Any]] = {}
    for p in props:
        key = str(p.id)
        vendor = vendor_of(p.name)
        cc = ""
        # Compute capability is an NVIDIA notion; a ROCm trace's "computeMajor" is the gfx
        # generation, so it is not reported as one.
        if vendor == "nvidia" and p.computeMajor is not None and p.computeMinor is not None:
            cc = f"{p.computeMajor}.{p.computeMinor}"
        rows[key] = {
            "rank": rank,
            "device": key,
            "name": p.name,
            "vendor": vendor,
            "sm_count": _i64(p.numSms),
            "compute_capability": cc,
            "total_memory": _i64(p.totalGlobalMem),
            "max_threads_per_sm": _i64(p.maxThreadsPerMultiprocessor),
        }
    for key in seen:
        if key not in rows:
            rows[key] = {
                "rank": rank, "device": key, "name": "", "vendor": "unknown", "sm_count": -1,
                "compute_capability": "", "total_memory": -1, "max_threads_per_sm": -1,
            }  # fmt: skip
    if not rows:
        return _empty_columns("devices")
    got = list(rows.values())

    def col(name: str, dtype: type) -> Any:
        values = [r[name] for r in got]
        return Text.of(values) if dtype is object else np.array(values, dtype)

    return {
        "rank": col("rank", np.int32),
        "device": col("device", object),
        "name": col("name", object),
        "vendor": col("vendor", object),
        "sm_count": col("sm_count", np.int64),
        "compute_capability": col("compute_capability", object),
        "total_memory": col("total_memory", np.int64),
        "max_threads_per_sm": col("max_threads_per_sm", np.int64),
    }


# -- collectives: what the trace says about each collective call -------------------------

#: Kernel names that may be collectives and so may carry PyTorch's collective metadata.
COMM_KERNEL = re.compile(
    r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|send_?recv|multimem",
    re.IGNORECASE,
)
#: Host records of a collective call: ``record_param_comms`` (every PyTorch collective
#: goes through it) and the ``nccl:all_reduce``-style annotations of the process group.
COMM_OP_NAMES = frozenset({"record_param_comms"})
COMM_ANNOTATION = re.compile(r"^(?:nccl|rccl|gloo|ucc|mpi|xccl|hccl):\w")


def comm_candidates(names: Text, pattern: re.Pattern[str] | frozenset[str]) -> np.ndarray:
    """Positions of ``names`` that match (tested once per distinct name)."""
    if isinstance(pattern, frozenset):
        hit = names.hits(pattern.__contains__)
    else:
        hit = names.hits(lambda u: _searched(pattern, u))
    return np.flatnonzero(hit)


@functools.lru_cache(maxsize=1 << 14)
def _searched(pattern: re.Pattern[str], name: str) -> bool:
    # Each piece of a file sees the same few kernel names again, and a search for
    # COMM_KERNEL's many alternatives over a long templated kernel name is not cheap.
    return bool(pattern.search(name))


def _any_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return -1
    try:
        n = int(v)
    except (ValueError, OverflowError):
        return -1
    return n if -(2**62) < n < 2**62 else -1


def _any_text(v: Any) -> str:
    if v is None or isinstance(v, bool):
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return str(v)
    try:
        return msgspec.json.encode(v).decode()
    except (TypeError, msgspec.EncodeError):  # pragma: no cover - decoded JSON re-encodes
        return ""


_NONE = type(None)


def _any_ints(values: list[Any]) -> np.ndarray:
    """:func:`_any_int` of each value; in one numpy step when they are all ints or None."""
    kinds = set(map(type, values))
    if kinds <= {int, _NONE}:  # bool is a type of its own here, and takes the slow way
        try:
            out = np.array([-1 if v is None else v for v in values], np.int64)
        except OverflowError:
            out = None
        if out is not None:
            out[(out <= -(2**62)) | (out >= 2**62)] = -1
            return out
    return np.array([_any_int(v) for v in values], np.int64)


def _any_texts(values: list[Any]) -> Text:
    """:func:`_any_text` of each value, dictionary-encoded."""
    kinds = set(map(type, values))
    if kinds <= {str, _NONE}:
        return Text.of("" if v is None else v for v in values)
    return Text.of(map(_any_text, values))


def comms(c: Common, idx: np.ndarray, source: str, path: str) -> Columns:
    """Collective-call rows of ``source`` ("kernel", "op", "annotation"); kernels without
    any collective metadata are left out (their host records describe them)."""
    args = dec.decode_args(c.args, dec.CommArgs, path, idx)
    keep = np.ones(len(args), bool)
    if source == "kernel":
        keep = np.array(
            [
                a.collective is not None or a.in_nelems is not None or a.pg_name is not None
                for a in args
            ],
            bool,
        )
    at = np.flatnonzero(keep)
    a = [args[i] for i in at.tolist()]
    return {
        "pid": c.pid[at],
        "tid": c.tid[at],
        "name": c.name.take(at),
        "ts_ns": c.ts_ns[at],
        "dur": c.dur[at],
        "source": Text.repeat(source, len(a)),
        # A kernel's device as the kernels table keys it: args.device, else its pid.
        "device": Text.of(
            [
                _any_text(x.device) if x.device is not None else str(p)
                for x, p in zip(a, c.pid[at].tolist(), strict=True)
            ]
            if source == "kernel"
            else [""] * len(a)
        ),
        "correlation": _any_ints([x.correlation for x in a]),
        "collective": _any_texts([x.collective for x in a]),
        "pg": _any_texts([x.pg_name if x.pg_name is not None else x.pg_id for x in a]),
        "pg_ranks": _any_texts([x.pg_ranks for x in a]),
        "group_size": _any_ints([x.group_size for x in a]),
        "seq": _any_ints([x.seq for x in a]),
        "in_nelems": _any_ints([x.in_nelems for x in a]),
        "out_nelems": _any_ints([x.out_nelems for x in a]),
        "dtype": _any_texts([x.dtype for x in a]),
        "input_dims": _raw_texts([x.input_dims for x in a]),
        "input_types": _raw_texts([x.input_types for x in a]),
    }


# -- a file's events, piece by piece, into a rank's tables --------------------------------

_STEP_PREFIX = "ProfilerStep#"
_GPU = ("kernels", "memcpy", "memset")
_TIMED = (*_GPU, "runtime", "cpu_ops", "annotations", "counters", "comms")


@dataclass
class _Flows:
    """One run's flow events (starts or ends): ids as read (``TEXT_ID`` where text, the
    text beside), times as written."""

    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray
    id: np.ndarray
    texts: dict[str, dict[int, str]]


@dataclass
class Parts:
    """A file's tables as they are gathered, run by run (joined by :func:`finish`)."""

    parts: dict[str, list[Columns]] = field(default_factory=dict)
    #: The earliest time of a timed event, and the latest of any event (ns, as written).
    first_ns: int | None = None
    latest_ns: int | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    #: Per run, its flow starts and ends: they are read only where correlation ids are
    #: missing, which is known once every run is.
    flows: list[tuple[_Flows, _Flows]] = field(default_factory=list)
    events: int = 0

    def add(self, table: str, cols: Columns) -> None:
        self.parts.setdefault(table, []).append(cols)

    def get(self, table: str) -> Columns:
        """The table's columns, its runs' parts given up (so that the tables made from
        the columns do not sit beside them)."""
        return _concat(self.parts.pop(table, []))

    def any_missing_correlation(self) -> bool:
        return any(
            bool((p["correlation"] < 0).any())
            for t in (*_GPU, "runtime")
            for p in self.parts.get(t, [])
        )


def _concat(parts: list[Columns]) -> Columns:
    """Runs' columns joined into one set ({} for none; a single run is not copied)."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    return {
        k: tx.concat([p[k] for p in parts])
        if isinstance(parts[0][k], Text)
        else np.concatenate([p[k] for p in parts])
        for k in parts[0]
    }


def _take(col: Any, rows: np.ndarray) -> Any:
    return col.take(rows) if isinstance(col, Text) else col[rows]


def tabulate(parts: Parts, events: EventColumns, offset: int, ids: Ids, path: str) -> None:
    """Add the tables' rows of ``events`` (events ``offset ..`` of the file) to ``parts``."""
    s = sort_events(events)
    ts = events.ts
    has = ts != dec.NO_TS
    usable = has & ~s.is_meta
    if usable.any():
        m = int(ts[usable].min())
        parts.first_ns = m if parts.first_ns is None else min(parts.first_ns, m)
    if has.any():
        m = int(ts[has].max())
        parts.latest_ns = m if parts.latest_ns is None else max(parts.latest_ns, m)
    for ph, n in s.skipped_phases.items():
        parts.skipped[ph] = parts.skipped.get(ph, 0) + n
    parts.events += len(events)

    def com(idx: np.ndarray) -> Common:
        return common(events, idx, ids, path, offset)

    k = s.by_kind
    kern = com(k[KERNEL])
    parts.add("kernels", kernels(kern, offset + k[KERNEL], ids, path))
    parts.add("memcpy", copies(com(k[MEMCPY]), offset + k[MEMCPY], ids, path, memcpy=True))
    parts.add("memset", copies(com(k[MEMSET]), offset + k[MEMSET], ids, path, memcpy=False))
    ir = k[RUNTIME]
    parts.add("runtime", runtime(com(ir), offset + ir, s.runtime_cats(ir), path))

    # "ProfilerStep#N" written as an op (old Kineto) is an annotation, as in new ones.
    op_idx = k[CPU_OP]
    step_like = events.name.take(op_idx).hits(lambda n: n.startswith(_STEP_PREFIX))
    ops = op_idx[~step_like]
    op_com = com(ops)
    parts.add("cpu_ops", cpu_ops(op_com, offset + ops, path))
    py = k[PYTHON]
    # Each distinct name tested once: a stack trace repeats a few thousand names.
    fetch = events.name.take(py).hits(kept_frame)
    ann_idx = np.concatenate([k[ANNOTATION], k[GPU_ANNOTATION], op_idx[step_like], py[fetch]])
    on_gpu = np.zeros(len(ann_idx), bool)
    n_cpu = len(k[ANNOTATION])
    on_gpu[n_cpu : n_cpu + len(k[GPU_ANNOTATION])] = True
    ann = com(ann_idx)
    parts.add("annotations", annotation_columns(ann, on_gpu))
    parts.add("counters", counters(com(k[RANGE]), offset + k[RANGE], path))
    # The CPU annotations come first among the annotations' rows.
    cpu_ann = ann.take(np.arange(n_cpu))
    # Collective-call records: candidates by name, then their args. Each source comes as
    # its rows' shared columns (already built for its own table) and their positions.
    for source, (c, idx), pattern in (
        ("kernel", (kern, k[KERNEL]), COMM_KERNEL),
        ("op", (op_com, ops), COMM_OP_NAMES),
        ("annotation", (cpu_ann, k[ANNOTATION]), COMM_ANNOTATION),
    ):
        pos = comm_candidates(c.name, pattern)
        # Added even when empty: every run gives every table its columns.
        parts.add("comms", comms(c.take(pos), offset + idx[pos], source, path))
    parts.flows.append((_flows(events, s.flows_start), _flows(events, s.flows_end)))


def _flows(events: EventColumns, idx: np.ndarray) -> _Flows:
    texts = {}
    for w in ("pid", "tid", "id"):
        given: dict[int, str] = getattr(events, f"{w}_text")
        if given and len(idx):
            # The flows' rows among the events that have their id as text (idx ascends).
            rows = np.fromiter(given, np.int64, len(given))
            at = np.minimum(np.searchsorted(idx, rows), len(idx) - 1)
            hit = idx[at] == rows
            if hit.any():
                texts[w] = {int(at[k]): given[int(rows[k])] for k in np.flatnonzero(hit)}
    return _Flows(events.pid[idx], events.tid[idx], events.ts[idx], events.id[idx], texts)


#: Timestamps at or above this many ns are wall-clock (after 2001), not relative.
_EPOCH_NS = 10**18


@dataclass
class RankTables:
    """One file's tables (times relative to ``first_ns``, its earliest event), with what
    the file says of itself."""

    tables: dict[str, Columns]
    first_ns: int
    wall_clock: bool
    event_count: int
    metadata: dict[str, Any]
    notes: list[str]


def finish(
    parts: Parts,
    top: dec.Top,
    ids: Ids,
    rank: int,
    path: str,
    step: Callable[[str], None],
) -> RankTables:
    """The rank's tables from the columns its events were gathered into. Times were
    gathered as written: ``baseTimeNanoseconds`` moves only the first time (the tables'
    times are relative to it)."""
    if parts.first_ns is None:
        raise dec.TraceError(path, "trace holds no timed events (only metadata)")
    shift = top.base_ns or 0
    if shift and parts.latest_ns is not None and parts.latest_ns > np.iinfo(np.int64).max - shift:
        raise dec.TraceError(
            path, "timestamps out of range (past year 2262 with baseTimeNanoseconds)"
        )
    first = parts.first_ns + shift
    wall = top.base_ns is not None or first >= _EPOCH_NS
    notes = list(top.notes)
    for ph, n in parts.skipped.items():
        if n:
            notes.append(f"{n} begin/end ('{ph}') events ignored: only complete events are read")
    missing = parts.any_missing_correlation()
    flows, parts.flows = parts.flows, []
    cols = {t: parts.get(t) for t in _TIMED}
    if missing:
        filled = links.correlate_by_flows(cols, _flow_columns(flows, ids))
        if filled:
            notes.append(
                f"{filled} events linked to their launch by flow events (no correlation ids)"
            )
    del flows
    for c in cols.values():
        c["ts"] = rel_us(c.pop("ts_ns"), parts.first_ns)
        c.pop("_pid", None)
        c.pop("_tid", None)
        c["rank"] = np.full(len(c["ts"]), rank, np.int32)
    step("tables")
    links.link(cols["kernels"], cols["memcpy"], cols["memset"], cols["runtime"], cols["cpu_ops"])
    step("links")
    for t in (*_GPU, "runtime", "annotations", "counters", "comms"):
        c = cols[t]
        ts = c["ts"]
        if len(ts) > 1 and not bool((ts[1:] >= ts[:-1]).all()):
            order = np.argsort(ts, kind="stable")
            cols[t] = {k: _take(v, order) for k, v in c.items()}
    tables: dict[str, Columns] = dict(cols)
    tables["steps"] = steps(cols["annotations"])
    seen: list[str] = []
    for t in _GPU:
        seen.extend(_firsts(cols[t]["device"]))
    tables["devices"] = devices(top.device_props, list(dict.fromkeys(seen)), rank)
    for p in top.device_props:
        if p.numSms is not None and p.numSms <= 0:
            notes.append(
                f"deviceProperties says device {plain_text(p.id)} has {p.numSms} SMs: its "
                "SM count is unknown, so SM efficiency is not computed"
            )
    step("frames")
    return RankTables(tables, first, wall, parts.events, dict(top.metadata), notes)


def _firsts(t: Text) -> list[str]:
    """The values ``t`` uses, in order of first appearance."""
    if not len(t):
        return []
    _, first = np.unique(t.codes, return_index=True)
    used = t.codes[np.sort(first)]
    return [t.values[c] for c in used.tolist()]


def _flow_columns(flows: list[tuple[_Flows, _Flows]], ids: Ids) -> tuple[Columns, Columns]:
    """The flow events' columns (starts, ends). Thread ids written as text are looked up in
    the tables' ``ids`` without adding to it, so the tables' codes do not depend on the
    flows; text never seen in the tables matches nothing there. Flow ids written as text
    get codes of their own, in order of first appearance."""
    flow_ids = Ids()
    out: dict[str, list[Columns]] = {"start": [], "end": []}
    for run in flows:
        for name, f in zip(("start", "end"), run, strict=True):
            if not len(f.id):
                continue
            pid, tid, fid = f.pid, f.tid, f.id
            if "pid" in f.texts:
                pid = _known(pid, f.texts["pid"], ids)
            if "tid" in f.texts:
                tid = _known(tid, f.texts["tid"], ids)
            if "id" in f.texts:
                values: list[int | str] = fid.tolist()
                for j, t in f.texts["id"].items():
                    values[j] = t
                fid = flow_ids.column(values)
            out[name].append({"pid": pid, "tid": tid, "ts_ns": f.ts_ns, "id": fid})
    return _concat(out["start"]), _concat(out["end"])


def _known(column: np.ndarray, texts: dict[int, str], ids: Ids) -> np.ndarray:
    out = column.copy()
    for j, t in texts.items():
        out[j] = ids.known(t)
    return out


# -- frames ------------------------------------------------------------------------------

_BY_NAME = {t.name: t for t in SCHEMA}


def _empty_columns(table: str) -> Columns:
    return {
        c.name: Text(np.zeros(0, np.int32), []) if c.dtype == "category" else np.empty(0, c.dtype)
        for c in _BY_NAME[table].columns
    }


def frame_of(table: str, cols: Columns) -> pd.DataFrame:
    """A frame with the contract's columns first, in order, then any extras: text as
    ``Categorical`` s, numbers as the contract types them."""
    order = _column_order(table, tuple(cols))
    want = _BY_NAME[table].dtypes
    arrays: dict[str, Any] = {}
    for c in order:
        v = cols[c]
        if isinstance(v, Text):
            arrays[c] = v.categorical()
        elif isinstance(v, pd.Categorical):
            arrays[c] = v
        else:
            t = want.get(c)
            arrays[c] = v.astype(t) if t is not None and t != "category" and v.dtype != t else v
    return frame_from_arrays(arrays, own=True)


@functools.lru_cache(maxsize=256)
def _column_order(table: str, names: tuple[str, ...]) -> tuple[str, ...]:
    want = TABLES[table]
    missing = [c for c in want if c not in names]
    if missing:  # pragma: no cover - a programming error, not bad input
        raise KeyError(f"{table}: missing columns {missing}")
    return tuple(c for c in want if c in names) + tuple(c for c in names if c not in want)


def columns_of(frame: pd.DataFrame) -> Columns:
    """A frame's columns as :func:`frame_of` takes them (a table read from the cache)."""
    out: Columns = {}
    for c in frame.columns:
        v = frame[c].array
        if isinstance(v, pd.Categorical):
            out[str(c)] = Text(np.asarray(v.codes, np.int32), v.categories.tolist())
        else:
            out[str(c)] = frame[c].to_numpy()
    return out


#: One rank's columns of a table, the shift of its times (µs) onto the job's origin, and of
#: its ``op_index`` onto the joined ``cpu_ops``.
RankPart = tuple[Columns, float, int]


def joined(table: str, parts: list[RankPart]) -> pd.DataFrame:
    """Ranks' rows of one table, one after another, shifted (see :data:`RankPart`)."""
    names = list(parts[0][0])
    if any(list(p) != names for p, _, _ in parts):
        # Ranks whose columns differ (from the cache of another version): pandas aligns them.
        frames = [_shifted(frame_of(table, p), shift, offset) for p, shift, offset in parts]
        aligned = pd.concat(frames, ignore_index=True)
        for c in aligned.columns:
            # pandas joins Categoricals of different categories as objects: united instead.
            cats = [f[c].array for f in frames if c in f]
            if len(cats) == len(frames) and all(isinstance(a, pd.Categorical) for a in cats):
                aligned[c] = tx.union(cats)
        return aligned
    out: Columns = {}
    for c in names:
        pieces = [p[c] for p, _, _ in parts]
        if isinstance(pieces[0], Text):
            out[c] = tx.concat(pieces)
            continue
        if c in ("ts", "launch_ts"):
            pieces = [a + s if s else a for a, (_, s, _) in zip(pieces, parts, strict=True)]
        elif c == "op_index":
            pieces = [
                np.where(a >= 0, a + offset, -1) if offset else a
                for a, (_, _, offset) in zip(pieces, parts, strict=True)
            ]
        out[c] = np.concatenate(pieces)
    return frame_of(table, out)


def _shifted(frame: pd.DataFrame, shift: float, op_offset: int) -> pd.DataFrame:
    frame = frame.copy(deep=False)
    if shift:
        for col in ("ts", "launch_ts"):
            if col in frame:
                frame[col] = frame[col] + shift
    if "op_index" in frame and op_offset:
        idx = frame["op_index"].to_numpy()
        frame["op_index"] = np.where(idx >= 0, idx + op_offset, -1)
    return frame
