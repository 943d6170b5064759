"""Prompt parts -> token ids, and the toy word tokenizer.

The word tokenizer is deterministic and keeps words for display: a word's id is
``WORD_BASE + crc32(word) % WORD_SPAN``, probing forward past ids taken by other words of the same
scenario (in order of first appearance), so one file always gives the same ids.
Random parts are seeded by (scenario seed, request id, part index).
"""
from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence

from blockviz.scenario.schema import VOCAB_SIZE, RandomPart, SameAsPart, Scenario, TextPart, TokensPart

WORD_BASE = 1_000
WORD_SPAN = VOCAB_SIZE - WORD_BASE
RANDOM_TOKEN_RANGE = (1, 1_000)
# The ids random parts draw from, one int object each, which every prompt's random tokens (and the
# engine's samples) share: a long run holds hundreds of thousands of them
RANDOM_IDS = tuple(range(*RANDOM_TOKEN_RANGE))


class Vocabulary:
    def __init__(self) -> None:
        self.word_to_id: dict[str, int] = {}
        self.id_to_word: dict[int, str] = {}

    def add(self, word: str) -> int:
        tid = self.word_to_id.get(word)
        if tid is not None:
            return tid
        if len(self.word_to_id) >= WORD_SPAN:
            raise ValueError("too many distinct words")
        slot = zlib.crc32(word.encode()) % WORD_SPAN
        while WORD_BASE + slot in self.id_to_word:
            slot = (slot + 1) % WORD_SPAN
        tid = WORD_BASE + slot
        self.word_to_id[word] = tid
        self.id_to_word[tid] = word
        return tid

    def encode(self, text: str) -> list[int]:
        return [self.add(w) for w in text.split()]

    def word(self, token_id: int) -> str | None:
        return self.id_to_word.get(token_id)

    @classmethod
    def for_scenario(cls, scenario: Scenario) -> Vocabulary:
        vocab = cls()
        for step in scenario.steps:
            if step.kind == "arrive":
                for part in step.arrive.prompt:
                    if isinstance(part, TextPart):
                        vocab.encode(part.text)
        return vocab


def resolve_prompt(parts: Sequence, *, request_id: str, seed: int, vocab: Vocabulary,
                   tokens_of: Callable[[str], list[int]]) -> list[int]:
    """The prompt's token ids. ``tokens_of(id)`` gives an earlier request's tokens (prompt then
    output); a ``same_as`` asking for more than it has raises ValueError."""
    out: list[int] = []
    for j, part in enumerate(parts):
        if isinstance(part, TokensPart):
            out.extend(part.tokens)
        elif isinstance(part, TextPart):
            out.extend(vocab.encode(part.text))
        elif isinstance(part, RandomPart):
            rng = random.Random(f"{seed}/{request_id}/{j}")
            lo, hi = RANDOM_TOKEN_RANGE
            out.extend([RANDOM_IDS[rng.randrange(lo, hi) - lo] for _ in range(part.random)])
        elif isinstance(part, SameAsPart):
            source = tokens_of(part.same_as)
            n = len(source) if part.first is None else part.first
            if n > len(source):
                raise ValueError(f"same_as {part.same_as!r} asks for its first {n} tokens but it "
                                 f"has {len(source)}")
            out.extend(source[:n])
    return out
