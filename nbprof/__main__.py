"""``python -m nbprof``: the same as the ``nbprof`` command."""

from __future__ import annotations

from nbprof.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
