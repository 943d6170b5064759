"""What the Author page knows, without Streamlit: the starter text, the field reference generated
from the JSON Schema, example events (snippets) and where to insert them, and the rules for an
uploaded file. Everything from a user's file stays data: nothing here evaluates it."""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from blockviz.i18n import STRINGS, t, texts
from blockviz.scenario import ScenarioError, UnreadableFile, json_schema, load_bytes
from blockviz.scenario.schema import EVENT_NAMES, MAX_BLOCK_SIZE, MAX_NUM_BLOCKS
from blockviz.sim.fork import next_request_id, to_yaml

STARTER = """\
# A new scenario. Edit it: every change is checked, and a valid one runs in the preview.
# The "Format reference" tab lists every field; the buttons below insert example events.
id: my-scenario
title: {en: "My scenario", zh: "我的场景"}
config:
  num_blocks: 4          # usable blocks; block 0 is the null block
  block_size: 4
  free_order: split      # split (vLLM >= 0.24) | append (vLLM <= 0.23)
steps:
  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5, 6]}]}
    note: {en: "A needs two blocks; the first one is full, so it gets a hash.",
           zh: "A 需要两个块；第一个块装满了，所以得到一个 hash。"}
  - arrive: {id: B, prompt: [{same_as: A, first: 4}, {random: 3}]}
    note: {en: "B starts with A's first 4 tokens: block 1 hits.",
           zh: "B 的前 4 个 token 和 A 相同：块 1 命中。"}
  - finish: A
  - finish: B
"""


# -- the field reference, generated from the JSON Schema ------------------------------------
@dataclass(frozen=True)
class Field:
    name: str
    type: str
    default: str        # "" when required
    required: bool
    description: str    # the schema's own description (English), if any
    key: str = ""       # the i18n key of its description in both languages (blockviz.i18n.fields)

    def doc(self, lang: str) -> str:
        """What the field means, in ``lang`` (the schema's English when no translation exists)."""
        return t(self.key, lang) if self.key else self.description


@dataclass(frozen=True)
class Section:
    key: str                 # "scenario", "config", "model", "connector", "event:arrive", "part:tokens"
    fields: tuple[Field, ...]
    example: str = ""        # YAML


# how a definition reads in the reference: the shape an author writes, not a class name
REF_NAMES = {
    "Text": "text | {en: …, zh: …}", "Config": "{config: see below}", "Step": "{event}",
    "ModelConfig": "{model: see below}", "ConnectorConfig": "{connector: see below}",
    "TokensPart": "{tokens: [ids]}", "TextPart": "{text: words}", "SameAsPart": "{same_as: ID, first: N}",
    "RandomPart": "{random: N}", "LoRASpec": "NAME | {name, path}", "MMSpec": "{id, offset, length}",
    "ArriveSpec": "{id, prompt, …}", "DecodeSpec": "{requests, steps}",
}


def type_text(prop: dict) -> str:
    """A schema property in a few words: ``integer 1–65536``, ``sha256 | xxhash``, ``list of ...``."""
    if "anyOf" in prop:
        kinds = [type_text(p) for p in prop["anyOf"] if p.get("type") != "null"]
        nullable = any(p.get("type") == "null" for p in prop["anyOf"])
        return " | ".join(kinds) + (" | null" if nullable else "")
    if "oneOf" in prop:
        return " | ".join(type_text(p) for p in prop["oneOf"])
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return REF_NAMES.get(name, f"{{{name}}}")
    if "enum" in prop:
        return " | ".join(str(v) for v in prop["enum"])
    if "const" in prop:
        return str(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {type_text(prop.get('items', {}))}"
    if kind == "integer":
        lo = prop.get("minimum")
        hi = prop.get("maximum", None)
        if hi is None and "exclusiveMaximum" in prop:
            hi = prop["exclusiveMaximum"] - 1
        if lo is not None and hi is not None:
            return f"integer {lo}–{hi}"
        if lo is not None:
            return f"integer ≥ {lo}"
        return "integer"
    if kind == "boolean":
        return "true | false"
    if kind == "string":
        return "text"
    return str(kind)


def _default_text(prop: dict) -> str:
    if "default" not in prop:
        return ""
    d = prop["default"]
    if d is None:
        return "null"
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, dict):
        if len(d) > 4:
            return "{…}"            # a whole section: its own table lists the defaults
        return "{" + ", ".join(f"{k}: {_default_text({'default': v})}" for k, v in d.items()) + "}"
    return str(d)


