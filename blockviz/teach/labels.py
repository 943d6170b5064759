"""Readable names for what the engine shows: hash labels (H1, H2, ...) and token text."""
from __future__ import annotations

from collections.abc import Iterable

from blockviz.scenario.tokens import Vocabulary


class HashLabels:
    """H1, H2, ... in the order hashes are first cached over a timeline; parents from the chain."""

    def __init__(self) -> None:
        self.label: dict[bytes, str] = {}
        self.parent: dict[bytes, bytes | None] = {}

    def add_cache_op(self, op) -> None:
        hashes, parent = op.hashes, op.parent_hash
        for h in hashes:
            if h not in self.label:
                self.label[h] = f"H{len(self.label) + 1}"
            self.parent.setdefault(h, parent)
            parent = h

    @classmethod
    def from_ops(cls, ops_per_step: Iterable[Iterable]) -> HashLabels:
        labels = cls()
        for ops in ops_per_step:
            for op in ops:
                if op.kind == "cache":
                    labels.add_cache_op(op)
        return labels

    @classmethod
    def for_timeline(cls, timeline) -> HashLabels:
        return cls.from_ops(timeline.step_ops(i) for i in range(len(timeline)))

    def __call__(self, h: bytes | None) -> str:
        if h is None:
            return "—"
        return self.label.get(h) or h.hex()[:6]


def token_text(tokens: Iterable[int], vocab: Vocabulary | None, limit: int | None = None) -> str:
    """Tokens as words where the scenario wrote words, else as ids."""
    toks = list(tokens)
    more = limit is not None and len(toks) > limit
    if more:
        toks = toks[:limit]
    words = [(vocab.word(t) if vocab else None) or str(t) for t in toks]
    return " ".join(words) + (" …" if more else "")
