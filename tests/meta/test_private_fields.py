"""No module reads another module's private names (issue 27).

A name with one leading underscore is its module's own: a field, method, function or hook that the
module may change without telling anyone. Another module that reads it — ``obj._rows``,
``trace_cli._int_in``, ``from blockviz.x import _y``, or a monkeypatch of ``B._now`` — is coupled to
what was never promised. A name is the module's own when the module defines it: ``self._x = ...``
or ``cls._x``, a ``def``/``class``, a module- or class-level assignment, a ``__slots__`` entry or
a dataclass field. ``self._x`` and ``cls._x`` are always fine; so are the underscore names that are
public API of Python itself (a NamedTuple's ``_fields``, ``_replace``...)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "blockviz"
# public API of the standard library, spelled with an underscore
PYTHON_API = {"_fields", "_replace", "_asdict", "_make", "_field_defaults"}


def own_names(tree: ast.AST) -> set[str]:
    """The private names a module defines."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            out.add(n.name)
            out.update(a.arg for a in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs))
        elif isinstance(n, ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and (
                isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.add(n.value)                        # __slots__ entries, getattr/setattr names
        elif isinstance(n, ast.keyword) and n.arg:
            out.add(n.arg)
    return out


def private_reads(source: str, pkg: str = "blockviz") -> list[tuple[int, str]]:
    """(line, what) for each private name of another module that ``source`` reads or sets."""
    tree = ast.parse(source)
    own = own_names(tree)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__"):
            if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                continue
            if n.attr not in own and n.attr not in PYTHON_API:
                out.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == pkg:
            out += [(n.lineno, f"from {n.module} import {a.name}") for a in n.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_the_check_finds_what_it_is_for():
    src = ("from blockviz.sim import budget as B\nfrom blockviz.sim.oplog import _spec\n"
           "class A:\n    __slots__ = ('_mine',)\n    def f(self, other):\n"
           "        B._now = None\n        return other._rows, self._x, other._mine, t._fields\n")
    assert [what for _, what in private_reads(src)] == [
        "from blockviz.sim.oplog import _spec", "B._now", "other._rows"]


def test_no_module_reads_another_modules_private_names():
    found = [f"{path.relative_to(PKG.parent)}:{line}: {what}"
             for path in sorted(PKG.rglob("*.py"))
             for line, what in private_reads(path.read_text(encoding="utf-8"))]
    assert not found, "private names of other modules:\n" + "\n".join(found)
