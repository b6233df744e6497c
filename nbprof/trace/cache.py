"""A cache of one trace file's tables, so that opening the file again skips the parse.

Reading a big trace is almost all gunzip, JSON decoding and column building; what comes out
is a few numeric arrays and many repeats of few strings. Once a file is read, its tables are
kept as one uncompressed zip of NumPy arrays (no pickles: a text column is stored as codes
into its distinct values, which are one UTF-8 blob and their offsets) in
``$NBPROF_TABLE_CACHE``, else ``$NBPROF_CACHE_DIR/tables``, else in the user cache folder:
one entry per trace file, named ``nbprof-tables-<hash of its path>.npz``.

The folder may hold other files: nbprof reads, writes, replaces and evicts only its own
entries (their names, and the marker that opens each entry: its first member) and the
temporary files of its own writes (named for the process writing them: those left by a
writer that was killed are removed, and count towards the size limit until then). The
entries and temporary files of the format before (named by the hash alone) are nbprof's
too, and are removed once each is known for one: they are never read again.
A folder that cannot be made or written is said once, not once per trace or rank.

An entry is read with the guards a trace is read with: a regular file only (a FIFO, a
device or a symbolic link at an entry's name is not read, and is replaced), no larger than
the memory that is free, no compressed member, each array's size checked against its
member before anything is allocated. It is used only when everything it was built from is
unchanged: the resolved path, the file's size, mtime and ctime (ns) and inode, nbprof's
version and the cache format; its arrays must pass zip's CRC check, hold every column of
the declared tables (:data:`nbprof.trace.model.SCHEMA`) with its declared dtype, and fit
together (lengths, codes, offsets). Anything else (another file's entry, a stale one, a
forged or damaged one, an older format) is ignored with one log line and the trace is read
again, which replaces the entry. A file modified less than :data:`RACY_NS` before it was
stat'ed is not cached: a clock tick can hide a same-size rewrite from its mtime (git's
"racily clean" problem).

Nothing here is allowed to fail a load: a cache that cannot be read or written is logged and
the trace is read as if there were none.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import logging
import os
import re
import stat
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec
import numpy as np

from nbprof import _memory
from nbprof._files import STALE_TEMP_S, atomic_output, env_folder, is_stale_temp, temp_target
from nbprof._version import __version__
from nbprof.errors import OutputError, plain_text, valid_text
from nbprof.trace.model import SCHEMA, TABLES, TEXT, Table
from nbprof.trace.text import categorical

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)

#: Bumped whenever what is stored, or how, changes: older entries are then rebuilt.
#: 2: runtime.wait_on_stream; 3: entries namespaced, the marker their first member.
FORMAT = 3
CACHE_ENV = "NBPROF_CACHE_DIR"
#: The tables' folder itself, when it should be elsewhere than the rest of nbprof's cache.
TABLE_CACHE_ENV = "NBPROF_TABLE_CACHE"
#: A file whose mtime is this close to the moment it was read is not cached (see above).
RACY_NS = 2_000_000_000
#: The cache folder is kept under this many bytes: least recently used entries go first.
MAX_BYTES = 4 << 30
#: An entry's first member, and the array of its facts: the marker that makes a file with
#: an entry's name one of nbprof's.
_HEADER = "nbprof_tables_header"
_PREFIX = "nbprof-tables-"
_ENTRY = re.compile(_PREFIX + r"[0-9a-f]{32}\.npz")
#: An entry as nbprof wrote them before entries were namespaced (formats 1 and 2: the hash
#: alone, its header the last member), and the temporary file of one: never read again, removed.
_LEGACY = re.compile(r"[0-9a-f]{32}\.npz")
_LEGACY_TEMP = re.compile(r"\.[0-9a-f]{32}\.npz\.[0-9a-f]{8}\.tmp")
_LEGACY_HEADER = "header.npy"
_LEGACY_FORMATS = (1, 2)
#: The zip local header of an entry's first member: signature, 22 bytes, name length.
_LOCAL = b"PK\x03\x04"
_MARKER_NAME = (_HEADER + ".npy").encode()


def cache_dir() -> Path | None:
    """``$NBPROF_TABLE_CACHE``; else ``$NBPROF_CACHE_DIR/tables``; else ``tables`` in the
    user cache folder for nbprof (beside the downloaded traces of :mod:`nbprof.datasets`).

    ``~`` in either is the home folder. A value that is blank or not an absolute path is
    refused, in one warning per process, and the cache is off (None): it would otherwise
    make a folder named "~" or " " wherever the command runs."""
    for var, tail in ((TABLE_CACHE_ENV, ""), (CACHE_ENV, "tables")):
        raw = os.environ.get(var)
        if raw is None:
            continue
        folder = env_folder(var, raw, "the table cache is off")
        if folder is None:
            return None
        return folder / tail if tail else folder
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
        """What an entry records and must match (as JSON: a path that is not UTF-8 is
        recorded with its bytes written out; the entry's name is its exact bytes' hash)."""
        d = asdict(self)
        del d["seen_ns"]
        d["path"] = valid_text(self.path)
        return d

    def stat(self) -> tuple[int, int, int, int]:
        """The part of the key that the file system gives."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode)

    def entry(self) -> Path | None:
        """Where this file's entry is kept; None while the cache is off."""
        folder = cache_dir()
        if folder is None:
            return None
        digest = hashlib.blake2b(os.fsencode(self.path), digest_size=16)
        return folder / f"{_PREFIX}{digest.hexdigest()}.npz"


