"""The prefix hash table (``BlockHashToBlockMap``): hash label → block id(s), drawn as the chain
parent → child (a tree: each hash hangs under its parent), with duplicates (one hash, two or more
blocks — the map does not de-duplicate) flagged, hashes added in this step highlighted and hashes
evicted in this step struck through, above the rest."""
from __future__ import annotations

from collections.abc import Collection

from blockviz.core.hashing import split_block_key
from blockviz.i18n import t
from blockviz.render import groups as rgroups
from blockviz.render.theme import esc
from blockviz.teach.labels import HashLabels

MAX_ROWS = 60
MAX_INDENT = 6    # a 100-block chain stays readable: deeper levels share the last indent


def _tree(table, labels: HashLabels) -> list[tuple[int, bytes, tuple[int, ...]]]:
    """(depth, hash, ids) in depth-first order; a hash whose parent is not in the table is a root."""
    present = {h for h, _ in table}
    children: dict[bytes, list] = {}
    roots = []
    for h, ids in table:
        p = labels.parent.get(h)
        if p is not None and p in present and p != h:
            children.setdefault(p, []).append((h, ids))
        else:
            roots.append((h, ids))
    out: list[tuple[int, bytes, tuple[int, ...]]] = []
    seen: set[bytes] = set()
    stack = [(0, h, ids) for h, ids in reversed(roots)]
    while stack:
        depth, h, ids = stack.pop()
        if h in seen:
            continue
        seen.add(h)
        out.append((depth, h, ids))
        stack += [(depth + 1, c, cids) for c, cids in reversed(children.get(h, []))]
    return out


def hash_table_html(table, *, labels: HashLabels, state, lang: str = "en",
                    added: Collection[bytes] = (), removed: Collection[bytes] = (),
                    max_rows: int = MAX_ROWS) -> str:
    """``table``: ((hash, block ids), ...) in map order. ``state`` gives ref_cnt, to draw free
    blocks dashed. ``removed``: hashes evicted in this step."""
    added = frozenset(added)
    # the hashes evicted in this step first, struck through: the step's change, where the eye
    # starts (below a long tree they were under the panel's fold at 1280×800)
    rows = [f'<tr class="bv-row-gone" data-hash="{esc(labels(h))}"><td>{esc(labels(h))}</td>'
            f'<td></td><td><span class="bv-tag bv-tag-gone">{esc(t("tag_evicted", lang))}'
            f'</span></td></tr>' for h in removed]
    tree = _tree(table, labels)
    for depth, h, ids in tree[:max_rows]:
        parent = labels.parent.get(h)
        indent = ("   " * min(depth - 1, MAX_INDENT) + " └─ ") if depth else ""
        chips = " ".join(_chip(b, state) for b in ids)
        notes = ""
        if len(ids) > 1:
            notes += f' <span class="bv-dup">{esc(t("duplicate", lang))} ×{len(ids)}</span>'
        if h in added:
            notes += f' <span class="bv-tag bv-tag-new">{esc(t("tag_new_hash", lang))}</span>'
        cls = ' class="bv-row-new"' if h in added else ""
        rows.append(f'<tr{cls} data-hash="{esc(labels(h))}"><td><span class="bv-tree">{indent}</span>'
                    f'<span class="bv-hl">{_key_html(h, labels, lang)}</span></td>'
                    f'<td class="bv-muted">{esc(labels(parent)) if parent else "—"}</td>'
                    f'<td>{chips}{notes}</td></tr>')
    if len(tree) > max_rows:
        rows.append(f'<tr><td colspan="3" class="bv-more">… '
                    f'{esc(t("more_items", lang, n=f"{len(tree) - max_rows:,}"))} …</td></tr>')
    if not rows:
        return f'<div class="bv bv-panel"><div class="bv-muted">{esc(t("empty", lang))}</div></div>'
    key = (f'<th title="{esc(t("grp_key_title", lang))}">{esc(t("hash_group", lang))}</th>'
           if labels.hybrid else "<th>hash</th>")
    head = (f'<tr>{key}<th>{esc(t("parent", lang))}</th>'
            f'<th>{esc(t("block_ids", lang))}</th></tr>')
    return f'<div class="bv bv-panel"><table class="bv-table">{head}{"".join(rows)}</table></div>'


def _chip(b: int, state) -> str:
    style = "border-style:dashed" if state.ref_cnt[b] == 0 else ""
    return f'<span class="bv-b bv-local" style="{style}" data-block="{b}">{b}</span>'


def _key_html(h: bytes, labels: HashLabels, lang: str) -> str:
    """The row's key: its hash label, and with several KV-cache groups the group it is keyed by
    (vLLM's BlockHashWithGroupId: ``H3#1``, the ``#1`` naming group 1 in its title)."""
    g = split_block_key(h)[1]
    if g is None or not labels.hybrid:
        return esc(labels(h))
    spec = labels.groups[g]
    return (f'{esc(labels.bare(h))}<span class="bv-hg" data-bv-group="{g}" '
            f'title="{esc(rgroups.group_title(g, spec, lang))}">#{g}</span>')
