"""The front-end files shipped as package data (nbprof/views/js/), and the ES modules
among them bundled into one classic script for an inline ``<script>``.

The browser gets nbprof's code inline (no CDN, no server, nothing to import from: a
notebook output, an nbconvert export and a file:// report must all draw), and a classic
script, since outputs run their scripts as classic ones. :func:`bundle` therefore does
what a bundler would, for the one style the modules are written in: each module becomes
a function returning its exports, run once, in dependency order; an ``import`` becomes
a binding to the exports of the module it names. It accepts, at the start of a line:

- ``import { a, b as c } from "./x.mjs";`` and ``import * as x from "./x.mjs";``
- ``export function``, ``export async function``, ``export const``, ``export class``

and refuses anything else (another ``export`` form, an import from outside
nbprof/views/js, a dynamic import, a cycle) with a :class:`BundleError`, rather than
bundling something the browser would run differently. Under Node the same files are
imported as the ES modules they are (tests/js).
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

#: The modules the dashboard's script runs (each imports what it needs).
SCRIPTS = ("dashboard.mjs",)

_IMPORT = re.compile(
    r"import\s+(?:\{(?P<names>[^}]*)\}|\*\s+as\s+(?P<ns>[A-Za-z_$][\w$]*))\s+"
    r'from\s+"\./(?P<path>[\w.-]+\.mjs)";[ \t]*$',
    re.M,
)
_EXPORT = re.compile(
    r"export\s+(?P<decl>(?:async\s+)?function\s+|const\s+|class\s+)(?P<name>[A-Za-z_$][\w$]*)"
)
_LINE_IMPORT = re.compile(r"^import\b", re.M)
_LINE_EXPORT = re.compile(r"^export\b", re.M)
_DYNAMIC_IMPORT = re.compile(r"\bimport\s*\(")
_BINDING = re.compile(r"^([A-Za-z_$][\w$]*)(?:\s+as\s+([A-Za-z_$][\w$]*))?$")


class BundleError(ValueError):
    """A module is written in a form :func:`bundle` does not translate."""


@cache
def asset(name: str) -> str:
    """The text of ``nbprof/views/js/<name>``."""
    return resources.files("nbprof.views").joinpath("js").joinpath(name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Module:
    """One ES module, translated: its body with imports bound and ``export`` dropped."""

    name: str
    deps: tuple[str, ...]
    exports: tuple[str, ...]
    body: str

    @property
    def var(self) -> str:
        return _var(self.name)


def _var(name: str) -> str:
    """The bundle's name for the exports of module ``name``."""
    return "__nbp_" + re.sub(r"\W", "_", name.removesuffix(".mjs"))


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _bindings(names: str, where: str) -> str:
    """``a, b as c`` as the destructuring ``a, b: c``."""
    out = []
    for part in (p.strip() for p in names.split(",")):
        if not part:
            continue
        m = _BINDING.match(part)
        if m is None:
            raise BundleError(f"{where}: cannot bind {part!r}")
        out.append(m.group(1) if m.group(2) is None else f"{m.group(1)}: {m.group(2)}")
    return ", ".join(out)


@cache
def module(name: str) -> Module:
    """The module ``nbprof/views/js/<name>``, translated for :func:`bundle`."""
    return translate(name, asset(name))


def translate(name: str, text: str) -> Module:
    """The ES module ``name`` whose source is ``text``, translated for :func:`bundle`."""
    if _DYNAMIC_IMPORT.search(text):
        raise BundleError(f"{name}: dynamic import() is not bundled")
    deps: list[str] = []
    pieces: list[str] = []
    at = 0
    for start in (m.start() for m in _LINE_IMPORT.finditer(text)):
        m = _IMPORT.match(text, start)
        where = f"{name}:{_line(text, start)}"
        if m is None:
            raise BundleError(f"{where}: only named or namespace imports of ./*.mjs bundle")
        dep = m.group("path")
        deps.append(dep)
        bound = (
            f"const {m.group('ns')} = {_var(dep)};"
            if m.group("ns")
            else f"const {{ {_bindings(m.group('names'), where)} }} = {_var(dep)};"
        )
        pieces += [text[at:start], bound]
        at = m.end()
    pieces.append(text[at:])
    body = "".join(pieces)
    exports: list[str] = []
    out: list[str] = []
    at = 0
    for start in (m.start() for m in _LINE_EXPORT.finditer(body)):
        m = _EXPORT.match(body, start)
        if m is None:
            raise BundleError(
                f"{name}:{_line(body, start)}: only export function/const/class declarations"
            )
        exports.append(m.group("name"))
        out += [body[at:start], m.group("decl"), m.group("name")]
        at = m.end()
    out.append(body[at:])
    return Module(name, tuple(dict.fromkeys(deps)), tuple(exports), "".join(out))


def order(entries: tuple[str, ...], load: Callable[[str], Module] = module) -> list[Module]:
    """Every module the entries need (``load`` reads one), each after those it imports."""
    done: dict[str, Module] = {}
    path: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise BundleError(f"import cycle: {cycle}")
        path.append(name)
        mod = load(name)
        for dep in mod.deps:
            visit(dep)
        path.pop()
        done[name] = mod

    for entry in entries:
        visit(entry)
    return list(done.values())


def _without_comments(text: str) -> str:
    """``text`` without the comments that take whole lines (the code's own documentation,
    which every output would otherwise carry): ``//`` lines, and ``/* ... */`` blocks that
    start a line. A comment after code, or inside a string, is left alone."""
    out: list[str] = []
    in_block = False
    for line in text.splitlines():
        s = line.strip()
        if in_block:
            if "*/" in s:
                in_block = False
                rest = s.split("*/", 1)[1].strip()
                if rest:
                    out.append(rest)
            continue
        if s.startswith("//") or not s:
            continue
        if s.startswith("/*"):
            if "*/" in s[2:]:
                rest = s[2:].split("*/", 1)[1].strip()
                if rest:
                    out.append(rest)
            else:
                in_block = True
            continue
        out.append(line)
    return "\n".join(out)


@cache
def bundle(*entries: str) -> str:
    """The modules ``entries`` and all they import as one classic script: a function run
    once, which runs the modules in dependency order. Running it again (every output
    carries it) makes fresh modules and defines no global name of its own. Whole-line
    comments are left out (the files under nbprof/views/js keep them)."""
    parts = [
        f"/* nbprof's front end ({', '.join(entries)}), bundled from nbprof/views/js. */",
        "(function () {",
        '"use strict";',
    ]
    for mod in order(entries):
        exports = ", ".join(mod.exports)
        parts += [
            f"const {mod.var} = (function () {{ // {mod.name}",
            _without_comments(mod.body),
            f"return Object.freeze({{ {exports} }});" if exports else "return {};",
            "})();",
        ]
    parts.append("})();")
    return "\n".join(parts) + "\n"


def deflated(code: str) -> str:
    """A classic script that runs ``code``, which it carries deflated in base64 (js/inflate.js):
    about a third of its size for a script as big as nbprof's or BokehJS."""
    packed = base64.b64encode(zlib.compress(code.encode("utf-8"), 9)).decode("ascii")
    return f'{asset("inflate.js").rstrip()}("{packed}");\n'


@cache
def scripts(*extra: str) -> str:
    """The dashboard's script, with the modules ``extra`` after its own (one inline
    <script> per output is enough), deflated."""
    return deflated(bundle(*SCRIPTS, *extra))
