"""Columnar tables from decoded events: one numpy column at a time, no per-event dicts.

Events are sorted into kinds by their category (one dict lookup each), then each table
gathers only its own events' fields and decodes only its own events' ``args``, in one
batch per kind. Columns hold absolute ``ts_ns``; the reader turns them into ``ts`` relative
to the trace's origin once every chunk of the file has been read.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from nbprof.trace import argfields
from nbprof.trace import decode as dec
from nbprof.trace.model import TABLES, empty_columns, empty_table, frame_from_arrays
from nbprof.trace.scan import TEXT_ID, ArgSpans, EventColumns

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)

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


def kept_frames(names: list[str]) -> np.ndarray:
    """Which Python frames are kept (:data:`PYTHON`): each distinct name tested once (a
    stack trace repeats a few thousand names over a hundred thousand frames)."""
    hits = {
        n
        for n in set(names)
        if ("dataloader.py" in n and DATALOADER_FRAME.search(n)) or INPUT_FRAME.search(n)
    }
    if not hits:
        return np.zeros(len(names), dtype=bool)
    return np.fromiter((n in hits for n in names), dtype=bool, count=len(names))


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
_RUNTIME_CAT_OF_NO = np.array([RUNTIME_CAT_NAMES.get(c, c) for c in _CATS], dtype=object)
_CAT_BITS = 5
assert len(_CATS) <= 1 << _CAT_BITS
#: Phases, shifted above the category number so that one small int holds both.
_PHASE_CODE: dict[str, int] = {ph: n << _CAT_BITS for ph, n in _PHASE.items()}


@dataclass
class Sorted:
    """Event indices by kind, plus the flow events, for one file."""

    by_kind: dict[int, np.ndarray]
    flows_start: np.ndarray
    flows_end: np.ndarray
    is_meta: np.ndarray
    skipped_phases: dict[str, int]
    #: Each event's category number (see ``_CATS``).
    cat_no: np.ndarray

    def runtime_cats(self, idx: np.ndarray) -> np.ndarray:
        """The ``runtime.cat`` column of the runtime events ``idx``."""
        return _RUNTIME_CAT_OF_NO[self.cat_no[idx]]


#: The same numbers by the categories' and phases' bytes, for the scanner.
CAT_CODES: dict[bytes, int] = {c.encode(): n for c, n in _CAT_NO.items()}
PHASE_CODES: dict[bytes, int] = {ph.encode(): n for ph, n in _PHASE_CODE.items()}

#: A run of events: decoded structs, or the scanner's columns.
Events = list[dec.AnyEvent] | EventColumns


def sort_events(events: Events) -> Sorted:
    """Which events go to which table (duration events ``ph == "X"`` only)."""
    if isinstance(events, EventColumns):
        codes = events.codes
    else:
        cget, pget = _CAT_NO.get, _PHASE_CODE.get
        # One pass of two dict lookups per event, category and phase packed in one small
        # int: cheaper than factorizing the strings, and no intermediate object arrays.
        codes = np.fromiter([cget(e.cat, 0) + pget(e.ph, 0) for e in events], np.uint8, len(events))
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


def _obj(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


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

    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray  # absolute ns (int64)
    dur: np.ndarray  # µs float64
    args: list[msgspec.Raw] | ArgSpans

    def take(self, pos: np.ndarray) -> Common:
        """These columns at positions ``pos`` (the same as gathering those events anew)."""
        args = self.args
        return Common(
            name=self.name[pos],
            pid=self.pid[pos],
            tid=self.tid[pos],
            ts_ns=self.ts_ns[pos],
            dur=self.dur[pos],
            args=args.take(pos) if isinstance(args, ArgSpans) else [args[i] for i in pos.tolist()],
        )


def common(
    events: Events,
    idx: np.ndarray,
    ts_abs_ns: np.ndarray,
    ids: Ids,
    path: str,
    offset: int = 0,
) -> Common:
    """Shared columns of ``events[idx]``; ``offset`` turns chunk positions into file ones."""
    ts = ts_abs_ns[idx]
    missing = ts == dec.NO_TS
    if missing.any():
        where = offset + int(idx[np.flatnonzero(missing)[0]])
        raise dec.TraceError(path, f"event {where}: duration event has no `ts`")
    if isinstance(events, EventColumns):
        # Scanned: the columns are there already (names interned by the scanner).
        pid, tid = events.pid[idx], events.tid[idx]
        # Text ids (rare) get their codes here, in the order the Python path gives them.
        if events.pid_text and (pid == TEXT_ID).any():
            pid = ids.column(events.ids(events.pid, events.pid_text, idx))
        if events.tid_text and (tid == TEXT_ID).any():
            tid = ids.column(events.ids(events.tid, events.tid_text, idx))
        got = Common(
            name=events.name[idx],
            pid=pid,
            tid=tid,
            ts_ns=ts,
            dur=events.dur[idx],
            args=events.args.take(idx),
        )
    else:
        evs = [events[i] for i in idx.tolist()]
        # Names repeat (the same kernel, the same op, thousands of times): one string each.
        intern = sys.intern
        got = Common(
            name=_obj([intern(e.name) for e in evs]),
            pid=ids.column([e.pid for e in evs]),
            tid=ids.column([e.tid for e in evs]),
            ts_ns=ts,
            # The struct's dur is always a float: no type discovery needed, unlike np.array.
            dur=np.fromiter([e.dur for e in evs], np.float64, len(evs)),
            args=[e.args for e in evs],
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


def _device_col(devs: list[int | str | None], pid: np.ndarray) -> np.ndarray:
    # A device is keyed by args.device when present, else by the event's pid (DESIGN.md).
    keys = [p if d is None else d for d, p in zip(devs, pid.tolist(), strict=True)]
    # A trace names a few devices over many events: one str per device, not one per event
    # (less memory, and a forked decoder's columns pickle each text once).
    texts = {k: str(k) for k in dict.fromkeys(keys)}
    return _obj(list(map(texts.__getitem__, keys)))


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
    """Absolute ns -> µs relative to the origin, exact to the ns before the float step."""
    return (ts_ns - origin_ns).astype(np.float64) / 1000.0


Columns = dict[str, np.ndarray]


class _Structs:
    """:class:`argfields.ArgColumns` of decoded args structs."""

    def __init__(self, args: Sequence[Any]) -> None:
        self.args = args

    def _values(self, attr: str) -> list[Any]:
        return list(map(attrgetter(attr), self.args))

    def num(self, attr: str, dtype: type, missing: float) -> np.ndarray:
        return _num(self._values(attr), dtype, missing)

    def dims(self, attr: str) -> np.ndarray:
        return _dims(self.args, attr)

    def device(self, attr: str, pid: np.ndarray) -> np.ndarray:
        return _device_col(self._values(attr), pid)

    def stream(self, attr: str, tid: np.ndarray, ids: Ids) -> np.ndarray:
        return _stream_col(self._values(attr), tid, ids)

    def memcpy_kind(self, attr: str, kinds: frozenset[str]) -> list[str]:
        return [k if isinstance(k, str) and k in kinds else "" for k in self._values(attr)]

    def raw_texts(self, attr: str) -> np.ndarray:
        return _raw_texts(self._values(attr))


_I, _N = argfields.INT_FIELD, argfields.NUMBER_FIELD
#: The args fields each table reads, and what each may hold to be read by the scanner.
_FIELDS: dict[type[msgspec.Struct], dict[str, Any]] = {
    dec.KernelArgs: argfields.spec_of(
        dec.KernelArgs,
        {
            "device": _I,
            "stream": _I,
            "correlation": _I,
            "registers": _N,
            "shared_mem": _N,
            "blocks_per_sm": _N,
            "occupancy": _N,
            "grid": argfields.DIMS_FIELD,
            "block": argfields.DIMS_FIELD,
        },
    ),
    dec.CopyArgs: argfields.spec_of(
        dec.CopyArgs,
        {"device": _I, "stream": _I, "correlation": _I, "bytes": _N, "kind": argfields.KIND_FIELD},
    ),
    dec.RuntimeArgs: argfields.spec_of(dec.RuntimeArgs, {"correlation": _I, "wait_on_stream": _I}),
    dec.OpArgs: argfields.spec_of(
        dec.OpArgs,
        {
            "external_id": _I,
            "flops": _N,
            "input_dims": argfields.RAW_FIELD,
            "input_types": argfields.RAW_FIELD,
        },
    ),
}


def _args(
    c: Common, kind: type[msgspec.Struct], path: str, idx: np.ndarray
) -> argfields.ArgColumns:
    """The args of ``c``'s events as :class:`argfields.ArgColumns`: read by the scanner
    where it can, else decoded into ``kind`` structs (which words any error)."""
    if isinstance(c.args, ArgSpans) and len(c.args):
        got = argfields.read(c.args, _FIELDS[kind])
        if got is not None:
            return got
    return _Structs(dec.decode_args(c.args, kind, path, idx))


def _gpu_event_columns(c: Common, args: argfields.ArgColumns, ids: Ids) -> Columns:
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
    """Kernel columns (``ts_ns`` absolute; ``rank`` and ``ts`` are added by the reader)."""
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


def _codes(names: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each name's position among the distinct names (in order of first appearance), and
    those names: ``pd.factorize`` of a column of str, for a tenth of its cost here."""
    values = names.tolist()
    uniques = list(dict.fromkeys(values))
    code = {u: i for i, u in enumerate(uniques)}
    return np.fromiter(map(code.__getitem__, values), np.intp, len(values)), uniques