def doc_key(section: str, name: str) -> str:
    """The i18n key of a field's description (``""`` when there is none)."""
    key = f"fd_{section}_{name}"
    return key if key in STRINGS else ""


# the reference's section for each definition (the i18n keys of its fields' descriptions)
DEF_SECTIONS = {None: "scenario", "Config": "config", "ModelConfig": "model",
                "ConnectorConfig": "connector", "SchedulerSpec": "scheduler", "ArriveSpec": "arrive",
                "DecodeSpec": "decode", "TokensPart": "tokens", "TextPart": "text",
                "SameAsPart": "same_as", "RandomPart": "random"}


def fields_of(schema: dict, definition: str | None) -> tuple[Field, ...]:
    """The fields of a definition (``None``: the top level)."""
    node = schema if definition is None else schema["$defs"][definition]
    required = set(node.get("required", ()))
    section = DEF_SECTIONS.get(definition, "")
    return tuple(Field(name, type_text(prop), _default_text(prop), name in required,
                       prop.get("description", ""), doc_key(section, name))
                 for name, prop in node.get("properties", {}).items())


# the definition holding each event's fields (other events take a single value)
EVENT_DEFS = {"arrive": "ArriveSpec", "decode": "DecodeSpec"}
PART_DEFS = {"tokens": "TokensPart", "text": "TextPart", "same_as": "SameAsPart",
             "random": "RandomPart"}


def reference(schema: dict | None = None) -> tuple[Section, ...]:
    """Every section of the reference, in reading order, each with an example."""
    schema = schema or json_schema()
    steps = schema["$defs"]["Step"]["properties"]
    out = [Section(key, fields_of(schema, d), to_yaml({"config": _CONFIG_EXAMPLES[key]}) if d else "")
           for d, key in DEF_SECTIONS.items() if key in ("scenario", *_CONFIG_EXAMPLES)]
    ids = ["A", "B"]
    for name in EVENT_NAMES:
        if name in EVENT_DEFS:
            fields = fields_of(schema, EVENT_DEFS[name])
        else:
            prop = steps[name]
            kind = type_text(prop).removesuffix(" | null")
            if name in ("finish", "abort"):
                kind = "text | " + kind         # one id, or a list of them
            fields = () if kind == "true | false" else (   # a bare word: `- admit`
                Field(name, kind, "", True, prop.get("description", ""), doc_key("event", name)),)
        example = snippet(name, ids, ["before"]) if name in SNIPPETS else ""
        out.append(Section(f"event:{name}", fields, example))
    out.append(Section("event:note", (Field("note", "{en: text, zh: text}", "", False, "",
                                            doc_key("event", "note")),),
                       snippet("note", ids, [])))
    for name, definition in PART_DEFS.items():
        out.append(Section(f"part:{name}", fields_of(schema, definition),
                           to_yaml({"prompt": [_PART_EXAMPLES[name]]})))
    return tuple(out)


