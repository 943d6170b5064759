"""Self-check: before the next step is revealed, the learner predicts what it will do, and is told
what was right and why. Pure: a timeline and an answer in, a Grade out (no Streamlit).

Three questions about step ``index`` (the step about to be revealed):

  queue   the free queue after the step, head (taken first) to tail
  hits    which blocks the step's admissions hit in the prefix cache (the blocks ``touch`` reuses)
  victim  which block the next allocation takes first: the head of the free queue after the step
          (if it still carries a hash, taking it is an eviction)
  evict   whose cached prefix is evicted next: the first block from the head of the free queue
          that still carries a hash (none when no free block does)
  window  (a hybrid model with a sliding-window or chunked-local group) which blocks the step's
          windows hand back: those ``remove_skipped_blocks`` replaced by the null block and freed

The "why" is the engine's own narration of the ops that decided the answer (``narrate_ops``) plus
the rule behind them.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from blockviz.i18n import t
from blockviz.teach.labels import HashLabels
from blockviz.teach.narrate import narrate_ops

QUESTIONS = ("queue", "hits", "victim", "evict", "window")

# the ops whose narration explains each answer
_QUEUE_OPS = frozenset({"popleft", "evict", "touch", "free", "free_head", "free_tail", "reset",
                        "alloc_failed", "preempt", "rewind", "restart"})
_HIT_OPS = frozenset({"lookup", "touch", "alloc_failed", "admit", "load"})
_WINDOW_OPS = frozenset({"remove_skipped", "free_head", "free_tail"})
_WHY_OPS = {"queue": _QUEUE_OPS, "victim": _QUEUE_OPS, "evict": _QUEUE_OPS, "hits": _HIT_OPS,
            "window": _WINDOW_OPS}
_LOCAL = frozenset({"sliding_window", "chunked_local_attention"})

_SEPARATORS = re.compile(r"[\s,;，、→>\-–—|]+")
_WORDS = re.compile(r"(?i)\b(head|tail|none|empty|blocks?)\b|队首|队尾|无|空|块")


@dataclass(frozen=True)
class Grade:
    kind: str                   # one of QUESTIONS
    correct: bool
    expected: tuple[int, ...]   # queue: in order; hits: sorted; victim: () or (block,)
    answer: tuple[int, ...]
    verdict: str                # one sentence: right, or what the answer is
    details: tuple[str, ...]    # what differs (empty when right)
    why: tuple[str, ...]        # the rule and the engine's narration of the deciding ops


def parse_ids(text: str) -> tuple[int, ...]:
    """Block ids as a learner types them: ``4 3 5``, ``4, 3, 5``, ``[4 → 3 → 5]``,
    ``head 4 3 5 tail``; ``none`` / an empty answer is ``()``. ValueError names what is not an id."""
    body = _WORDS.sub(" ", text.strip().strip("[](){}"))
    out = []
    for word in _SEPARATORS.split(body):
        if not word:
            continue
        if not word.isdigit() or len(word) > 7:
            raise ValueError(word)
        out.append(int(word))
    return tuple(out)


# -- expected answers ---------------------------------------------------------------------
def hit_blocks(ops: Iterable[tuple]) -> tuple[int, ...]:
    """The blocks a step's admissions hit: those ``touch`` took (a lookup whose allocation then
    failed hits nothing — the request keeps waiting)."""
    return tuple(sorted({b for op in ops if op.kind == "touch" for b in op.block_ids}))


def questions(timeline) -> tuple[str, ...]:
    """The questions a run can ask: ``window`` only where some KV-cache group has a window."""
    groups = getattr(timeline, "kv_cache_groups", None) or ()
    return QUESTIONS if any(g.type in _LOCAL for g in groups) else QUESTIONS[:-1]


def window_blocks(ops: Iterable[tuple]) -> tuple[int, ...]:
    """The blocks a step's windows handed back: each ``remove_skipped`` replaced them by the null
    block and freed them (a hit's null padding names none)."""
    return tuple(sorted({b for op in ops if op.kind == "remove_skipped" for b in op.block_ids}))


def next_marks(state) -> tuple[int | None, int | None]:
    """(the block the next allocation takes: the free queue's head, the block whose cached prefix
    is evicted next: the first block from the head that still has a hash). They are one block when
    the head is cached; a queue with no cached block has no prefix to evict."""
    q, hashes = state.free_queue, state.block_hash
    head = q[0] if q else None
    prefix = next((b for b in q if hashes[b] is not None), None)
    return head, prefix


def expected(timeline, index: int, kind: str) -> tuple[int, ...]:
    s = timeline.step(index)
    if kind == "queue":
        return tuple(s.free_queue)
    if kind == "hits":
        return hit_blocks(timeline.step_ops(index))
    if kind == "window":
        return window_blocks(timeline.step_ops(index))
    if kind in ("victim", "evict"):
        b = next_marks(s)[kind == "evict"]
        return () if b is None else (b,)
    raise ValueError(f"unknown question {kind!r}")


def has_admission(timeline, index: int) -> bool:
    """Whether step ``index`` looks anything up (the hits question is interesting)."""
    return any(op.kind == "lookup" for op in timeline.step_ops(index))


def default_question(timeline, index: int) -> str:
    """The question that suits step ``index``: which blocks leave a window where some do, which
    blocks hit where a request is looked up, else the free queue."""
    if "window" in questions(timeline) and window_blocks(timeline.step_ops(index)):
        return "window"
    return "hits" if has_admission(timeline, index) else "queue"


# -- grading (plain values) ---------------------------------------------------------------
def _ids(ids: Sequence[int], lang: str) -> str:
    return " ".join(map(str, ids)) if ids else t("none", lang)


def grade_queue(answer: Sequence[int], want: Sequence[int], lang: str) -> tuple[bool, str, list[str]]:
    answer, want = tuple(answer), tuple(want)
    if answer == want:
        return True, t("sc_queue_right", lang, q=_ids(want, lang)), []
    missing = [b for b in want if b not in answer]
    extra = [b for b in dict.fromkeys(answer) if b not in want]
    dupes = sorted({b for b in answer if answer.count(b) > 1})
    details = [t(key, lang, ids=_ids(ids, lang))
               for key, ids in (("sc_missing", missing), ("sc_not_free", extra), ("sc_dupes", dupes)) if ids]
    if not details:                  # the right blocks, each once: the order differs
        pos = next(i for i, (a, b) in enumerate(zip(answer, want)) if a != b)
        details.append(t("sc_order", lang, p=pos + 1, e=want[pos], a=answer[pos]))
    return False, t("sc_queue_wrong", lang, q=_ids(want, lang), a=_ids(answer, lang)), details


def grade_set(answer: Iterable[int], want: Iterable[int], lang: str,
              kind: str = "hits") -> tuple[bool, str, list[str]]:
    """A set of blocks: the blocks a step hits (``hits``), or those its windows replaced by the
    null block (``window``); the order does not matter."""
    a, w = sorted(set(answer)), sorted(set(want))
    if a == w:
        key = f"sc_{kind}_right" if w else f"sc_{kind}_right_none"
        return True, t(key, lang, ids=_ids(w, lang)), []
    missed = [b for b in w if b not in a]
    wrong = [b for b in a if b not in w]
    details = [t(f"sc_{kind}_{key}", lang, ids=_ids(ids, lang))
               for key, ids in (("missed", missed), ("wrong", wrong)) if ids]
    key = f"sc_{kind}_wrong_all" if w else f"sc_{kind}_none"
    return False, t(key, lang, ids=_ids(w, lang), a=_ids(a, lang)), details


def grade_victim(answer: int | None, want: int | None, lang: str,
                 kind: str = "victim") -> tuple[bool, str, list[str]]:
    """One block or none: the next allocation's (``victim``) or the next evicted prefix's (``evict``)."""
    ok = answer == want
    said = [] if ok else [t("sc_victim_said", lang, a=answer) if answer is not None
                          else t("sc_victim_said_none", lang)]
    if want is None:
        return ok, t(f"sc_{kind}_empty_right" if ok else f"sc_{kind}_empty_wrong", lang), said
    return ok, t(f"sc_{kind}_right" if ok else f"sc_{kind}_wrong", lang, b=want), said


# -- the whole check ------------------------------------------------------------------------
def check(timeline, index: int, kind: str, answer: Sequence[int], lang: str,
          labels: HashLabels | None = None, free_order: str = "split") -> Grade:
    """Grade a prediction of step ``index`` (1 ≤ index < len(timeline))."""
    if not 1 <= index < len(timeline):
        raise ValueError(f"step {index} cannot be predicted (1 to {len(timeline) - 1})")
    labels = labels or HashLabels.for_timeline(timeline)
    want = expected(timeline, index, kind)
    answer = tuple(answer)
    if kind == "queue":
        ok, verdict, details = grade_queue(answer, want, lang)
    elif kind in ("hits", "window"):
        ok, verdict, details = grade_set(answer, want, lang, kind)
        answer = tuple(sorted(set(answer)))
    else:
        if len(answer) > 1:
            raise ValueError("one block, or none")
        ok, verdict, details = grade_victim(answer[0] if answer else None,
                                            want[0] if want else None, lang, kind)
    rule = {"queue": f"sc_rule_queue_{free_order}", "victim": "sc_rule_victim",
            "evict": "sc_rule_evict", "window": "sc_rule_window",
            "hits": "sc_rule_hits_groups" if labels.hybrid else "sc_rule_hits"}[kind]
    ops = [op for op in timeline.step_ops(index) if op.kind in _WHY_OPS[kind]]
    said = narrate_ops(ops, lang, labels, timeline.vocab, timeline.block_size)
    return Grade(kind, ok, want, answer, verdict, tuple(details),
                 (t(rule, lang),) + tuple(said or [t("sc_no_ops", lang)]))