#: The rank-level facts stored beside the tables (see nbprof.trace.reader._Rank).
Info = dict[str, Any]


class _Bad(Exception):
    """An entry that must not be trusted; the message says why."""


def _ignoring(level: int, entry: Path, why: Exception) -> None:
    """Say that an entry is passed over for ``why`` and the trace read again."""
    logger.log(
        level,
        "ignoring the table cache %s: %s; reading the trace again",
        plain_text(entry),
        plain_text(why),
    )


def load(key: Key) -> tuple[dict[str, pd.DataFrame], Info] | None:
    """The tables and facts stored for ``key``; None (logged) when there is no usable entry."""
    entry = key.entry()
    if entry is None:
        return None
    try:
        f, size = _open_entry(entry)
    except FileNotFoundError:
        logger.debug("no cached tables for %s", plain_text(key.path))
        return None
    except _Bad as e:
        _ignoring(logging.WARNING, entry, e)
        return None
    except OSError as e:
        _folder_trouble(entry.parent, f"cannot open {plain_text(entry.name)} in it", e)
        return None
    try:
        with f:
            got = _read_entry(f, size, key)
    except _Stale as e:
        _ignoring(logging.INFO, entry, e)
        return None
    except _Bad as e:
        _ignoring(logging.WARNING, entry, e)
        return None
    except Exception as e:  # a damaged zip or array can raise nearly anything: never trust it
        logger.warning(
            "ignoring the damaged table cache %s (%s: %s); reading the trace again",
            plain_text(entry),
            type(e).__name__,
            plain_text(e),
        )
        return None
    try:
        os.utime(entry, follow_symlinks=False)  # when it was last used: eviction goes by it
    except (OSError, NotImplementedError):
        pass
    logger.debug("tables of %s read from the cache %s", plain_text(key.path), plain_text(entry))
    return got


class _Stale(_Bad):
    """An entry that was right once: another file's, or one made before the file changed."""