def completions(schema: dict | None = None) -> dict[str, list[dict]]:
    """What the editor offers to complete, by context: event names (``events``), the file's top
    level (``scenario``), and the fields of ``config``, ``model``, ``connector``, ``scheduler``,
    ``arrive``, ``decode`` and a prompt part (``part``). Each entry: the name, its type, and what
    it means in both languages. All from the JSON Schema (``blockviz schema``)."""
    schema = schema or json_schema()

    def entry(f: Field) -> dict:
        return {"label": f.name, "detail": f.type, "en": f.doc("en"), "zh": f.doc("zh")}

    out: dict[str, list[dict]] = {}
    sections = {s.key: s for s in reference(schema)}
    out["events"] = []
    for name in (*EVENT_NAMES, "note"):
        sec = sections[f"event:{name}"]
        detail = "" if not sec.fields else ("{…}" if name in EVENT_DEFS else sec.fields[0].type)
        out["events"].append({"label": name, "detail": detail, **texts(f"evh_{name}")})
    for definition, key in DEF_SECTIONS.items():
        if key not in PART_DEFS:
            out[key] = [entry(f) for f in fields_of(schema, definition)]
    out["part"] = [entry(f) for d in PART_DEFS.values() for f in fields_of(schema, d)]
    return out


_CONFIG_EXAMPLES: dict[str, dict] = {   # each config section's example, under config:
    "config": {"num_blocks": 6, "block_size": 4, "free_order": "split"},
    "model": {"model": None},
    "connector": {"connector": {"kind": "cpu", "num_blocks": 16}},
    "scheduler": {"scheduler": {"max_num_batched_tokens": 8192, "max_num_seqs": 256}},
}
_PART_EXAMPLES: dict[str, dict] = {
    "tokens": {"tokens": [1, 2, 3, 4]},
    "text": {"text": "the cat sat on the mat"},
    "same_as": {"same_as": "A", "first": 8},
    "random": {"random": 4},
}


# -- snippets: example events, inserted at the end of the step list --------------------------
SNIPPETS = ("arrive", "decode", "step", "finish", "preempt", "admit", "reset_prefix_cache",
            "checkpoint", "rewind", "note")


def snippet(kind: str, ids: Sequence[str], checkpoints: Sequence[str], indent: int = 2,
            live: Sequence[str] | None = None) -> str:
    """An example ``kind`` event that fits a scenario whose requests so far are ``ids`` (``live``:
    those not finished at its end, the ones finish and preempt can name), as one step, a line of
    YAML: e.g. ``  - finish: A`` (flow style, like the built-ins)."""
    pick = list(live) if live else list(ids)
    last = pick[-1] if pick else "A"
    prompt = ([{"same_as": ids[0], "first": 4}, {"random": 4}] if ids
              else [{"tokens": [1, 2, 3, 4, 5, 6, 7, 8]}, {"random": 2}])
    events = {"arrive": {"arrive": {"id": next_request_id(ids), "prompt": prompt, "max_tokens": 8}},
              "decode": {"decode": {"steps": 2}}, "step": {"step": 1}, "finish": {"finish": last},
              "preempt": {"preempt": last}, "admit": "admit", "reset_prefix_cache": "reset_prefix_cache",
              "checkpoint": {"checkpoint": f"cp{len(checkpoints) + 1}"},
              "rewind": {"rewind": checkpoints[-1] if checkpoints else "cp1"},
              "note": {"note": texts("snip_note")}}
    pad = " " * indent
    if isinstance(events[kind], str):
        return f"{pad}- {events[kind]}\n"
    (name, value), = events[kind].items()
    flow = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, sort_keys=False,
                          width=10_000).strip().removesuffix("...").strip()
    return f"{pad}- {name}: {flow}\n"


_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")
_STEPS = re.compile(r"^steps\s*:\s*(#.*)?$")
_ITEM = re.compile(r"^(\s*)- ")


