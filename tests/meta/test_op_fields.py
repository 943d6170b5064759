"""Op records are read by field name: nothing outside blockviz/core/ops.py indexes or unpacks one
by position (a record's layout may then change without a silent misread)."""
from __future__ import annotations

import ast
from pathlib import Path

from blockviz.core import ops as O

ROOT = Path(__file__).resolve().parents[2]
OPS_MODULE = ROOT / "blockviz" / "core" / "ops.py"
OP_NAMES = {"op", "o", "rec_op", "first_op", "last_op"}


def _is_op_expr(node: ast.AST) -> bool:
    """`op`, `something.op`, or `ops[i]` / `step_ops(i)[j]` — an expression holding an op record."""
    if isinstance(node, ast.Name):
        return node.id in OP_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr == "op"
    if isinstance(node, ast.Subscript):   # ops[j] is a record; ops[j][0] reads it by position
        inner = node.value
        return (isinstance(inner, ast.Name) and inner.id.endswith("ops")) or (
            isinstance(inner, ast.Attribute) and inner.attr.endswith("ops"))
    return False


def _holds_ops(node: ast.AST) -> bool:
    """A collection of op records: `ops`, `step_ops(i)`, `checks`, `x.ops` (not `enumerate(ops)`)."""
    if isinstance(node, ast.Call):
        f = node.func
        return isinstance(f, ast.Attribute | ast.Name) and (
            getattr(f, "attr", None) or getattr(f, "id", "")) in ("step_ops", "verify_ops")
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name.endswith("ops") or name in ("checks", "records")


def positional_reads(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_op_expr(node.value):
            idx = node.slice
            if isinstance(idx, ast.Slice) or (isinstance(idx, ast.Constant)
                                              and isinstance(idx.value, int)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Assign) and _is_op_expr(node.value) and any(
                isinstance(t, ast.Tuple | ast.List) for t in node.targets):
            lines.append(node.lineno)
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Tuple) and _holds_ops(node.iter):
            lines.append(node.lineno)
    return lines


def test_no_op_field_is_read_by_position():
    offenders = []
    for base in ("blockviz", "tests", "bench"):
        for path in sorted((ROOT / base).rglob("*.py")):
            if path == OPS_MODULE:
                continue
            for line in positional_reads(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, "op fields read by position (use the field names):\n" + "\n".join(offenders)


def test_the_checker_catches_each_form():
    assert positional_reads("x = op[1]") == [1]
    assert positional_reads("x = frame.op[0]") == [1]
    assert positional_reads("x = ops[j][2]") == [1]
    assert positional_reads("rid, a = op[1:3]") == [1]
    assert positional_reads("_, rid = op") == [1]
    assert positional_reads("for _, rid in checks:\n    pass") == [1]
    assert positional_reads("for _, rid in tl.step_ops(3):\n    pass") == [1]
    assert positional_reads("for j, op in enumerate(ops):\n    pass") == []
    assert positional_reads("x = op.request_id\ny = ops[0]\nz = table[1]") == []


def test_each_kind_is_one_record_with_its_vllm_function():
    kinds = [r.kind for r in O.RECORDS]
    assert len(kinds) == len(set(kinds))
    assert all(r.fn for r in O.RECORDS)
    d = O.op_to_dict(O.Evict(3, b"\x01\x02"))
    assert d == {"op": "evict", "fn": "BlockPool._maybe_evict_cached_block", "block_ids": [3],
                 "hash": "0102"}
    d = O.op_to_dict(O.Cache("A", (1, 2), (b"\xaa", b"\xbb"), 0, None))
    assert d == {"op": "cache", "fn": "BlockPool.cache_full_blocks", "block_ids": [1, 2],
                 "request": "A", "hashes": ["aa", "bb"], "first_block_index": 0,
                 "parent_hash": None}
