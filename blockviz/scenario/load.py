"""Loading scenario files safely, with every error located as ``FILE:LINE:COL: path: message``.

YAML is composed into nodes (no Python objects are ever constructed from tags) and converted here:
only plain scalars, sequences and mappings are accepted. A YAML tag such as ``!!python/object`` is
an error, aliases are bounded (no "billion laughs"), files are bounded in size and must be UTF-8.
"""
from __future__ import annotations

import codecs
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import yaml

from blockviz.i18n.errors import localize_error, printable
from blockviz.scenario.schema import (
    MAX_FILE_BYTES,
    MAX_ITERATIONS_TOTAL,
    MAX_PROMPT_TOKENS_TOTAL,
    SameAsPart,
    Scenario,
    TextPart,
)
from blockviz.scenario.tokens import WORD_SPAN

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 64                       # nesting of sequences and mappings
MAX_EXPANDED_BYTES = 4 * MAX_FILE_BYTES  # what the document stands for once aliases are expanded
MAX_NUMBER_CHARS = 64                # a number written longer is refused before it is converted
_STD = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_STD + t for t in ("str", "int", "float", "bool", "null")}

Path_ = tuple[Any, ...]


class ScenarioError(Exception):
    """A located, one-line problem with a scenario: ``FILE:LINE:COL: path: message``."""

    def __init__(self, file: str, line: int | None, col: int | None, path: str, message: str):
        self.file, self.line, self.col, self.path, self.message = file, line, col, path, message
        super().__init__(str(self))

    def __str__(self) -> str:
        return self.localized("en")

    def localized(self, lang: str) -> str:
        """The same line, its message in ``lang`` (see ``blockviz.i18n.errors``)."""
        where = self.file if self.line is None else f"{self.file}:{self.line}:{self.col}"
        message = localize_error(self.message, lang)  # one line, always
        line = f"{where}: {self.path}: {message}" if self.path else f"{where}: {message}"
        return printable(line)  # a key or an id may hold a line break or a terminal escape


class UnreadableFile(ScenarioError):
    """The bytes are not a text an editor could show: too large, binary, not UTF-8, or with a raw
    control character. (Located where it can be; an upload is refused outright.)"""


@dataclass
class LoadedScenario:
    scenario: Scenario
    file: str
    marks: dict[Path_, tuple[int, int]]  # path -> (line, col), 1-based

    def locate(self, path: Path_, key: bool = False) -> tuple[int | None, int | None]:
        if key and ("<key>",) + path in self.marks:
            return self.marks[("<key>",) + path]
        while path not in self.marks and path:
            path = path[:-1]
        mark = self.marks.get(path)
        return mark if mark else (None, None)

    def error(self, path: Path_, message: str, key: bool = False) -> ScenarioError:
        line, col = self.locate(path, key)
        return ScenarioError(self.file, line, col, format_path(path), message)


