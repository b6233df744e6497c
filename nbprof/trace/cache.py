"""A cache of one trace file's tables, so that opening the file again skips the parse.

Reading a big trace is almost all gunzip, JSON decoding and column building; what comes out
is a few numeric arrays and many repeats of few strings. Once a file is read, its tables are
kept as one NumPy ``.npz`` (uncompressed; no pickles: a text column is stored as codes into
its distinct values, which are one UTF-8 blob and their offsets) in ``$NBPROF_TABLE_CACHE``,
else ``$NBPROF_CACHE_DIR/tables``, else in the user cache folder: one entry per trace file,
named by a hash of its resolved path.

An entry is used only when everything it was built from is unchanged: the resolved path, the
file's size, mtime and ctime (ns) and inode, nbprof's version and the cache format; its arrays
must pass zip's CRC check and fit together (lengths, codes, offsets). Anything else (another
file's entry, a stale one, a truncated or damaged file, an older format) is ignored with a
log line and the trace is read again, which replaces the entry. A file modified less than
:data:`RACY_NS` before it was stat'ed is not cached: a clock tick can hide a same-size rewrite
from its mtime (git's "racily clean" problem).

Nothing here is allowed to fail a load: a cache that cannot be read or written is logged and
the trace is read as if there were none.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from nbprof._files import atomic_output
from nbprof._version import __version__
from nbprof.errors import plain_text
from nbprof.trace.model import TABLES
from nbprof.trace.text import categorical

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)

#: Bumped whenever what is stored, or how, changes: older entries are then rebuilt.
FORMAT = 2  # 2: runtime.wait_on_stream
CACHE_ENV = "NBPROF_CACHE_DIR"
#: The tables' folder itself, when it should be elsewhere than the rest of nbprof's cache.
TABLE_CACHE_ENV = "NBPROF_TABLE_CACHE"
#: A file whose mtime is this close to the moment it was read is not cached (see above).
RACY_NS = 2_000_000_000
#: The cache folder is kept under this many bytes: least recently used entries go first.
MAX_BYTES = 4 << 30
_HEADER = "header"


def cache_dir() -> Path:
    """``$NBPROF_TABLE_CACHE``; else ``$NBPROF_CACHE_DIR/tables``; else ``tables`` in the
    user cache folder for nbprof (beside the downloaded traces of :mod:`nbprof.datasets`)."""
    own = os.environ.get(TABLE_CACHE_ENV)
    if own:
        return Path(own)
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env) / "tables"
    import platformdirs  # light; the same folder pooch gives the downloads (datasets.py)

    return Path(platformdirs.user_cache_dir("nbprof")) / "tables"


@dataclass(frozen=True)
class Key:
    """What an entry was built from: if any of it changes, the entry is stale."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    version: str = __version__
    format: int = FORMAT
    #: When the file was stat'ed (not part of what must match).
    seen_ns: int = field(default=0, compare=False)

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Key | None:
        """The key of the file at ``path`` now; None when it cannot be stat'ed."""
        try:
            resolved = Path(path).resolve()
            st = os.stat(resolved)
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop on older Pythons
            return None
        return cls(
            str(resolved),
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            st.st_ino,
            seen_ns=time.time_ns(),
        )

    def facts(self) -> dict[str, Any]:
        """What an entry records and must match."""
        d = asdict(self)
        del d["seen_ns"]
        return d

    def stat(self) -> tuple[int, int, int, int]:
        """The part of the key that the file system gives."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode)

    def entry(self) -> Path:
        digest = hashlib.blake2b(self.path.encode("utf-8", "surrogatepass"), digest_size=16)
        return cache_dir() / f"{digest.hexdigest()}.npz"


#: The rank-level facts stored beside the tables (see nbprof.trace.reader._Rank).
Info = dict[str, Any]


class _Bad(Exception):
    """An entry that must not be trusted; the message says why."""


def load(key: Key) -> tuple[dict[str, pd.DataFrame], Info] | None:
    """The tables and facts stored for ``key``; None (logged) when there is no usable entry."""
    entry = key.entry()
    try:
        f = open(entry, "rb")
    except FileNotFoundError:
        logger.debug("no cached tables for %s", plain_text(key.path))
        return None
    except OSError as e:
        logger.warning("cannot open the table cache %s (%s); reading the trace", entry, e)
        return None
    try:
        with f:
            got = _read_entry(f, key)
    except _Bad as e:
        logger.info("ignoring the table cache %s: %s; reading the trace again", entry, e)
        return None
    except Exception as e:  # a damaged zip or array can raise nearly anything: never trust it
        logger.warning(
            "ignoring the damaged table cache %s (%s: %s); reading the trace again",
            entry,
            type(e).__name__,
            e,
        )
        return None
    try:
        os.utime(entry)  # when it was last used: eviction removes the least recently used
    except OSError:
        pass
    logger.debug("tables of %s read from the cache %s", plain_text(key.path), entry)
    return got


def _read_entry(f: Any, key: Key) -> tuple[dict[str, pd.DataFrame], Info]:
    with np.load(f, allow_pickle=False) as z:
        if _HEADER not in z.files:
            raise _Bad("not an nbprof table cache")
        header = msgspec.json.decode(z[_HEADER].tobytes())
        if not isinstance(header, dict):
            raise _Bad("not an nbprof table cache")
        if header.get("format") != FORMAT or header.get("key", {}).get("format") != FORMAT:
            raise _Bad(f"cache format {header.get('format')!r}, this nbprof writes {FORMAT}")
        stored = header.get("key")
        if stored != key.facts():
            raise _Bad(_why_stale(stored, key))
        frames = {t: _frame(z, header["tables"][t]) for t in TABLES}
        return frames, header["info"]


def _why_stale(stored: Any, key: Key) -> str:
    if not isinstance(stored, dict):
        return "no key"
    if stored.get("path") != key.path:
        return f"it belongs to another file ({plain_text(str(stored.get('path')))})"
    changed = [k for k, v in key.facts().items() if stored.get(k) != v]
    return "stale: the " + ", ".join(changed) + " changed"


def _frame(z: Any, spec: list[list[Any]]) -> pd.DataFrame:
    cols: dict[str, Any] = {}
    n: int | None = None
    for name, kind, names in spec:
        if kind == "text":
            codes, offsets, blob = (z[a] for a in names)
            col = _text(codes, offsets, blob)
        else:
            col = z[names[0]]
            if col.ndim != 1 or col.dtype.str != kind:
                raise _Bad(f"column {name} is {col.dtype.str}{col.shape}, expected {kind}")
        if n is None:
            n = len(col)
        elif len(col) != n:
            raise _Bad(f"column {name} has {len(col)} rows, expected {n}")
        cols[name] = col
    # The same construction as tables.frame_of: text stays object, numbers are not copied.
    return pd.DataFrame(cols, copy=False)


def _text(codes: np.ndarray, offsets: np.ndarray, blob: np.ndarray) -> pd.Categorical:
    if codes.dtype != np.int32 or offsets.dtype != np.int64 or blob.dtype != np.uint8:
        raise _Bad("a text column has the wrong dtypes")
    if codes.ndim != 1 or offsets.ndim != 1 or blob.ndim != 1 or not len(offsets):
        raise _Bad("a text column has the wrong shape")
    if offsets[0] != 0 or offsets[-1] != len(blob) or (np.diff(offsets) < 0).any():
        raise _Bad("a text column's offsets do not fit its text")
    n = len(offsets) - 1
    if len(codes) and (int(codes.min()) < 0 or int(codes.max()) >= n):
        raise _Bad("a text column's codes point outside its values")
    raw = blob.tobytes()
    ends = offsets.tolist()
    if raw.isascii():
        # One decode, then slices: byte offsets are character offsets in ASCII.
        s = raw.decode("ascii")
        values = [s[a:b] for a, b in itertools.pairwise(ends)]
    else:
        values = [raw[a:b].decode("utf-8", "surrogatepass") for a, b in itertools.pairwise(ends)]
    return categorical(codes, values)


def racy(key: Key) -> bool:
    """Whether the file had changed too recently, when it was stat'ed, for its mtime to
    prove a later change (a rewrite within the same clock tick keeps the same mtime)."""
    return key.seen_ns - key.mtime_ns < RACY_NS


def store(key: Key, frames: dict[str, pd.DataFrame], info: Info) -> None:
    """Write the entry for ``key`` atomically; log, never raise, when that cannot be done."""
    if racy(key):
        logger.debug("not caching %s: it was modified just now", plain_text(key.path))
        return
    now = Key.of(key.path)
    if now is None or now.stat() != key.stat():
        logger.info("not caching %s: it changed while it was read", plain_text(key.path))
        return
    try:
        arrays, header = _encode(frames, info)
    except _Bad as e:
        logger.info("not caching the tables of %s: %s", plain_text(key.path), e)
        return
    header["key"] = key.facts()
    header["format"] = FORMAT
    arrays[_HEADER] = np.frombuffer(msgspec.json.encode(header), np.uint8)
    entry = key.entry()
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        # Not synced to the disk: an entry a crash cut short fails its checks when read,
        # and is made again (fsync took 6 ms of writing a 9 MB entry here, and more on
        # a slow disk).
        with atomic_output(entry, durable=False) as out:
            # numpy's stubs type **kwds as possibly holding its bool allow_pickle keyword.
            np.savez(out, **arrays)  # type: ignore[arg-type]
    except Exception as e:  # a full disk, a read-only home, a bad folder: the load goes on
        logger.warning("could not write the table cache %s (%s)", entry, e)
        return
    logger.debug("cached the tables of %s in %s", plain_text(key.path), entry)
    _evict(entry)


def _encode(frames: dict[str, pd.DataFrame], info: Info) -> tuple[dict[str, np.ndarray], Info]:
    arrays: dict[str, np.ndarray] = {}
    tables: dict[str, list[list[Any]]] = {}
    for t in TABLES:
        f = frames[t]
        if not isinstance(f.index, pd.RangeIndex) or f.index.start != 0 or f.index.step != 1:
            raise _Bad(f"table {t} has an index other than 0..n-1")
        spec: list[list[Any]] = []
        for name in f.columns:
            if not isinstance(name, str):
                raise _Bad(f"table {t} has a column named {name!r}")
            col = (
                f[name].array
                if isinstance(f[name].dtype, pd.CategoricalDtype)
                else f[name].to_numpy()
            )
            if isinstance(col, pd.Categorical):
                names = [f"a{len(arrays)}", f"a{len(arrays) + 1}", f"a{len(arrays) + 2}"]
                arrays.update(zip(names, _encode_text(col, t, name), strict=True))
                spec.append([name, "text", names])
            elif col.dtype.kind in "biuf" and f[name].dtype == col.dtype:
                a = f"a{len(arrays)}"
                arrays[a] = np.ascontiguousarray(col)
                spec.append([name, col.dtype.str, [a]])
            else:
                raise _Bad(f"column {t}.{name} has dtype {f[name].dtype}")
        tables[t] = spec
    # Metadata is JSON from the trace; kept only when it comes back exactly as it went in.
    try:
        again = msgspec.json.decode(msgspec.json.encode(info))
    except (msgspec.EncodeError, msgspec.DecodeError, OverflowError, TypeError) as e:
        raise _Bad(f"its metadata cannot be stored ({e})") from None
    if again != info:
        raise _Bad("its metadata does not survive a round trip through JSON")
    return arrays, {"tables": tables, "info": info}


def _encode_text(col: pd.Categorical, table: str, name: str) -> list[np.ndarray]:
    # A trace's text columns are dictionary-encoded already: their codes and categories.
    codes, uniques = np.asarray(col.codes), col.categories.tolist()
    parts: list[bytes] = []
    for u in uniques:
        if type(u) is not str:
            raise _Bad(f"column {table}.{name} holds {type(u).__name__}, not only text")
        parts.append(u.encode("utf-8", "surrogatepass"))
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    blob = np.frombuffer(b"".join(parts), np.uint8)
    return [codes.astype(np.int32), offsets, blob]


def _evict(keep: Path) -> None:
    """Remove the least recently used entries while the folder is over :data:`MAX_BYTES`."""
    try:
        entries = [(e.stat(), e) for e in keep.parent.glob("*.npz")]
    except OSError:
        return
    total = sum(st.st_size for st, _ in entries)
    for st, e in sorted(entries, key=lambda x: x[0].st_mtime_ns):
        if total <= MAX_BYTES:
            break
        if e == keep:
            continue
        try:
            e.unlink()
            total -= st.st_size
            logger.debug("removed the least recently used table cache %s", e)
        except OSError:
            pass
