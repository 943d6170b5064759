"""Try it yourself: a scenario's configuration and first K steps, plus events a learner adds, written
back as a scenario file in the documented format (shared/design/scenario-format.md).

The engine is deterministic for a file, so the fork replays to exactly the state the learner saw:
the same config (every field written out, ``model: null`` included), the same first K steps (notes
kept, and each arrival's sampled outputs scripted: see ``fork_steps``), then the added events.
Pure: no Streamlit, no engine; the events are plain dicts as a YAML file would hold them, and
``fork_text`` → ``load_text`` is the only way back into the engine.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from blockviz.i18n import LANGS, texts
from blockviz.scenario.schema import BARE_EVENTS, VOCAB_SIZE, Scenario, Step, request_id

MAX_ID = 64


# -- steps and scenarios as YAML data ---------------------------------------------------------
def step_doc(step: Step) -> Any:
    """A validated step as a scenario file writes it (defaults left out, so it reads like one)."""
    d = step.model_dump(mode="json", exclude_defaults=True)
    kind = step.kind
    if kind == "finish" and len(d["finish"]) == 1:
        d["finish"] = d["finish"][0]
    if kind in BARE_EVENTS and set(d) == {kind}:
        return kind
    return d


def fork_id(base: str) -> str:
    suffix = "-fork"
    stem = base[:MAX_ID - len(suffix)]
    return stem if stem.endswith(suffix) else stem + suffix


def observed_outputs(scenario: Scenario, timeline, upto: int) -> dict[int, tuple[int, ...]]:
    """Arrive step (0-based index) -> the output tokens its request had sampled by step ``upto``
    of ``timeline`` (a run of ``scenario``). A rewind undoes outputs but never changes them: a
    request samples the same token at the same position again, so the longest list seen is it."""
    alive: dict[str, int] = {}             # request id -> the arrive step of its current life
    saved: dict[str, dict[str, int]] = {}
    out: dict[int, tuple[int, ...]] = {}
    for i, step in enumerate(scenario.steps[:min(upto, len(timeline) - 1)]):
        if step.kind == "arrive":
            alive[step.args.id] = i
        elif step.kind == "checkpoint":
            saved[step.args] = dict(alive)
        elif step.kind == "rewind":
            alive = dict(saved.get(step.args, alive))
        sampled = {op.request_id for op in timeline.step_ops(i + 1) if op.kind == "sample"}
        if not sampled:
            continue
        touched = timeline.step_requests(i + 1)    # a sample op names its request: it is here
        for rid in sampled:
            r = touched.get(rid)
            if r is None or rid not in alive:
                continue
            tokens = r.token_ids[r.num_prompt_tokens:]
            if len(tokens) > len(out.get(alive[rid], ())):
                out[alive[rid]] = tokens
    return out


def fork_steps(scenario: Scenario, upto: int, timeline=None) -> list:
    """Steps 1..``upto`` of ``scenario`` as a file writes them. With ``timeline`` (its run), each
    arrival also scripts the outputs its request sampled (``output: [...]``), so that the fork
    replays to the state it was forked from even after its prompts are edited (a request samples
    among its own prompt's words: change them and it would sample other tokens)."""
    if not 0 <= upto <= len(scenario.steps):
        raise ValueError(f"step {upto} is not a step of {scenario.id!r} (0 to {len(scenario.steps)})")
    outputs = observed_outputs(scenario, timeline, upto) if timeline is not None else {}
    docs = []
    for i, step in enumerate(scenario.steps[:upto]):
        d = step_doc(step)
        seen = outputs.get(i, ())
        if step.kind == "arrive" and len(seen) > len(step.args.output or ()):
            d["arrive"]["output"] = list(seen)
        docs.append(d)
    return docs


def fork_doc(base: Scenario, upto: int, steps: Sequence[Any]) -> dict:
    """The fork of ``base`` at step ``upto`` as a scenario document: its own id, title and
    summary, ``base``'s notes and full config (every field, nulls included: ``model: null`` means
    no payloads, and a left-out field would take its default), and ``steps`` (``fork_steps`` and
    then the events added, as a file holds them)."""
    titles = {lang: base.title.get(lang) for lang in LANGS}
    doc: dict[str, Any] = {"id": fork_id(base.id),
                           "title": texts("fork_scenario_title", title=titles, k=upto),
                           "summary": texts("fork_summary", title=titles, id=base.id, k=upto)}
    for name in ("start_note", "start_caption"):
        text = getattr(base, name)
        if text is not None:
            doc[name] = text.model_dump(mode="json", exclude_none=True)
    doc["config"] = base.config.model_dump(mode="json")
    doc["steps"] = list(steps)
    return doc


class _Dumper(yaml.SafeDumper):
    """Block style, except lists of numbers (token ids), which read best on one line."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = bool(data) and all(isinstance(x, int) and not isinstance(x, bool) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def to_yaml(doc: dict, header: str = "") -> str:
    """YAML text of a scenario document; ``header`` becomes comment lines at the top."""
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lines + body


def fork_text(base: Scenario, upto: int, steps: Sequence[Any]) -> str:
    header = (f"Forked from scenario {base.id!r} at step {upto} with blockviz (try it yourself).\n"
              f"An arrival's `output:` lists the tokens its request sampled, so that the fork replays\n"
              f"exactly, even after you edit its prompts.\n"
              f"Replay it: python -m blockviz play FILE   (or open it on the Author page)")
    return to_yaml(fork_doc(base, upto, steps), header)


# -- events a learner adds (plain dicts, as a scenario file holds them) -----------------------
_INT_SPLIT = re.compile(r"[\s,;]+")


def parse_token_ids(text: str) -> list[int]:
    """``"1 2 3"`` / ``"1, 2, 3"`` / ``"[1, 2, 3]"`` → token ids; ValueError with a reason."""
    body = text.strip().strip("[]").strip()
    if not body:
        raise ValueError("no token ids")
    out = []
    for word in _INT_SPLIT.split(body):
        if not word:
            continue
        if not re.fullmatch(r"\d{1,6}", word):
            raise ValueError(f"{word!r} is not a token id")
        v = int(word)
        if v >= VOCAB_SIZE:
            raise ValueError(f"token id {v} is out of range (0 to {VOCAB_SIZE - 1})")
        out.append(v)
    return out


def tokens_part(text: str) -> dict:
    return {"tokens": parse_token_ids(text)}


def text_part(text: str) -> dict:
    if not text.split():
        raise ValueError("the text has no words")
    return {"text": text.strip()}


def same_as_part(rid: str, first: int | None = None) -> dict:
    part: dict[str, Any] = {"same_as": rid}
    if first:
        part["first"] = int(first)
    return part


def random_part(n: int) -> dict:
    if int(n) < 1:
        raise ValueError("random needs at least 1 token")
    return {"random": int(n)}


def arrive_event(rid: str, parts: Sequence[dict], *, max_tokens: int | None = None,
                 cache_salt: str | None = None, lora: str | None = None) -> dict:
    spec: dict[str, Any] = {"id": rid, "prompt": list(parts)}
    if max_tokens:
        spec["max_tokens"] = int(max_tokens)
    if cache_salt:
        spec["cache_salt"] = cache_salt
    if lora:
        spec["lora"] = lora
    return {"arrive": spec}


def decode_event(steps: int = 1, requests: Sequence[str] | None = None) -> dict:
    spec: dict[str, Any] = {}
    if requests:
        spec["requests"] = list(requests)
    if steps != 1:
        spec["steps"] = int(steps)
    return {"decode": spec}


def step_event(n: int = 1) -> Any:
    return "step" if n == 1 else {"step": int(n)}


def finish_event(ids: Sequence[str]) -> dict:
    ids = list(ids)
    return {"finish": ids[0] if len(ids) == 1 else ids}


def preempt_event(rid: str) -> dict:
    return {"preempt": rid}


def reset_event() -> str:
    return "reset_prefix_cache"


def next_request_id(taken: Iterable[str]) -> str:
    """The first ``request_id`` not taken."""
    used = set(taken)
    n = 1
    while request_id(n) in used:
        n += 1
    return request_id(n)