def format_path(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _tag_message(tag: str) -> str:
    return f"YAML tag {tag.replace(_STD, '!!')} is not allowed: scenarios are plain data"


class _Converter:
    def __init__(self, file: str) -> None:
        self.file = file
        self.marks: dict[Path_, tuple[int, int]] = {}      # path -> position of the value
        self.key_marks: dict[Path_, tuple[int, int]] = {}  # path -> position of its key
        self._scalars = yaml.SafeLoader("")

    def fail(self, node: yaml.Node, path: Path_, message: str) -> ScenarioError:
        m = node.start_mark
        return ScenarioError(self.file, m.line + 1, m.column + 1, format_path(path), message)

    def convert(self, node: yaml.Node, path: Path_) -> Any:
        self.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _STD + "timestamp":
                return node.value  # a date in a note is just text
            if node.tag not in _SCALAR_TAGS:
                raise self.fail(node, path, _tag_message(node.tag))
            kind = node.tag[len(_STD):]
            if kind in ("int", "float") and len(node.value) > MAX_NUMBER_CHARS:
                raise self.fail(node, path, f"a number written with more than {MAX_NUMBER_CHARS} "
                                            f"characters")
            try:
                return self._scalars.construct_object(node, deep=True)
            except (ValueError, TypeError, OverflowError):  # explicit tags are refused before this
                raise self.fail(node, path, f"cannot read {_excerpt(node.value)} as "
                                            f"{_KINDS[kind]}") from None
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _STD + "seq":
                raise self.fail(node, path, _tag_message(node.tag))
            return [self.convert(child, path + (i,)) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            if node.tag != _STD + "map":
                raise self.fail(node, path, _tag_message(node.tag))
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _STD + "merge":
                    raise self.fail(key_node, path, "mapping keys must be plain names")
                key = self.convert(key_node, path + ("<key>",))
                if not isinstance(key, str):
                    key = str(key) if key is not None else "null"
                sub = path + (key,)
                if key in out:
                    raise self.fail(key_node, sub, f"duplicate key {key!r}")
                self.key_marks[sub] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                out[key] = self.convert(value_node, sub)
            return out
        raise self.fail(node, path, "unsupported YAML node")


_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "null": "null",
          "str": "text"}


def _excerpt(value: str, n: int = 20) -> str:
    return repr(value if len(value) <= n else value[:n] + "…")


def _position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of the character at ``index`` of ``text``."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _control_character_error(text: str, file: str, char: str) -> UnreadableFile:
    line, col = _position(text, text.find(char))
    return UnreadableFile(file, line, col, "", f"control character U+{ord(char):04X} is not allowed "
                                              f"in a scenario file")


def check_events(text: str, file: str) -> None:
    """Walk the YAML event stream (libyaml's parser is iterative: no tree is built, nothing
    recurses) and refuse, before anything is composed: nesting deeper than MAX_DEPTH, any explicit
    tag (``!!int abc``, ``!!python/...``: scenarios are plain data), an undefined alias, and a
    document that stands for more than MAX_EXPANDED_BYTES once aliases are expanded (each value
    counts its UTF-8 bytes plus one; a billion laughs is counted, never built)."""
    anchored: dict[str, int] = {}        # anchor -> the bytes its value stands for
    defined: set[str | None] = set()     # anchors seen (as PyYAML's composer, one definition each)
    open_: list[tuple[str | None, int]] = []   # the containers open now: (anchor, total at start)
    total = 0

    def fail(event: yaml.Event, message: str) -> ScenarioError:
        m = event.start_mark
        return ScenarioError(file, m.line + 1, m.column + 1, "", message)

    for event in yaml.parse(text, Loader=_Loader):
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise fail(event, _tag_message(tag))
        anchor = getattr(event, "anchor", None)
        if anchor is not None and not isinstance(event, yaml.AliasEvent) and anchor in defined:
            raise fail(event, f"YAML syntax error: found duplicate anchor '{anchor}'")
        defined.add(anchor)
        if isinstance(event, yaml.ScalarEvent):
            size = len(event.value.encode("utf-8", "surrogatepass")) + 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchored:
                raise fail(event, f"YAML syntax error: found undefined alias '{event.anchor}'")
            size = anchored[event.anchor]
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise fail(event, f"nested more than {MAX_DEPTH} levels deep")
            open_.append((event.anchor, total))
            size = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, start = open_.pop()
            if anchor is not None:
                anchored[anchor] = total - start
            continue
        else:
            continue
        total += size
        if total > MAX_EXPANDED_BYTES:
            raise fail(event, f"the document expands to more than {MAX_EXPANDED_BYTES:,} bytes "
                              f"(aliases repeated too often?)")
        if isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
            anchored[event.anchor] = size


def parse_yaml(text: str, file: str) -> tuple[Any, dict[Path_, tuple[int, int]]]:
    try:
        check_events(text, file)
        node = yaml.compose(text, Loader=_Loader)   # bounded now: depth, tags and size checked
    except yaml.reader.ReaderError as e:
        if isinstance(e.character, int) and chr(e.character) in text:
            raise _control_character_error(text, file, chr(e.character)) from None
        raise ScenarioError(file, None, None, "", f"YAML error: {e.reason}") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = e.problem or e.context or "invalid YAML"
        raise ScenarioError(file, line, col, "", f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(file, None, None, "", f"YAML error: {e}") from None
    if node is None:
        raise ScenarioError(file, 1, 1, "", "the file is empty: a scenario needs at least "
                                             "`id:`, `title:` and `steps:`")
    conv = _Converter(file)
    data = conv.convert(node, ())
    marks = dict(conv.marks)
    marks.update({("<key>",) + k: v for k, v in conv.key_marks.items()})
    return data, marks


_SURROGATE = re.compile("[\ud800-\udfff]")
_PYDANTIC_NOISE = re.compile(r"^(Value error|Assertion failed), ")


def _pydantic_message(err: dict) -> str:
    msg = _PYDANTIC_NOISE.sub("", err["msg"])
    if err["type"] == "extra_forbidden":
        return f"unknown field {err['loc'][-1]!r}"
    if err["type"] == "missing":
        return f"missing required field {err['loc'][-1]!r}"
    return msg


def _data_path(data: Any, loc: tuple) -> Path_:
    """pydantic's error location as a path into the data. Items that are not in the data are
    union tags pydantic inserts (skipped), or, last, the name of a missing field (kept)."""
    path: list[Any] = []
    cur = data
    for n, item in enumerate(loc):
        if isinstance(cur, dict) and item in cur:
            cur = cur[item]
            path.append(item)
        elif isinstance(cur, list) and isinstance(item, int) and 0 <= item < len(cur):
            cur = cur[item]
            path.append(item)
        elif n == len(loc) - 1 and isinstance(item, str) and isinstance(cur, dict):
            path.append(item)
    return tuple(path)


def _normalize_prompts(data: dict, marks: dict[Path_, tuple[int, int]]) -> None:
    """Write shorthand prompts (a string, a list of token ids) as prompt parts in the data itself,
    moving their marks along, so that errors inside them point at the right place."""
    steps = data.get("steps")
    if not isinstance(steps, list):
        return
    for i, step in enumerate(steps):
        arrive = step.get("arrive") if isinstance(step, dict) else None
        if not isinstance(arrive, dict) or "prompt" not in arrive:
            continue
        p = ("steps", i, "arrive", "prompt")
        prompt = arrive["prompt"]
        if isinstance(prompt, str):
            arrive["prompt"] = [{"text": prompt}]
            marks[p + (0,)] = marks[p + (0, "text")] = marks.get(p, (None, None))
        elif isinstance(prompt, list) and prompt and not any(isinstance(x, dict) for x in prompt):
            arrive["prompt"] = [{"tokens": prompt}]
            for j in range(len(prompt)):
                if p + (j,) in marks:
                    marks[p + (0, "tokens", j)] = marks[p + (j,)]
            marks[p + (0,)] = marks[p + (0, "tokens")] = marks.get(p, (None, None))


def validate_data(data: Any, file: str, marks: dict[Path_, tuple[int, int]]) -> LoadedScenario:
    if not isinstance(data, dict):
        raise ScenarioError(file, 1, 1, "", "a scenario is a mapping with `id:`, `title:`, "
                                             "`config:` and `steps:`")
    _normalize_prompts(data, marks)
    # Bare-word steps (`- admit`) are fine; strings that are not event names are caught by Step.
    try:
        scenario = Scenario.model_validate(data)
    except pydantic.ValidationError as e:
        err = e.errors(include_url=False)[0]
        path = _data_path(data, err["loc"])
        loaded = LoadedScenario(None, file, marks)  # type: ignore[arg-type]
        raise loaded.error(path, _pydantic_message(err),
                           key=err["type"] == "extra_forbidden") from None
    loaded = LoadedScenario(scenario, file, marks)
    check_references(loaded)
    return loaded


def check_references(loaded: LoadedScenario) -> None:
    """What can be known before running: ids arrive before use and once, checkpoints exist,
    totals stay within the limits. Follows checkpoints and rewinds, as the engine will.

    A request's size is its prompt plus its scripted output (what ``same_as`` without ``first``
    copies: prompt then output), so a chain of ``same_as`` is counted in full; words of every
    ``text`` part count against the toy tokenizer's vocabulary."""
    arrived: dict[str, int] = {}        # request id -> its tokens as far as the file says
    saved: dict[str, dict[str, int]] = {}
    words: set[str] = set()
    prompt_total = 0
    iterations = 0
    for i, step in enumerate(loaded.scenario.steps):
        at = ("steps", i, step.kind) if step.kind else ("steps", i)
        kind, args = step.kind, step.args

        def need(rid: str, where: Path_ = at, arrived: dict[str, int] = arrived) -> None:
            if rid not in arrived:
                raise loaded.error(where, f"request {rid!r} is used before it arrives")

        if kind == "arrive":
            if args.id in arrived:
                raise loaded.error(at + ("id",), f"duplicate request id {args.id!r}")
            size = 0
            for j, part in enumerate(args.prompt):
                if isinstance(part, SameAsPart):
                    need(part.same_as, at + ("prompt", j, "same_as"))
                    size += part.first if part.first is not None else arrived[part.same_as]
                elif isinstance(part, TextPart):
                    size += _count_words(loaded, part.text, words, at + ("prompt", j, "text"))
                else:
                    size += _part_size(part)
                if prompt_total + size > MAX_PROMPT_TOKENS_TOTAL:
                    break
            prompt_total += size
            arrived[args.id] = size + len(args.output or ())
        elif kind == "admit" and args is not True:
            raise loaded.error(at, "write `- admit` (admit: false is not an event)")
        elif kind in ("reset_prefix_cache", "restart") and args is not True:
            raise loaded.error(at, f"write `- {kind}`")
        elif kind == "finish":
            for j, rid in enumerate(args):
                need(rid, at + (j,) if len(args) > 1 else at)
        elif kind == "preempt":
            need(args)
        elif kind == "decode":
            for j, rid in enumerate(args.requests or ()):
                need(rid, at + ("requests", j))
            iterations += args.steps
        elif kind == "step":
            iterations += args
        elif kind == "checkpoint":
            saved[args] = dict(arrived)
        elif kind == "rewind":
            if args not in saved:
                known = ", ".join(sorted(saved)) or "none yet"
                raise loaded.error(at, f"unknown checkpoint {args!r} (saved so far: {known})")
            arrived = dict(saved[args])
        if prompt_total > MAX_PROMPT_TOKENS_TOTAL:
            raise loaded.error(at, f"prompts total more than {MAX_PROMPT_TOKENS_TOTAL:,} tokens")
        if iterations > MAX_ITERATIONS_TOTAL:
            raise loaded.error(at, f"more than {MAX_ITERATIONS_TOTAL:,} engine iterations in all")


def _count_words(loaded: LoadedScenario, text: str, seen: set[str], at: Path_) -> int:
    """The tokens of a text part; its new words join ``seen`` (every distinct word of the file
    takes one id of the toy tokenizer's WORD_SPAN)."""
    split = text.split()
    seen.update(split)
    if len(seen) > WORD_SPAN:
        raise loaded.error(at, f"more than {WORD_SPAN:,} distinct words in the prompts (the toy "
                               f"tokenizer's vocabulary)")
    return len(split)


def _part_size(part: Any) -> int:
    """The tokens of a ``tokens`` or ``random`` part."""
    return len(part.tokens) if hasattr(part, "tokens") else part.random


def load_text(text: str, file: str = "<scenario>") -> LoadedScenario:
    if len(text) * 4 > MAX_FILE_BYTES:  # a character is at most 4 bytes: count only when it matters
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_FILE_BYTES:
            raise UnreadableFile(file, None, None, "", f"the text is {size:,} bytes; the limit is "
                                                      f"{MAX_FILE_BYTES:,} (1 MiB)")
    if "\x00" in text:
        line, col = _position(text, text.index("\x00"))
        raise UnreadableFile(file, line, col, "", "the file is binary, not a YAML text file")
    surrogate = _SURROGATE.search(text)   # a text can hold one (a paste); UTF-8 cannot
    if surrogate:
        line, col = _position(text, surrogate.start())
        raise UnreadableFile(file, line, col, "", f"character U+{ord(surrogate.group()):04X} (half a "
                                                  f"surrogate pair) is not valid Unicode text")
    data, marks = parse_yaml(text, file)
    return validate_data(data, file, marks)


def load_bytes(raw: bytes, file: str = "<scenario>") -> LoadedScenario:
    if len(raw) > MAX_FILE_BYTES:
        raise UnreadableFile(file, None, None, "", f"the file is {len(raw):,} bytes; the limit is "
                                                  f"{MAX_FILE_BYTES:,}")
    if b"\x00" in raw:
        line, col = _byte_position(raw, raw.index(b"\x00"))
        raise UnreadableFile(file, line, col, "", "the file is binary, not a YAML text file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        at = e.start + (len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0)
        line, col = _byte_position(raw, at)
        raise UnreadableFile(file, line, col, "", f"the file is not UTF-8 text (byte {at})") from None
    return load_text(text, file)


def _byte_position(raw: bytes, index: int) -> tuple[int, int]:
    """1-based (line, column in characters) of byte ``index`` of ``raw``."""
    start = raw.rfind(b"\n", 0, index) + 1
    if start == 0 and raw.startswith(codecs.BOM_UTF8):
        start = len(codecs.BOM_UTF8)
    col = len(raw[start:index].decode("utf-8", "replace")) + 1
    return raw.count(b"\n", 0, index) + 1, col


def load(path: str | os.PathLike) -> LoadedScenario:
    p = Path(path)
    name = str(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ScenarioError(name, None, None, "", f"the file is {size:,} bytes; the limit is "
                                                      f"{MAX_FILE_BYTES:,}")
        if not p.is_file():
            raise ScenarioError(name, None, None, "", "not a regular file")
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ScenarioError(name, None, None, "", f"cannot read the file: {e.strerror}") from None
    return load_bytes(raw, name)