def _open_entry(entry: Path) -> tuple[BinaryIO, int]:
    """The entry, opened as a trace is: never following a link, never waiting on a FIFO,
    only a regular file no larger than the memory that is free."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(entry, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW on a symbolic link
            raise _Bad("it is a symbolic link, not an entry nbprof wrote") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Bad("it is not a regular file")
        limit = _entry_limit()
        if st.st_size > limit:
            raise _Bad(
                f"it is {_memory.gb(st.st_size)}, more than an entry may be here "
                f"({_memory.gb(limit)})"
            )
        os.set_blocking(fd, True)
        return open(fd, "rb", closefd=True), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _entry_limit() -> int:
    """The largest entry read: the folder's own limit, and half the memory that is free (an
    entry is read whole, with no inflation: its arrays are stored uncompressed)."""
    free = _memory.free_bytes()
    return MAX_BYTES if free is None else min(MAX_BYTES, free // 2)


def _read_entry(f: BinaryIO, size: int, key: Key) -> tuple[dict[str, pd.DataFrame], Info]:
    with zipfile.ZipFile(f) as z:
        members = _members(z, size)
        header = msgspec.json.decode(_array(z, members, _HEADER, "|u1").tobytes())
        if not isinstance(header, dict):
            raise _Bad("not an nbprof table cache")
        if header.get("format") != FORMAT or not isinstance(header.get("key"), dict):
            raise _Stale(f"cache format {header.get('format')!r}, this nbprof writes {FORMAT}")
        stored = header["key"]
        if stored != key.facts():
            raise _Stale(_why_stale(stored, key))
        tables, info = header.get("tables"), header.get("info")
        if not isinstance(tables, dict) or not isinstance(info, dict):
            raise _Bad("its header lacks the tables or the facts")
        frames = {t.name: _frame(z, members, t, tables.get(t.name)) for t in SCHEMA}
        return frames, info


def _members(z: zipfile.ZipFile, size: int) -> dict[str, zipfile.ZipInfo]:
    """The entry's members by name, checked before any is read: the marker first, every one
    stored uncompressed, together no larger than the file (a zip can claim anything)."""
    infos = z.infolist()
    if not infos or infos[0].filename != _HEADER + ".npy":
        raise _Bad("not an nbprof table cache")
    total = 0
    for i in infos:
        if i.compress_type != zipfile.ZIP_STORED or i.file_size != i.compress_size:
            raise _Bad("it holds compressed data (nbprof stores none)")
        total += i.file_size
    if total > size:
        raise _Bad("its members claim more bytes than the file holds")
    return {i.filename: i for i in infos}


def _array(z: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], name: str, kind: str) -> Any:
    """Member ``name`` as a 1-D array of dtype ``kind`` (its ``dtype.str``), allocated only
    once its header's length and dtype agree with the member's own size."""
    info = members.get(f"{name}.npy") if isinstance(name, str) else None
    if info is None:
        raise _Bad(f"it lacks the array {name!r}")
    with z.open(info) as m:
        version = np.lib.format.read_magic(m)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(m)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(m)
        else:
            raise _Bad(f"array {name} has an unknown layout {version}")
        if dtype.str != kind or dtype.hasobject or len(shape) != 1:
            raise _Bad(f"array {name} is {dtype.str}{shape}, expected {kind} in one dimension")
        nbytes = int(shape[0]) * dtype.itemsize
        if nbytes != info.file_size - m.tell():
            raise _Bad(f"array {name} claims {shape[0]} values, not what its member holds")
        buf = bytearray(nbytes)  # writable, as arrays read from a trace are
        reader: Any = m  # a ZipExtFile, which reads into a buffer
        view, at = memoryview(buf), 0
        while at < nbytes:
            got = reader.readinto(view[at:])
            if not got:
                raise _Bad(f"array {name} is cut short")
            at += got
        m.read()  # to its end: zipfile checks the member's CRC there
    return np.frombuffer(buf, dtype)


def _why_stale(stored: Any, key: Key) -> str:
    if not isinstance(stored, dict):
        return "no key"
    if stored.get("path") != key.facts()["path"]:
        return f"it belongs to another file ({plain_text(stored.get('path'))})"
    changed = [k for k, v in key.facts().items() if stored.get(k) != v]
    return "stale: the " + ", ".join(changed) + " changed"


def expected_kind(dtype: str) -> str:
    """How a column of a declared dtype is stored: "text" (codes into distinct values) for
    text, else its NumPy ``dtype.str``."""
    return "text" if dtype in (TEXT, "object") else np.dtype(dtype).str


def _frame(
    z: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], table: Table, spec: Any
) -> pd.DataFrame:
    """Table ``table`` from its ``spec``, checked against its declaration: every declared
    column, with its declared dtype, every column as long as the others."""
    if not isinstance(spec, list):
        raise _Bad(f"it lacks the table {table.name}")
    declared = {c.name: expected_kind(c.dtype) for c in table.columns}
    cols: dict[str, Any] = {}
    n: int | None = None
    for item in spec:
        if not (
            isinstance(item, list)
            and len(item) == 3
            and isinstance(item[0], str)
            and isinstance(item[1], str)
            and isinstance(item[2], list)
        ):
            raise _Bad(f"table {table.name} is described wrongly")
        name, kind, arrays = item
        if name in cols:
            raise _Bad(f"table {table.name} has two columns {name!r}")
        want = declared.get(name)
        if want is None:
            raise _Bad(f"table {table.name} has a column nbprof does not declare ({name!r})")
        if kind != want:
            raise _Bad(f"column {table.name}.{name} is stored as {kind}, declared {want}")
        if kind == "text":
            if len(arrays) != 3:
                raise _Bad(f"text column {table.name}.{name} is described wrongly")
            codes, offsets, blob = (
                _array(z, members, a, k) for a, k in zip(arrays, ("<i4", "<i8", "|u1"), strict=True)
            )
            col = _text(codes, offsets, blob)
        elif len(arrays) == 1 and kind[1:2] in ("b", "i", "u", "f") and len(kind) <= 4:
            col = _array(z, members, arrays[0], kind)
        else:
            raise _Bad(f"column {table.name}.{name} has a kind nbprof does not store ({kind!r})")
        if n is None:
            n = len(col)
        elif len(col) != n:
            raise _Bad(f"column {table.name}.{name} has {len(col)} rows, expected {n}")
        cols[name] = col
    lacking = [c for c in declared if c not in cols]
    if lacking:
        raise _Bad(f"table {table.name} lacks its column {lacking[0]}")
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
    entry = key.entry()
    if entry is None:
        return
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
        logger.info("not caching the tables of %s: %s", plain_text(key.path), plain_text(e))
        return
    header["key"] = key.facts()
    header["format"] = FORMAT
    try:
        head = np.frombuffer(msgspec.json.encode(header), np.uint8)
    except (msgspec.EncodeError, TypeError, OverflowError) as e:
        logger.info("not caching the tables of %s: %s", plain_text(key.path), plain_text(e))
        return
    if entry.parent in _read_only:
        logger.debug("not caching %s: the cache folder is read-only", plain_text(key.path))
        return
    if entry.is_dir() and not entry.is_symlink():
        # Not nbprof's to remove (it may hold a user's files), and no reason to give up the
        # whole folder: this one trace goes uncached.
        logger.info("not caching %s: a folder sits at its entry's name %s",
                    plain_text(key.path), plain_text(entry))  # fmt: skip
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        _clear_the_way(entry)
        # Not synced to the disk: an entry a crash cut short fails its checks when read,
        # and is made again (fsync took 6 ms of writing a 9 MB entry here, and more on
        # a slow disk).
        with atomic_output(entry, durable=False) as out:
            _write_entry(out, {_HEADER: head, **arrays})
    except Exception as e:  # a full disk, a read-only home, a bad folder: the load goes on
        _folder_trouble(entry.parent, f"could not write {plain_text(entry.name)} in it", e)
        return
    logger.debug("cached the tables of %s in %s", plain_text(key.path), plain_text(entry))
    _evict(entry)


#: Cache folders whose trouble was said already (by this process, or the one that forked
#: it): one warning each, however many traces or ranks meet it.
_troubled: set[Path] = set()
#: Cache folders found read-only (:func:`ready`): entries are read from them, none written.
_read_only: set[Path] = set()


def _folder_trouble(folder: Path, what: str, e: BaseException) -> None:
    """Say once per folder that it cannot be used as it should (the first entry it failed
    for, and why); later failures in it are logged for debugging only."""
    if isinstance(e, OutputError):
        reason = e.reason
    elif isinstance(e, OSError) and e.strerror:
        reason = e.strerror
    else:
        reason = str(e)
    reason = plain_text(reason)
    if folder in _troubled:
        logger.debug("table cache folder %s: %s (%s)", plain_text(folder), what, reason)
        return
    _troubled.add(folder)
    logger.warning(
        "the table cache folder %s cannot be used: %s (%s); traces are read without it",
        plain_text(folder),
        what,
        reason,
    )


def ready() -> bool:
    """Whether there is a table cache to use: its folder named, made if need be; said in
    one warning where it cannot be made (the cache is then off) or written (entries in it
    are read, none written). Asked once before a job's workers start: they then say
    nothing more of it."""
    folder = cache_dir()
    if folder is None:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _folder_trouble(folder, "it cannot be made", e)
        return False
    if not os.access(folder, os.W_OK | os.X_OK) and folder not in _read_only:
        _read_only.add(folder)
        logger.warning(
            "the table cache folder %s is read-only: its entries are used, no new ones are written",
            plain_text(folder),
        )
    return True


def _clear_the_way(entry: Path) -> None:
    """Remove what is not an entry but sits at an entry's name (a symbolic link, a FIFO):
    the name is nbprof's, and what a link points to is left as it is."""
    try:
        st = os.lstat(entry)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        os.unlink(entry)
        logger.info("replacing %s, which was not a cache entry", plain_text(entry))


