"""The files of the Rust crates and of the Python package form layers: no import circles.

A Rust file imports another when it names it by a path (`use crate::a::b`, `super::x`, a child
module's name, or such a path inline in code); a Python module imports another by `import` or
`from … import`. Any strongly connected set of two or more files is a circle, and fails the test
with its members listed. `#[cfg(test)]` code is not counted: a test may reach any layer.

See docs/architecture.md for the layers this keeps in order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Crates checked.
RUST_CRATES = ["repflow-sim", "repflow-py", "repflow-repnum", "repflow-net"]


# ---------------------------------------------------------------------------------------------
# Rust


def _strip_rust(text: str) -> str:
    """The text without comments, string and char literals, and `#[cfg(test)]` items."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and not (i and text[i - 1].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return _drop_cfg_test("".join(out))


def _drop_cfg_test(text: str) -> str:
    """Removes each item that follows `#[cfg(test)]` (to its `;` or its balanced `{…}`)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", text)
        if not m:
            return text
        i = m.end()
        while i < len(text) and text[i] not in "{;":
            i += 1
        if i < len(text) and text[i] == "{":
            depth = 0
            while i < len(text):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
        text = text[: m.start()] + text[i + 1 :]


def _rust_modules(src: Path) -> dict[tuple[str, ...], Path]:
    """Module path (`("port", "ring")`) → the file that holds it, for each file under `src`."""
    mods: dict[tuple[str, ...], Path] = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("").parts
        if rel in (("lib",), ("main",)):
            key: tuple[str, ...] = ()
        elif rel[-1] == "mod":
            key = rel[:-1]
        else:
            key = rel
        mods[key] = f
    return mods


def _expand_use(tree: str) -> list[list[str]]:
    """`a::{b, c::{d, e}}` → [[a, b], [a, c, d], [a, c, e]] (`as` renames dropped)."""
    tree = re.sub(r"\s+", "", re.sub(r"\bas\s+\w+", "", tree))
    depth, start, parts = 0, 0, []
    # Split the top level on commas.
    for i, c in enumerate(tree):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(tree[start:i])
            start = i + 1
    parts.append(tree[start:])
    paths: list[list[str]] = []
    for p in parts:
        if not p:
            continue
        b = p.find("{")
        if b < 0:
            paths.append(p.split("::"))
            continue
        prefix = [s for s in p[:b].split("::") if s]
        for sub in _expand_use(p[b + 1 : p.rindex("}")]):
            paths.append(prefix + sub)
    return paths


def _resolve(
    base: tuple[str, ...], segs: list[str], mods: dict[tuple[str, ...], Path]
) -> Path | None:
    """The file of the deepest module that `segs`, read from module `base`, names."""
    cur = base
    i = 0
    if segs and segs[0] == "crate":
        cur, i = (), 1
    elif segs and segs[0] in ("self", "super"):
        while i < len(segs) and segs[i] in ("self", "super"):
            if segs[i] == "super":
                cur = cur[:-1]
            i += 1
    elif not (segs and base + (segs[0],) in mods):
        return None  # an external crate, a prelude name or a local item
    while i < len(segs) and cur + (segs[i],) in mods:
        cur = cur + (segs[i],)
        i += 1
    return mods.get(cur)


def rust_imports(src: Path) -> dict[Path, set[Path]]:
    """Each file of the crate under `src` → the files of the crate it imports."""
    mods = _rust_modules(src)
    graph: dict[Path, set[Path]] = {}
    for key, f in mods.items():
        text = _strip_rust(f.read_text())
        paths: list[list[str]] = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths.extend(_expand_use(m.group(1)))
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", text):
            paths.append(m.group(1).split("::"))
        deps = set()
        for segs in paths:
            to = _resolve(key, segs, mods)
            if to is not None and to != f:
                deps.add(to)
        graph[f] = deps
    return graph


# ---------------------------------------------------------------------------------------------
# Python


def python_imports(pkg: Path) -> dict[Path, set[Path]]:
    """Each module of the package under `pkg` → the package's modules it imports (at any level,
    including imports inside functions: a deferred import is still a dependency)."""
    top = pkg.name
    files = {f: f.relative_to(pkg.parent).with_suffix("").parts for f in pkg.rglob("*.py")}
    by_name: dict[tuple[str, ...], Path] = {}
    for f, parts in files.items():
        by_name[parts[:-1] if parts[-1] == "__init__" else parts] = f
    graph: dict[Path, set[Path]] = {}
    for f, parts in files.items():
        here = parts[:-1] if parts[-1] == "__init__" else parts
        package = here if parts[-1] == "__init__" else here[:-1]
        deps: set[Path] = set()

        def add(name: tuple[str, ...], f: Path = f, deps: set[Path] = deps) -> None:
            if name[1:2] == ("_core",):
                return  # the Rust extension module: below everything
            while name and name not in by_name:
                name = name[:-1]
            if name and by_name[name] != f:
                deps.add(by_name[name])

        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == top:
                        add(tuple(a.name.split(".")))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    mod = base + (tuple(node.module.split(".")) if node.module else ())
                elif node.module and node.module.split(".")[0] == top:
                    mod = tuple(node.module.split("."))
                else:
                    continue
                for a in node.names:
                    add(mod + (a.name,))
        graph[f] = deps
    return graph


# ---------------------------------------------------------------------------------------------


def circles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected sets of two or more files (Tarjan)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on: set[Path] = set()
    out: list[list[Path]] = []
    counter = [0]

    def visit(v: Path) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(comps: list[list[Path]], root: Path) -> str:
    return "\n".join(
        f"circle of {len(c)}: " + ", ".join(str(p.relative_to(root)) for p in c) for c in comps
    )


@pytest.mark.parametrize("crate", RUST_CRATES)
def test_rust_crate_has_no_import_circle(crate: str) -> None:
    src = ROOT / "crates" / crate / "src"
    comps = circles(rust_imports(src))
    assert not comps, _describe(comps, src)


def test_python_package_has_no_import_circle() -> None:
    pkg = ROOT / "python" / "repflow"
    comps = circles(python_imports(pkg))
    assert not comps, _describe(comps, pkg)


def test_checker_finds_circles() -> None:
    """The checker itself: a parent that re-exports from a child that uses the parent."""
    mods = {(): Path("lib.rs"), ("a",): Path("a/mod.rs"), ("a", "b"): Path("a/b.rs")}
    assert _resolve(("a", "b"), ["super", "X"], mods) == Path("a/mod.rs")
    assert _resolve(("a",), ["b", "Y"], mods) == Path("a/b.rs")
    assert _resolve((), ["crate", "a", "b", "Z"], mods) == Path("a/b.rs")
    assert _resolve(("a",), ["std", "mem"], mods) is None
    assert _expand_use("crate::{a::{b, c as d}, e}") == [
        ["crate", "a", "b"],
        ["crate", "a", "c"],
        ["crate", "e"],
    ]
    g = {Path("x"): {Path("y")}, Path("y"): {Path("z")}, Path("z"): {Path("x")}, Path("w"): set()}
    assert circles(g) == [[Path("x"), Path("y"), Path("z")]]
    text = '// use crate::a;\nlet s = "crate::b";\n#[cfg(test)]\nmod t { use x; }\n'
    stripped = _strip_rust(text)
    assert "crate::" not in stripped and "mod t" not in stripped
