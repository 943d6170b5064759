"""The folders are the layers: imports flow one way, and no module imports itself in a circle.

i18n -> core -> scenario -> kv -> sim -> teach -> live -> render -> export -> ui -> cli. Every
import counts, at module level or inside a function, TYPE_CHECKING ones included: a type from a
higher layer is a dependency on it all the same."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "blockviz"
LAYERS = ["i18n", "core", "scenario", "kv", "sim", "teach", "live", "render", "export", "ui",
          "cli"]
TOP_LEVEL = {"__init__": "i18n", "__main__": "cli", "cli": "cli",  # modules at blockviz/
             "trace_cli": "cli"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return TOP_LEVEL["__init__"]
    return parts[1] if parts[1] in LAYERS else TOP_LEVEL[parts[1]]


def imports_of(path: Path) -> set[str]:
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("blockviz"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("blockviz"):
                continue
            # `from blockviz.x import y` may name a module y: count it as that module
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in MODULES else target)
    return {m for m in out if m in MODULES}


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}
GRAPH = {m: imports_of(p) - {m} for m, p in MODULES.items()}


def test_imports_flow_one_way():
    bad = []
    for mod, deps in sorted(GRAPH.items()):
        rank = LAYERS.index(layer_of(mod))
        for dep in sorted(deps):
            if LAYERS.index(layer_of(dep)) > rank:
                bad.append(f"{mod} ({layer_of(mod)}) imports {dep} ({layer_of(dep)})")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def test_no_import_circle():
    assert _cycles(GRAPH) == []


def test_the_checker_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("layer", ["core"])
def test_core_is_pure_python(layer):
    banned = ("torch", "plotly", "streamlit", "numpy")
    for mod, path in MODULES.items():
        if layer_of(mod) != layer:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in banned for n in names), f"{mod} imports {names}"
