"""Drive a headless JupyterLab from Playwright: start the server, open, run and inspect notebooks.

Kept apart from conftest.py so that the test modules can import the types for their hints.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Locator, Page

logger = logging.getLogger(__name__)

CHROMIUM = Path("/usr/bin/chromium")

#: Generous but bounded: a cold kernel importing torch on a loaded 2-core CI machine.
SERVER_START_TIMEOUT_S = 90.0
NOTEBOOK_OPEN_TIMEOUT_MS = 60_000
RUN_ALL_TIMEOUT_MS = 150_000

# Console errors that are not ours and say nothing about nbprof's output, as (regular
# expression, why it is harmless); anything else fails the test. Empty: JupyterLab 4.6 with
# the settings below logs no console error on these pages, so none is excused.
BENIGN_CONSOLE_ERRORS: tuple[tuple[str, str], ...] = ()


def missing_requirements() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.exists():
        why = f"{CHROMIUM} not found (Debian's chromium package)"
    else:
        absent = [m for m in ("playwright", "jupyterlab", "nbformat") if find_spec(m) is None]
        if not absent:
            return None
        why = f"python package(s) not installed: {', '.join(absent)}"
    return f"browser tests need Chromium, Playwright and JupyterLab: {why}"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields follow the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def _descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start time) of every live process below ``pid``. Kernels run in their own
    session, so a process-group kill of the server would miss them."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[0], []).append((int(entry.name), st[1]))
    out: list[tuple[int, int]] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child[0])
    return out


def _kill_if_same(pid: int, started: int) -> None:
    """SIGKILL ``pid`` only if it is still the process that started at ``started`` (a pid
    freed by an exited kernel may already belong to someone else)."""
    st = _stat(pid)
    if st is not None and st[1] == started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


#: The Jupyter front ends the harness can start, by the module ``python -m`` runs.
JUPYTERLAB = "jupyterlab"
NOTEBOOK7 = "notebook"


@dataclass
class LabServer:
    """A running ``jupyter lab`` (or Notebook 7, ``app="notebook"``) with its own HOME and
    Jupyter folders under ``base``."""

    base: Path
    root: Path
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    _workspaces: int = 0
    app: str = JUPYTERLAB

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, name: str) -> str:
        if self.app == NOTEBOOK7:
            # Notebook 7 opens each notebook alone in its own page: no workspace to reset.
            return f"{self.url}/notebooks/{name}?token={self.token}"
        # A fresh, reset workspace per page: otherwise JupyterLab reopens the previous
        # test's notebooks (and their kernels) next to this one.
        self._workspaces += 1
        ws = f"t{self._workspaces}"
        return f"{self.url}/lab/workspaces/{ws}/tree/{name}?reset&token={self.token}"

    def _api(self, method: str, path: str) -> Any:
        req = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
            data=b"" if method == "POST" else None,
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Stop every kernel (each holds torch in memory; the next test starts its own)."""
        for session in self._api("GET", "/api/sessions"):
            self._api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self._api("GET", "/api/kernels"):
            try:
                self._api("DELETE", f"/api/kernels/{kernel['id']}")
            except urllib.error.HTTPError as exc:
                # A kernel its deleted session is still shutting down can be listed yet
                # refuse a second delete; stop() kills whatever is left, by pid.
                logger.warning("kernel %s not deleted: %s", kernel["id"], exc)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    @classmethod
    def start(
        cls, base: Path, extra_env: dict[str, str] | None = None, app: str = JUPYTERLAB
    ) -> LabServer:
        home = base / "home"
        root = base / "notebooks"
        dirs = {
            "HOME": home,
            "JUPYTER_CONFIG_DIR": base / "jupyter_config",
            "JUPYTER_DATA_DIR": base / "jupyter_data",
            "JUPYTER_RUNTIME_DIR": base / "jupyter_runtime",
            "IPYTHONDIR": base / "ipython",
        }
        for d in (*dirs.values(), root):
            d.mkdir(parents=True, exist_ok=True)
        _write_lab_settings(dirs["JUPYTER_CONFIG_DIR"])

        env = dict(os.environ)
        env.update({k: str(v) for k, v in dirs.items()})
        # Keep the kernel off any user or site settings that could change what it prints.
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTER_PREFER_ENV_PATH", None)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra_env or {})

        port = free_port()
        token = secrets.token_hex(16)
        cmd = [
            sys.executable,
            "-m",
            app,
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
        ]
        if app == JUPYTERLAB:
            # No network here or on CI: never ask the outside world for news or updates.
            cmd += [
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
        log_path = base / f"{app}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = cls(base, root, port, token, proc, log_path, app=app)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        url = f"{self.url}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise TimeoutError(
            f"jupyter lab did not answer in {SERVER_START_TIMEOUT_S}s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Shut down politely (kernels included); kill what is left, by pid."""
        if self.proc.poll() is None:
            family = _descendants(self.proc.pid)
            try:
                req = urllib.request.Request(
                    f"{self.url}/api/shutdown?token={self.token}", method="POST", data=b""
                )
                urllib.request.urlopen(req, timeout=5).close()
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                logger.warning("polite shutdown of jupyter lab failed; killing it")
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
            # Kernels live in their own sessions: kill any that outlived the server.
            for pid, started in family:
                _kill_if_same(pid, started)


def _write_lab_settings(config_dir: Path) -> None:
    """Settings that keep the UI quiet and deterministic for a robot."""
    labconfig = config_dir / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    # The news prompt pops a toast over the notebook; it is not what we test.
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    user = config_dir / "lab" / "user-settings" / "@jupyterlab"
    tracker = {
        # Otherwise a second notebook asks which kernel to start, in a modal dialog.
        "autoStartDefaultKernel": True,
        # Every cell in the DOM: the default windowing leaves off-screen cells unrendered
        # (empty prompts, no outputs), which a user never sees but a query does.
        "windowingMode": "none",
    }
    (user / "notebook-extension").mkdir(parents=True, exist_ok=True)
    (user / "notebook-extension" / "tracker.jupyterlab-settings").write_text(json.dumps(tracker))
    (user / "apputils-extension").mkdir(parents=True, exist_ok=True)
    (user / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


def write_notebook(path: Path, cells: Sequence[str | tuple[str, str]]) -> Path:
    """Write a notebook: each cell is code, or ``("markdown", text)``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    for c in cells:
        if isinstance(c, tuple):
            kind, text = c
            nb.cells.append(
                nbformat.v4.new_markdown_cell(text)
                if kind == "markdown"
                else nbformat.v4.new_code_cell(text)
            )
        else:
            nb.cells.append(nbformat.v4.new_code_cell(c))
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, str(path))
    return path


@dataclass
class PageErrors:
    """Uncaught page exceptions and console errors, as the browser reported them."""

    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)
    #: Extra known errors of the front end under test, as (regular expression, why).
    benign: tuple[tuple[str, str], ...] = ()

    def attach(self, page: Page) -> None:
        page.on("pageerror", self._on_page_error)
        page.on("console", self._on_console)

    def _excused(self, text: str) -> bool:
        patterns = (*BENIGN_CONSOLE_ERRORS, *self.benign)
        if any(re.search(p, text) for p, _why in patterns):
            self.allowed.append(text)
            return True
        return False

    def _on_page_error(self, exc: Any) -> None:
        text = f"{exc.name}: {exc.message}"
        if not self._excused(f"{text}\n{exc.stack or ''}"):
            self.page_errors.append(text)

    def _on_console(self, msg: ConsoleMessage) -> None:
        if msg.type != "error":
            return
        if not self._excused(msg.text):
            self.console_errors.append(msg.text)

    def assert_none(self) -> None:
        assert not self.page_errors, f"uncaught errors in the page: {self.page_errors}"
        assert not self.console_errors, f"console errors: {self.console_errors}"


class NotebookUI:
    """One notebook open in JupyterLab, driven through its menus like a user would."""

    def __init__(self, page: Page, server: LabServer, name: str) -> None:
        self.page = page
        self.server = server
        self.name = name

    # -- opening and running ----------------------------------------------------------
    def open(self) -> NotebookUI:
        self.page.goto(self.server.notebook_url(self.name))
        self.page.locator(".jp-NotebookPanel").first.wait_for(timeout=NOTEBOOK_OPEN_TIMEOUT_MS)
        self.wait_kernel_idle(NOTEBOOK_OPEN_TIMEOUT_MS)
        return self

    def wait_kernel_idle(self, timeout_ms: float) -> None:
        """Wait until the notebook's kernel is connected and idle.

        The toolbar indicator reads "idle" for a moment before any kernel exists, and a Run
        All issued then is dropped; the status bar's "<kernel> | Idle" only shows once the
        kernel has answered.
        """
        self.page.wait_for_function(
            """() => {
                const el = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) '
                    + '.jp-Notebook-ExecutionIndicator');
                if (el === null || el.getAttribute('data-status') !== 'idle') return false;
                return [...document.querySelectorAll('.jp-StatusBar-Widget span')].some(
                    e => /^(?!No Kernel).+ \\| Idle$/.test(e.textContent.trim()));
            }""",
            timeout=timeout_ms,
            polling=100,
        )

    def run_all(self, timeout_ms: float = RUN_ALL_TIMEOUT_MS) -> None:
        """Run > Run All Cells from the menu bar, wait until the run is over, and save.

        Run All marks every queued cell ``[*]`` at once and clears the marks of the cells
        it skips after an error, so the run is over when no ``[*]`` is left and at least
        one cell has its number.
        """
        page = self.page
        self._click_menu("Run", "Run All Cells")
        try:
            page.wait_for_function(
                """() => {
                    const prompts = [...document.querySelectorAll(
                        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell '
                        + '.jp-InputPrompt')].map(p => (p.textContent || '').trim());
                    return prompts.length > 0 && !prompts.some(p => p.includes('*'))
                        && prompts.some(p => /\\[\\d+\\]/.test(p));
                }""",
                timeout=timeout_ms,
                polling=250,
            )
        except Exception:
            shot = artifact(f"timeout-{Path(self.name).stem}.png")
            page.screenshot(path=str(shot), full_page=True)
            logger.error(
                "run all did not finish; screenshot %s; prompts %s", shot, self.execution_counts()
            )
            raise
        self.wait_kernel_idle(timeout_ms)
        self.save()

    def save(self) -> None:
        """File > Save Notebook, then wait until the tab is no longer marked dirty."""
        self._click_menu("File", "Save Notebook")
        self.page.wait_for_function(
            "() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
            timeout=30_000,
        )

    def saved(self) -> Any:
        """The notebook as JupyterLab saved it (outputs included), read with nbformat."""
        import nbformat

        return nbformat.read(self.server.root / self.name, as_version=4)

    def _click_menu(self, menu: str, item: str, attempts: int = 20) -> None:
        """Click ``menu > item`` once the item is enabled.

        Right after a notebook opens, JupyterLab may not yet have made it the current widget,
        and its notebook commands stay disabled until it has: a click then does nothing.
        """
        page = self.page
        entry = page.locator(
            ".lm-Menu-item",
            has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")),
        )
        for _ in range(attempts):
            # Focus the notebook itself (its first cell's prompt), as a user's click would.
            self.cells().first.locator(".jp-InputPrompt").click()
            page.locator(
                ".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")
            ).click()
            entry.wait_for(timeout=10_000)
            if "lm-mod-disabled" not in (entry.get_attribute("class") or ""):
                entry.click()
                return
            page.keyboard.press("Escape")
            page.wait_for_timeout(250)
        raise TimeoutError(f"menu item {menu} > {item} stayed disabled")

    # -- reading outputs --------------------------------------------------------------
    def cells(self) -> Locator:
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell")

    def output_area(self, cell_index: int) -> Locator:
        return self.cells().nth(cell_index).locator(".jp-OutputArea")

    def error_outputs(self) -> list[str]:
        """``ename: evalue`` of every error output (read from the saved file: in the DOM an
        error looks like any other stderr text)."""
        return [
            f"{o.get('ename')}: {o.get('evalue')}"
            for cell in self.saved().cells
            if cell.cell_type == "code"
            for o in cell.outputs
            if o.get("output_type") == "error"
        ]

    def execution_counts(self) -> list[str]:
        prompts = self.cells().locator(".jp-InputPrompt")
        return [prompts.nth(i).inner_text().strip() for i in range(prompts.count())]


# -- Bokeh ----------------------------------------------------------------------------
# Bokeh 3 draws inside open shadow roots; the view index (Bokeh.index) reaches every view
# without walking the DOM, and each view's `el` gives its place on the page.

_PLOTS_JS = """
(scope) => {
    const B = window.Bokeh;
    if (!B || !B.index) return [];
    const out = [];
    for (const v of B.index.all_views()) {
        const m = v.model;
        if (!m || m.x_range === undefined || m.toolbar === undefined) continue;
        const el = v.el;
        if (!el || !el.isConnected) continue;
        // Climb out of the shadow roots to the light DOM and keep views inside `scope`.
        let host = el;
        while (host && !(scope === null || scope.contains(host))) {
            const root = host.getRootNode();
            host = root instanceof ShadowRoot ? root.host : null;
        }
        if (!host) continue;
        const r = el.getBoundingClientRect();
        const c = v.canvas_view ? v.canvas_view.el.getBoundingClientRect() : null;
        const f = v.frame ? v.frame.bbox : null;
        out.push({
            id: m.id,
            name: m.name,
            x_start: m.x_range.start,
            x_end: m.x_range.end,
            rect: {x: r.x, y: r.y, width: r.width, height: r.height},
            canvas: c ? {x: c.x, y: c.y, width: c.width, height: c.height} : null,
            frame: f ? {x: f.left, y: f.top, width: f.width, height: f.height} : null,
            tools: m.toolbar.tools.map(t => t.type),
            active_scroll: (() => {
                const a = m.toolbar.active_scroll;
                return a && typeof a === 'object' ? a.type : a;
            })(),
            renderers: m.renderers.length,
        });
    }
    return out;
}
"""


def bokeh_plots(page: Page, within: Locator | None = None) -> list[dict[str, Any]]:
    """Every rendered Bokeh plot, optionally only those inside ``within``.

    Each dashboard inlines its own BokehJS, but the first copy loaded keeps ``window.Bokeh``
    and renders every later document too, so its view index sees all plots on the page.
    """
    scope = within.element_handle() if within is not None else None
    return list(page.evaluate(_PLOTS_JS, scope))


def plot_named(page: Page, name: str, within: Locator | None = None) -> dict[str, Any]:
    plots = [p for p in bokeh_plots(page, within) if p["name"] == name]
    assert len(plots) == 1, f"expected one Bokeh plot named {name!r}, found {len(plots)}"
    return plots[0]


_LANES_JS = """
([scope, name]) => {
    // Page coordinates of each labelled lane (numeric y ticks with label overrides).
    for (const v of window.Bokeh.index.all_views()) {
        const m = v.model;
        if (m.name !== name || !v.canvas_view) continue;
        let host = v.el;
        while (host && !scope.contains(host)) {
            const root = host.getRootNode();
            host = root instanceof ShadowRoot ? root.host : null;
        }
        if (!host) continue;
        const c = v.canvas_view.el.getBoundingClientRect();
        const ov = m.left[0].major_label_overrides;
        const labels = ov instanceof Map ? [...ov.entries()] : Object.entries(ov);
        const x0 = c.x + v.frame.bbox.left, x1 = x0 + v.frame.bbox.width;
        return labels.map(([y, label]) => ({
            label: String(label), x0, x1, y: c.y + v.frame.y_scale.compute(Number(y)),
        }));
    }
    return [];
}
"""


def timeline_lanes(page: Page, within: Locator, name: str) -> list[dict[str, Any]]:
    """Each lane of the plot ``name`` inside ``within``: label, page y, frame x0/x1."""
    return list(page.evaluate(_LANES_JS, [within.element_handle(), name]))


def tooltip_texts(page: Page) -> list[str]:
    """Text of the Bokeh tooltips now visible (Bokeh attaches them outside the output)."""
    tips = page.locator(".bk-tooltip-content")
    return [tips.nth(i).inner_text() for i in range(tips.count()) if tips.nth(i).is_visible()]


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll a Python-side condition (for state a single wait_for_function cannot express)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")


ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def artifact(name: str) -> Path:
    """A path in tests/artifacts/ (git-ignored; CI keeps the folder after a run)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


@dataclass
class Lab:
    """What a browser test gets: the server, a fresh page, and the errors that page reports."""

    server: LabServer
    page: Page
    errors: PageErrors

    @property
    def root(self) -> Path:
        return self.server.root

    def notebook(self, name: str, cells: Sequence[str | tuple[str, str]]) -> NotebookUI:
        write_notebook(self.root / name, cells)
        return NotebookUI(self.page, self.server, name).open()

    def open(self, name: str) -> NotebookUI:
        return NotebookUI(self.page, self.server, name).open()


def kernel_env(base: Path, corpus: Path | None = None) -> dict[str, str]:
    """The environment of the tests' kernels: no GPU (the tests assert the CPU-only
    dashboard), traces only from ``corpus``, and no cache outside ``base``."""
    env = {"CUDA_VISIBLE_DEVICES": "", "NBPROF_CACHE_DIR": str(base / "nbprof-cache")}
    if corpus is not None:
        env["NBPROF_TRACE_CORPUS"] = str(corpus)
    return env


@contextmanager
def serving(base: Path, corpus: Path | None, app: str = JUPYTERLAB) -> Iterator[LabServer]:
    """A server of ``app`` in ``base`` with :func:`kernel_env`, always stopped."""
    server = LabServer.start(base, kernel_env(base, corpus), app=app)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def browsing(
    server: LabServer, browser: Browser, benign: tuple[tuple[str, str], ...] = ()
) -> Iterator[Lab]:
    """A fresh page on ``server`` recording its errors; closed, kernels shut down, after."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = PageErrors(benign=benign)
    errors.attach(page)
    try:
        yield Lab(server, page, errors)
    finally:
        context.close()
        server.shutdown_kernels()
        if errors.allowed:
            logger.info("console errors excused: %s", errors.allowed)
