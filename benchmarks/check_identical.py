"""``nbprof analyze --json`` byte for byte: this tree against an older one, or saved output.

Every trace file and rank folder of the trace corpus (``$NBPROF_TRACE_CORPUS``, else
``../shared/traces``) is analysed by this tree's CLI, run from this tree's root with the
corpus named by the same relative path as the older output names it (the JSON holds the
path as given). Each output is compared with

* ``--old TREE``: the same command run from the root of another checkout (its own
  ``PYTHONPATH``, its C extensions built), or
* ``--saved DIR``: ``DIR/<entry name>.json``, written earlier with ``--save DIR``.

``--pure`` runs this tree without its C accelerator (``NBPROF_ACCEL=0``), to check that the
pure-Python path gives the same bytes. Exit status 1 when any output differs, with the
first differing line of each.

    python benchmarks/check_identical.py --old /work/old36
    python benchmarks/check_identical.py --saved /work/baseline-json [--pure]
    python benchmarks/check_identical.py --save DIR
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def corpus() -> Path:
    env = os.environ.get("NBPROF_TRACE_CORPUS")
    base = Path(env) if env else REPO.parent / "shared" / "traces"
    if not base.is_dir():
        sys.exit(f"no trace corpus at {base} (set NBPROF_TRACE_CORPUS)")
    return base


def entries(base: Path) -> list[Path]:
    """The corpus' traces: its trace files and its folders of rank files."""
    return sorted(
        p
        for p in base.iterdir()
        if p.is_dir() or (p.name.endswith((".json", ".json.gz")) and not p.name.startswith("."))
    )


def analyze(tree: Path, entry: Path, *, pure: bool = False) -> bytes:
    """``nbprof analyze --json --no-cache`` of ``entry`` by the code of ``tree``, run from
    ``tree``'s root, the entry named relative to it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if pure:
        env["NBPROF_ACCEL"] = "0"
    rel = os.path.relpath(entry, tree)
    p = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", "--json", "--no-cache", rel],
        cwd=tree,
        env=env,
        capture_output=True,
        timeout=1800,
    )
    if p.returncode != 0:
        return b"exit status %d\n" % p.returncode + p.stderr
    return p.stdout


def first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"line {i + 1}:\n  old: {x[:300]!r}\n  new: {y[:300]!r}"
    return f"lengths differ: {len(la)} lines against {len(lb)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--old", type=Path, help="root of the checkout to compare with")
    how.add_argument("--saved", type=Path, help="folder of saved outputs (<entry>.json)")
    how.add_argument("--save", type=Path, help="write this tree's outputs there")
    ap.add_argument("--pure", action="store_true", help="this tree without its C accelerator")
    a = ap.parse_args()
    if a.pure and a.save:
        ap.error("--pure compares; it saves nothing")
    base = corpus()
    bad = 0
    for entry in entries(base):
        new = analyze(REPO, entry, pure=a.pure)
        if a.save:
            a.save.mkdir(parents=True, exist_ok=True)
            (a.save / f"{entry.name}.json").write_bytes(new)
            print(f"saved   {entry.name}")
            continue
        if a.old:
            old = analyze(a.old.resolve(), entry)
        else:
            saved = a.saved / f"{entry.name}.json"
            if not saved.is_file():
                print(f"MISSING {entry.name}: no {saved}")
                bad += 1
                continue
            old = saved.read_bytes()
        if old == new:
            print(f"same    {entry.name} ({len(new):,} bytes)")
        else:
            bad += 1
            print(f"DIFFERS {entry.name}: {first_difference(old, new)}")
    if not a.save:
        print(f"{bad} of {len(entries(base))} differ" if bad else "all identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