def _parse_memcpy_names(names: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    codes, uniques = _codes(names)
    kinds, srcs, dsts = [], [], []
    for u in uniques:
        m = _MEMCPY_RE.match(str(u))
        k, s, d = (m.group(1), m.group(2), m.group(3)) if m else ("", "", "")
        kinds.append(k if k in _MEMCPY_KINDS else "")
        srcs.append(s if s in _MEMORY_PLACES else "")
        dsts.append(d if d in _MEMORY_PLACES else "")
    return _obj(kinds)[codes], _obj(srcs)[codes], _obj(dsts)[codes]


def copies(c: Common, idx: np.ndarray, ids: Ids, path: str, *, memcpy: bool) -> Columns:
    args = _args(c, dec.CopyArgs, path, idx)
    n = len(c.dur)
    cols: Columns = {
        **_gpu_event_columns(c, args, ids),
        "bytes": args.num("bytes", np.int64, -1),
    }
    if memcpy:
        kind, src, dst = _parse_memcpy_names(c.name)
        # ROCm writes the direction in args.kind; use it where the name gave none.
        arg_kind = args.memcpy_kind("kind", _MEMCPY_KINDS)
        kind = np.where(kind == "", _obj(arg_kind), kind) if n else kind
        cols.update(kind=kind.astype(object), src=src, dst=dst)
    return cols


def runtime(c: Common, idx: np.ndarray, cats: np.ndarray, path: str) -> Columns:
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


def _raw_texts(raws: list[msgspec.Raw]) -> np.ndarray:
    """Raw JSON values as text ("" where absent), one interned string per distinct text.

    Decoded in one call: JSON text never holds a NUL byte (control characters in strings
    are escaped), so NUL separates the values safely.
    """
    if not raws:
        return _obj([])
    text = b"\x00".join(raws).decode("utf-8", "replace")
    # Shapes and dtypes repeat across ops: one string per distinct text.
    return _obj(list(map(sys.intern, text.split("\x00"))))


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
    names = np.asarray(ann["name"], object)
    if not len(names):
        return empty_columns("steps")
    # A trace has few distinct annotation names: each is matched once (as pandas'
    # str.extract would, with a search).
    number: dict[str, int | None] = {}
    for n in dict.fromkeys(names.tolist()):
        m = _STEP_RE.search(n) if isinstance(n, str) else None
        number[n] = int(m.group(1)) if m else None
    got = [number[n] is not None for n in names.tolist()]
    keep = np.flatnonzero(np.array(got, bool) & ~np.asarray(ann["on_gpu"], bool))
    if not len(keep):
        return empty_columns("steps")
    rank = np.asarray(ann["rank"], np.int32)
    ts = np.asarray(ann["ts"], np.float64)
    # lexsort is stable: rows at the same rank and start keep their order.
    order = keep[np.lexsort((ts[keep], rank[keep]))]
    kept = names[order]
    return {
        "rank": rank[order],
        "step": np.array([number[n] for n in kept.tolist()], np.int64),
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
            metric.append(sys.intern(k))
            value.append(float(v))
    at = np.asarray(rows, np.int64)
    return {
        "device": _obj(device),
        "name": c.name[at] if len(at) else _obj([]),
        "ts_ns": c.ts_ns[at] if len(at) else np.zeros(0, np.int64),
        "metric": _obj(metric),
        "value": np.asarray(value, np.float64),
    }


_NOT_COUNTERS = frozenset({"device", "correlation", "External id", "external id", "stream"})


def frame_of(table: str, cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """A frame with the contract's columns first, in order, then any extras. The columns
    are handed over: the frame may hold the arrays themselves."""
    names = tuple(cols)
    order = _column_order(table, names)
    # Text columns stay object, as the contract has them (pandas would otherwise infer
    # its string dtype for them, which the contract cast would then undo).
    return frame_from_arrays(cols if order == names else {c: cols[c] for c in order}, own=True)


@functools.lru_cache(maxsize=256)
def _column_order(table: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The order of a frame of columns ``names``: worked out once per set of names, as
    every file's tables come with the same few (a sixth of a small table's frame)."""
    want = TABLES[table]
    missing = [c for c in want if c not in names]
    if missing:  # pragma: no cover - a programming error, not bad input
        raise KeyError(f"{table}: missing columns {missing}")
    return tuple(c for c in want if c in names) + tuple(c for c in names if c not in want)


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
        return empty_columns("devices")
    got = list(rows.values())

    def col(name: str, dtype: type) -> np.ndarray:
        values = [r[name] for r in got]
        return _obj(values) if dtype is object else np.array(values, dtype)

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


def typed(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Cast a frame's contract columns to the contract's dtypes (after concatenation)."""
    want = _contract_dtypes(table)
    # One look at every dtype: a column lookup per name costs more than the frame's build.
    have = dict(zip(frame.columns, frame.dtypes, strict=True))
    cast = {c: t for c, t in want.items() if have[c] != t}
    # astype copies every column even when nothing changes.
    return frame.astype(cast) if cast else frame


def typed_frame(table: str, cols: Columns) -> pd.DataFrame:
    """``typed(table, frame_of(table, cols))``, the dtypes read off the arrays: a frame's
    ``dtypes`` is a Series made anew, which costs a small table a third of its frame."""
    frame = frame_of(table, cols)
    want = _contract_dtypes(table)
    return frame if all(cols[c].dtype == t for c, t in want.items()) else typed(table, frame)


@functools.cache
def _contract_dtypes(table: str) -> dict[str, Any]:
    return {str(c): t for c, t in empty_table(table).dtypes.items()}


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


def comm_candidates(names: np.ndarray, pattern: re.Pattern[str] | frozenset[str]) -> np.ndarray:
    """Positions of ``names`` that match (tested once per distinct name)."""
    if not len(names):
        return np.zeros(0, np.int64)
    values = names.tolist()
    hits: frozenset[str] | set[str]
    if isinstance(pattern, frozenset):
        hits = pattern.intersection(values)
    else:
        hits = {u for u in set(values) if _searched(pattern, str(u))}
    if not hits:  # the usual case: no name is a collective's
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.fromiter(map(hits.__contains__, values), bool, len(values)))


@functools.lru_cache(maxsize=1 << 14)
def _searched(pattern: re.Pattern[str], name: str) -> bool:
    # Each chunk of a file sees the same few kernel names again, and a search for
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
        return sys.intern(v)
    if isinstance(v, (int, float)):
        return str(v)
    try:
        return sys.intern(msgspec.json.encode(v).decode())
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


def _any_texts(values: list[Any]) -> np.ndarray:
    """:func:`_any_text` of each value; without a call per value when all are text or None."""
    kinds = set(map(type, values))
    if kinds <= {str, _NONE}:
        intern = sys.intern
        return _obj(["" if v is None else intern(v) for v in values])
    return _obj([_any_text(v) for v in values])


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
    dims = _raw_texts([x.input_dims for x in a])
    types = _raw_texts([x.input_types for x in a])
    return {
        "pid": c.pid[at],
        "tid": c.tid[at],
        "name": c.name[at],
        "ts_ns": c.ts_ns[at],
        "dur": c.dur[at],
        "source": _obj([source] * len(a)),
        # A kernel's device as the kernels table keys it: args.device, else its pid.
        "device": _obj(
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
        "input_dims": dims,
        "input_types": types,
    }
