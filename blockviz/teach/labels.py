"""Readable names for what the engine shows: hash labels (H1, H2, ...), KV-cache groups and token
text."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from blockviz.core.hashing import split_block_key
from blockviz.scenario.tokens import Vocabulary


class _Parents(dict):
    """Bare hash -> the bare hash before it in its chain; looked up by pool key or bare hash."""

    def get(self, key, default=None):
        return super().get(split_block_key(key)[0], default)


class HashLabels:
    """H1, H2, ... in the order hashes are first cached over a timeline; parents from the chain.

    A label names a ``BlockHash``: with several KV-cache groups the pool keys one hash once per
    group that caches it, and those keys are one hash, so they share its label, written with the
    group as the JSON writes the key (``H3#1``: H3 cached in group 1). ``groups`` are the
    timeline's KV-cache groups (None: one full-attention group), for naming an op's group."""

    def __init__(self, groups: Sequence | None = None) -> None:
        self.label: dict[bytes, str] = {}                 # bare hash -> "H1"
        self.parent = _Parents()        # .get(pool key or hash) -> the bare hash before it
        self.groups = tuple(groups) if groups is not None else None

    @property
    def hybrid(self) -> bool:
        """Two or more KV-cache groups: ops and keys name their group."""
        return self.groups is not None and len(self.groups) > 1

    @classmethod
    def for_timeline(cls, timeline) -> HashLabels:
        """The labels of every hash a timeline caches, numbered in the order they are cached."""
        labels = cls(getattr(timeline, "kv_cache_groups", None))
        for i in range(len(timeline)):
            for op in timeline.step_ops(i, ("cache",)):
                # the op's hashes follow its parent in one chain unless a retention mask skipped some
                chain = not getattr(op, "masked", ())
                parent = op.parent_hash
                for h in op.hashes:
                    bare = split_block_key(h)[0]
                    if bare not in labels.label:
                        labels.label[bare] = f"H{len(labels.label) + 1}"
                    if chain:
                        dict.setdefault(labels.parent, bare, parent)
                    parent = bare
        return labels

    def bare(self, h: bytes) -> str:
        """The hash's label without its group: ``H3`` for H3 in any group."""
        bare = split_block_key(h)[0]
        return self.label.get(bare) or bare.hex()[:6]

    def __call__(self, h: bytes | None) -> str:
        if h is None:
            return "—"
        group = split_block_key(h)[1]
        return self.bare(h) if group is None else f"{self.bare(h)}#{group}"


def token_text(tokens: Iterable[int], vocab: Vocabulary | None, limit: int | None = None) -> str:
    """Tokens as words where the scenario wrote words, else as ids."""
    toks = list(tokens)
    words = [(vocab.word(t) if vocab else None) or str(t) for t in toks[:limit]]
    return " ".join(words) + (" …" if limit is not None and len(toks) > limit else "")
