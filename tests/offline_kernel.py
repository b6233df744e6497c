"""Run a notebook headless in a kernel that sees no corpus folder and no network.

The kernel's IPython profile (``IPYTHONDIR``, private to the run) starts with an audit hook
(PEP 578) that refuses to open any file under the hidden folders and to resolve or connect
to any address but this machine's own: a notebook that still reaches for the trace corpus
or the network fails at that cell, instead of passing because the files happened to be
there. Used by ``test_notebooks.py`` (the checkout) and ``test_wheel.py`` (an installed
wheel, in the virtual environment's own kernel).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CELL_TIMEOUT_S = 300
#: The environment variable the guard reads its hidden folders from (os.pathsep-separated).
HIDDEN_ENV = "NBPROF_TEST_HIDDEN"

_GUARD = """\
import os
import sys

_hidden = tuple(p for p in os.environ.get("NBPROF_TEST_HIDDEN", "").split(os.pathsep) if p)
_local = {"127.0.0.1", "::1", "localhost", None}


def _refuse(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args:
        target = args[0]
        if isinstance(target, (str, bytes)) and _hidden:
            path = os.path.realpath(os.fsdecode(target))
            if any(path == h or path.startswith(h + os.sep) for h in _hidden):
                raise PermissionError(f"{path}: hidden from this kernel by the test")
    elif event == "socket.getaddrinfo" and args and args[0] not in _local:
        raise OSError(f"no network for this kernel: {args[0]}")
    elif event == "socket.connect" and len(args) > 1 and isinstance(args[1], tuple):
        if args[1][0] not in _local:
            raise OSError(f"no network for this kernel: {args[1]}")


sys.addaudithook(_refuse)
"""


def offline_env(base: Path, env: dict[str, str], hidden: list[Path]) -> dict[str, str]:
    """``env`` for a kernel with ``hidden`` out of reach and no network (see the module)."""
    startup = base / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-offline.py").write_text(_GUARD, encoding="utf-8")
    env = {k: v for k, v in env.items() if k != "NBPROF_TRACE_CORPUS"}
    env.update(
        IPYTHONDIR=str(base / "ipython"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        CUDA_VISIBLE_DEVICES="",
        MPLBACKEND="Agg",
    )
    env[HIDDEN_ENV] = os.pathsep.join(os.path.realpath(p) for p in hidden)
    return env


@dataclass
class Executed:
    nb: Any
    #: The notebook's size saved after Run All (nbformat's own writer, as Jupyter saves).
    saved_bytes: int
    #: CPU seconds the kernel process used, where /proc tells (else None), and wall time.
    cpu_s: float | None
    wall_s: float


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process, from /proc (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3; utime, stime, then the reaped children's
    # cutime and cstime are fields 14 to 17.
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _kernel_manager(python: Path, base: Path) -> Any:
    """A kernel manager whose ``python3`` kernel runs ``python`` (another environment's)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    spec = base / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(spec.parent)])
    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=specs)


def execute(
    path: Path, env: dict[str, str], workdir: Path, *, python: Path | None = None
) -> Executed:
    """Run All on ``path`` in a fresh kernel (``python``'s, else this environment's ``python3``
    kernel), save it beside ``workdir`` and measure it. Raises on the first failing cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(workdir)}},
        km=_kernel_manager(python, workdir / f"spec-{path.stem}") if python else None,
    )
    cpu: list[float | None] = [None]

    def after_cell(**_: Any) -> None:
        # The kernel is alive between cells: read its CPU time after each one.
        pid = getattr(client.km.provisioner, "pid", None) if client.km else None
        if pid is not None:
            cpu[0] = _cpu_seconds(pid)

    client.on_cell_executed = after_cell
    t0 = time.perf_counter()
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    wall = time.perf_counter() - t0
    saved = workdir / f"executed-{path.name}"
    nbformat.write(nb, saved)
    return Executed(nb, saved.stat().st_size, cpu[0], wall)


def text_of(o: Any) -> str:
    """What an output says in plain text: a stream's text, else its ``text/plain``."""
    if o.get("output_type") == "stream":
        return str(o.get("text", ""))
    return str(o.get("data", {}).get("text/plain", ""))


def read_from(dashboard: str, folder: Path) -> bool:
    """Whether a dashboard's title names a trace in ``folder`` (a long title is cut short
    with "…": then as far as it goes)."""
    title = dashboard.splitlines()[0].removeprefix("nbprof · ")
    where = f"{folder}{os.sep}"
    if title.endswith("…"):
        title = title[:-1]
        return title.startswith(where) or where.startswith(title)
    return title.startswith(where)