def insert_step(text: str, kind: str, ids: Sequence[str], checkpoints: Sequence[str],
                live: Sequence[str] | None = None) -> str:
    """``text`` with an example ``kind`` event added as the last step (a ``steps:`` list is
    created at the end if there is none)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _STEPS.match(line)), None)
    if start is None:
        lines = [line for line in lines if not re.match(r"^steps\s*:\s*\[\s*\]\s*$", line)]
        body = "\n".join(lines).rstrip("\n")
        return (body + "\n" if body else "") + "steps:\n" + snippet(kind, ids, checkpoints, 2, live)
    end = next((j for j in range(start + 1, len(lines)) if _TOP_KEY.match(lines[j])), len(lines))
    # the step list's items' indentation (2: an empty list)
    indent = next((len(m.group(1)) for line in lines[start + 1:end] if (m := _ITEM.match(line))), 2)
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    new = snippet(kind, ids, checkpoints, indent, live).rstrip("\n").split("\n")
    out = lines[:end] + new + lines[end:]
    return "\n".join(out) + "\n"


def scenario_names(scenario) -> tuple[list[str], list[str]]:
    """(request ids in arrival order, checkpoint names) of a validated scenario."""
    ids = dict.fromkeys(step.args.id for step in scenario.steps if step.kind == "arrive")
    cps = dict.fromkeys(step.args for step in scenario.steps if step.kind == "checkpoint")
    return list(ids), list(cps)


_ARRIVE_ID = re.compile(r"^\s*-\s*arrive\s*:\s*\{\s*(?:[^{}]*?,\s*)?id\s*:\s*([\w.-]+)", re.M)
_BLOCK_ID = re.compile(r"^\s*-\s*arrive\s*:\s*(?:#.*)?\n(?:\s*[A-Za-z_]\w*\s*:.*\n)*?\s*id\s*:\s*([\w.-]+)",
                       re.M)
_CHECKPOINT = re.compile(r"^\s*-\s*checkpoint\s*:\s*([\w.-]+)", re.M)
_FINISH = re.compile(r"^\s*-\s*finish\s*:\s*(\[[^\]]*\]|[\w.-]+)", re.M)


def text_names(text: str) -> tuple[list[str], list[str], list[str]]:
    """(request ids, checkpoint names, ids not finished by a ``finish`` step) as far as the text
    says, read line by line: it need not be valid (the insert buttons follow the text being
    written, not its last valid version)."""
    found = sorted((m.start(), m.group(1)) for rx in (_ARRIVE_ID, _BLOCK_ID) for m in rx.finditer(text))
    ids = list(dict.fromkeys(rid for _, rid in found))
    cps = list(dict.fromkeys(m.group(1) for m in _CHECKPOINT.finditer(text)))
    finished: set[str] = set()
    for m in _FINISH.finditer(text):
        finished.update(x.strip() for x in m.group(1).strip("[]").split(",") if x.strip())
    return ids, cps, [rid for rid in ids if rid not in finished]


# -- uploads ------------------------------------------------------------------------------
def read_upload(raw: bytes, name: str) -> str:
    """The text of an uploaded scenario file, or ScenarioError when the file is refused: larger
    than MAX_FILE_BYTES (checked before anything is parsed), binary, not UTF-8, not YAML, or with
    a YAML tag. A readable file with a mistake in it is accepted: the editor shows the error."""
    try:
        load_bytes(raw, name)                 # refuses a file over MAX_FILE_BYTES before parsing
    except ScenarioError as e:
        if e.line is None or isinstance(e, UnreadableFile) or e.message.startswith("YAML tag"):
            raise
    return raw.decode("utf-8-sig")


def download_name(scenario_id: str | None) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", scenario_id or "scenario").strip(".-") or "scenario"
    return f"{stem[:64]}.yaml"


# -- what to do about an error --------------------------------------------------------------
_OVER_MAX = re.compile(r"Input should be less than or equal to")


def error_hint(err: ScenarioError, lang: str) -> str | None:
    """A sentence on what to do, for the errors whose message alone does not say it (a limit)."""
    if _OVER_MAX.match(err.message or ""):
        if err.path in ("config.num_blocks", "config.connector.num_blocks"):
            return t("num_blocks_hint", lang, limit=MAX_NUM_BLOCKS)
        if err.path == "config.block_size":
            return t("block_size_hint", lang, limit=MAX_BLOCK_SIZE)
    return None