def _write_entry(out: BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    """The arrays as ``np.savez`` writes them (one ``.npy`` member each, uncompressed),
    the header first: the marker :func:`_is_ours` looks for."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, a in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as m:
                np.lib.format.write_array(m, np.ascontiguousarray(a), allow_pickle=False)


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
        raise _Bad(f"its metadata cannot be stored ({plain_text(e)})") from None
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


def _is_ours(path: str) -> bool:
    """Whether the regular file at ``path`` opens as an entry nbprof wrote: its first zip
    member is the header (read without following a link or waiting on a FIFO)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, 30 + len(_MARKER_NAME))
    except OSError:
        return False
    finally:
        os.close(fd)
    return head[:4] == _LOCAL and head[30:] == _MARKER_NAME


def _evict(keep: Path) -> None:
    """Keep the folder's own files under :data:`MAX_BYTES`: remove what interrupted writes
    left, then the least recently used entries. Touches nothing but nbprof's own files:
    entry names that open with an entry's marker, and temporary files of entry names."""
    entries: list[tuple[int, int, str]] = []  # (mtime_ns, size, path)
    total = 0
    try:
        with os.scandir(keep.parent) as it:
            for e in it:
                temp_of = temp_target(e.name)
                legacy = bool(_LEGACY.fullmatch(e.name) or _LEGACY_TEMP.fullmatch(e.name))
                ours = _ENTRY.fullmatch(e.name) or (temp_of and _ENTRY.fullmatch(temp_of))
                if not ours and not legacy:
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                if legacy:
                    if _old_and_ours(e.name, e.path, st) and _remove(e.path, "an older format's"):
                        continue
                    if e.name.endswith(".tmp"):  # a recent one's writer may still run
                        total += st.st_size
                    continue
                if temp_of is not None and is_stale_temp(e.name, st.st_mtime):
                    _remove(e.path, "left by an interrupted write")
                    continue
                total += st.st_size
                if temp_of is None and e.path != str(keep):
                    entries.append((st.st_mtime_ns, st.st_size, e.path))
    except OSError:
        return
    for _, size, path in sorted(entries):
        if total <= MAX_BYTES:
            break
        if _is_ours(path) and _remove(path, "the least recently used"):
            total -= size


def _old_and_ours(name: str, path: str, st: os.stat_result) -> bool:
    """Whether ``path`` is what an nbprof that wrote format 1 or 2 left: an entry (a zip
    whose ``header.npy`` member holds that format's facts), or a temporary file of one written
    more than :data:`STALE_TEMP_S` ago (its name alone is nbprof's)."""
    if name.endswith(".tmp"):
        return time.time() - st.st_mtime > STALE_TEMP_S
    try:
        f, _ = _open_entry(Path(path))
        with f, zipfile.ZipFile(f) as z:
            info = z.getinfo(_LEGACY_HEADER)
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > 1 << 20:
                return False
            head = _array(z, {_LEGACY_HEADER: info}, _LEGACY_HEADER[:-4], "|u1")
        header = msgspec.json.decode(head.tobytes())
    except Exception:  # not a zip, no such member, not JSON: not one of ours
        return False
    return (
        isinstance(header, dict)
        and header.get("format") in _LEGACY_FORMATS
        and isinstance(header.get("key"), dict)
        and "path" in header["key"]
    )


def _remove(path: str, why: str) -> bool:
    try:
        os.unlink(path)
    except OSError:
        return False
    logger.debug("removed the table cache file %s (%s)", plain_text(path), why)
    return True
