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
        return self.marks.get(path, (None, None))

    def error(self, path: Path_, message: str, key: bool = False) -> ScenarioError:
        line, col = self.locate(path, key)
        return ScenarioError(self.file, line, col, format_path(path), message)

    def step_path(self, i: int) -> Path_:
        """Where step ``i`` (from 0) is written: its event, or the step itself (a note alone)."""
        kind = self.scenario.steps[i].kind
        return ("steps", i, kind) if kind else ("steps", i)

    def step_error(self, i: int, message: str) -> ScenarioError:
        """``message`` about step ``i`` (from 0), located there and named ``step N (kind): ...``."""
        return self.error(self.step_path(i), f"step {i + 1} ({self.scenario.steps[i].kind}): {message}")


def format_path(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _tag_message(tag: str) -> str:
    return f"YAML tag {tag.replace(_STD, '!!')} is not allowed: scenarios are plain data"


_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "null": "null",
          "str": "text"}


def _position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of the character at ``index`` of ``text``."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


_DECIMAL = re.compile(r"0|[1-9][0-9]{0,63}")   # a plain scalar YAML 1.1 reads as this int


@dataclass(slots=True)
class _Open:
    """A sequence or mapping being built."""
    value: list | dict
    path: Path_
    anchor: str | None
    mark: Any
    total_at_start: int
    key: str | None = None   # a mapping's key whose value comes next


def yaml_events(text: str):
    """libyaml's event stream of ``text``. (A seam: the app's worker process wraps it to report
    the line it has read to, so that a parse stopped from outside can say where it was.)"""
    return yaml.parse(text, Loader=_Loader)


class _Builder:
    """The document as plain data, built in one pass over libyaml's event stream (its parser is
    iterative; nothing here recurses, no node tree is composed), with the position of every
    value. Refused as they come, before anything is built from them: nesting deeper than
    MAX_DEPTH, any explicit tag (``!!int abc``, ``!!python/...``: scenarios are plain data), a
    duplicate anchor, an undefined alias, and a document that stands for more than
    MAX_EXPANDED_BYTES once its aliases are expanded (each value counts its UTF-8 bytes plus one;
    an alias counts what its anchor stands for, so a billion laughs is counted, never built: an
    alias shares its anchor's value, and is located where it is written). A value that cannot be
    converted (a malformed number, a mapping key that is not a plain name, a duplicate key) is
    reported once the whole stream has parsed, so that a YAML syntax error anywhere comes first."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.marks: dict[Path_, tuple[int, int]] = {}         # path -> (line, col) of its value
        self.anchors: dict[str, tuple[Any, int, Any]] = {}   # name -> (value, size, its mark)
        self.defined: set[str] = set()                       # anchors seen, closed or not
        self.open: list[_Open] = []
        self.total = 0
        self.root: Any = None
        self.documents = 0
        self.deferred: ScenarioError | None = None
        self._scalars = yaml.SafeLoader("")   # YAML 1.1's resolver and constructors, for scalars

    def error(self, mark: Any, path: Path_, message: str) -> ScenarioError:
        return ScenarioError(self.file, mark.line + 1, mark.column + 1, format_path(path), message)

    def defer(self, mark: Any, path: Path_, message: str) -> None:
        if self.deferred is None:
            self.deferred = self.error(mark, path, message)

    def build(self, text: str) -> Any:
        scalar_event, marks, open_ = yaml.ScalarEvent, self.marks, self.open
        for event in yaml_events(text):
            # the common case first, inline: a plain item of a sequence (a token id, say)
            if (type(event) is scalar_event and event.tag is None and event.anchor is None
                    and open_ and type(open_[-1].value) is list and self.deferred is None):
                value = event.value
                size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
                self.grow(size + 1, event)
                items = open_[-1].value
                path = open_[-1].path + (len(items),)
                mark = event.start_mark
                marks.setdefault(path, (mark.line + 1, mark.column + 1))
                value = self.scalar(event, path)
                if self.deferred is None:
                    items.append(value)
                continue
            self.event(event)
        if self.deferred is not None:
            raise self.deferred
        return self.root

    # -- one event ----------------------------------------------------------------------------
    def event(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.CollectionEndEvent):
            done = self.open.pop()
            if done.anchor is not None:
                self.anchors[done.anchor] = (done.value, self.total - done.total_at_start,
                                             done.mark)
            return
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:   # as PyYAML's composer words it
                raise self.error(event.start_mark, (), "YAML syntax error: but found another "
                                                       "document")
            return
        if not isinstance(event, yaml.NodeEvent):
            return
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise self.error(event.start_mark, (), _tag_message(tag))
        anchor = event.anchor
        if isinstance(event, yaml.AliasEvent):
            if anchor not in self.anchors:
                raise self.error(event.start_mark, (), f"YAML syntax error: found undefined alias "
                                                       f"'{anchor}'")
            value, size, anchored_at = self.anchors[anchor]
            self.grow(size, event)
            self.place(value, event.start_mark, anchored_at, alias=True)
            return
        if anchor is not None:
            if anchor in self.defined:
                raise self.error(event.start_mark, (), f"YAML syntax error: found duplicate "
                                                       f"anchor '{anchor}'")
            self.defined.add(anchor)
        if isinstance(event, yaml.ScalarEvent):
            value = event.value
            size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
            self.grow(size + 1, event)
            converted = self.place(event, event.start_mark, event.start_mark)
            if anchor is not None:
                self.anchors[anchor] = (converted, size + 1, event.start_mark)
            return
        if len(self.open) >= MAX_DEPTH:   # a sequence or mapping starts
            raise self.error(event.start_mark, (), f"nested more than {MAX_DEPTH} levels deep")
        self.grow(1, event)
        container: list | dict = [] if isinstance(event, yaml.SequenceStartEvent) else {}
        path = self.place(container, event.start_mark, event.start_mark)
        self.open.append(_Open(container, path if path is not None else (), anchor,
                               event.start_mark, self.total - 1))

    def grow(self, size: int, event: yaml.Event) -> None:
        self.total += size
        if self.total > MAX_EXPANDED_BYTES:
            raise self.error(event.start_mark, (), f"the document expands to more than "
                                                   f"{MAX_EXPANDED_BYTES:,} bytes (aliases repeated "
                                                   f"too often?)")

    # -- building -------------------------------------------------------------------------------
    def place(self, item: Any, mark: Any, value_mark: Any, alias: bool = False) -> Any:
        """Put ``item`` (a scalar event, converted here; an alias's value; a new container)
        where the open container expects it: the next item of a sequence, a mapping's key, or
        its value. Returns the value (for a container: its path; None once an error is
        deferred, after which nothing more is built)."""
        if self.deferred is not None:
            return None
        top = self.open[-1] if self.open else None
        if top is not None and isinstance(top.value, dict) and top.key is None:
            return self.place_key(top, item, mark, value_mark, alias)
        if top is None:
            path: Path_ = ()
        elif isinstance(top.value, list):
            path = top.path + (len(top.value),)
        else:
            path = top.path + (top.key,)
        self.marks.setdefault(path, (mark.line + 1, mark.column + 1))
        value = self.scalar(item, path) if isinstance(item, yaml.ScalarEvent) else item
        if self.deferred is not None:
            return None
        if top is None:
            self.root = value
        elif isinstance(top.value, list):
            top.value.append(value)
        else:
            top.value[top.key] = value
            top.key = None
        return path if isinstance(value, list | dict) and not alias else value

    def place_key(self, top: _Open, item: Any, mark: Any, value_mark: Any, alias: bool) -> Any:
        here = top.path + ("<key>",)
        if isinstance(item, yaml.ScalarEvent):
            if item.implicit[0] and self._scalars.resolve(yaml.ScalarNode, item.value,
                                                          (True, False)) == _STD + "merge":
                return self.defer(mark, top.path, "mapping keys must be plain names")
            self.marks.setdefault(here, (mark.line + 1, mark.column + 1))
            key = self.scalar(item, here)
            if self.deferred is not None:
                return None
        elif alias and not isinstance(item, list | dict):
            self.marks.setdefault(here, (value_mark.line + 1, value_mark.column + 1))
            key = item
        else:  # a sequence or mapping as a key (or an alias of one)
            return self.defer(value_mark, top.path, "mapping keys must be plain names")
        converted = key
        if not isinstance(key, str):
            key = str(key) if key is not None else "null"
        sub = top.path + (key,)
        if key in top.value:
            return self.defer(value_mark, sub, f"duplicate key {key!r}")
        self.marks[("<key>",) + sub] = (value_mark.line + 1, value_mark.column + 1)
        top.key = key
        return converted

    def scalar(self, event: yaml.ScalarEvent, path: Path_) -> Any:
        value = event.value
        if not event.implicit[0]:
            return value                      # quoted: text
        if _DECIMAL.fullmatch(value):
            return int(value)                 # the common case, at once
        tag = self._scalars.resolve(yaml.ScalarNode, value, (True, False))
        if tag in (_STD + "str", _STD + "timestamp"):
            return value                      # a date in a note is just text
        if tag not in _SCALAR_TAGS:
            return self.defer(event.start_mark, path, _tag_message(tag))
        kind = tag[len(_STD):]
        if kind in ("int", "float") and len(value) > MAX_NUMBER_CHARS:
            return self.defer(event.start_mark, path, f"a number written with more than "
                                                      f"{MAX_NUMBER_CHARS} characters")
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark)
        try:
            return self._scalars.construct_object(node, deep=True)
        except (ValueError, TypeError, OverflowError):  # e.g. 0x_, which YAML 1.1 calls an int
            excerpt = repr(value if len(value) <= 20 else value[:20] + "…")
            return self.defer(event.start_mark, path, f"cannot read {excerpt} as {_KINDS[kind]}")


def parse_yaml(text: str, file: str) -> tuple[Any, dict[Path_, tuple[int, int]]]:
    builder = _Builder(file)
    try:
        data = builder.build(text)
    except yaml.reader.ReaderError as e:
        if isinstance(e.character, int) and chr(e.character) in text:
            line, col = _position(text, text.find(chr(e.character)))
            raise UnreadableFile(file, line, col, "", f"control character U+{e.character:04X} is not "
                                                      f"allowed in a scenario file") from None
        raise ScenarioError(file, None, None, "", f"YAML error: {e.reason}") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = e.problem or e.context or "invalid YAML"
        raise ScenarioError(file, line, col, "", f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(file, None, None, "", f"YAML error: {e}") from None
    if builder.documents == 0 or (builder.root is None and not builder.marks):
        raise ScenarioError(file, 1, 1, "", "the file is empty: a scenario needs at least "
                                             "`id:`, `title:` and `steps:`")
    return data, builder.marks


_SURROGATE = re.compile("[\ud800-\udfff]")
_PYDANTIC_NOISE = re.compile(r"^(Value error|Assertion failed), ")
_FIELD_ERRORS = {"extra_forbidden": "unknown field", "missing": "missing required field"}


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
        field = _FIELD_ERRORS.get(err["type"])   # these name the field, in blockviz's words
        message = f"{field} {err['loc'][-1]!r}" if field else _PYDANTIC_NOISE.sub("", err["msg"])
        loaded = LoadedScenario(None, file, marks)  # type: ignore[arg-type]
        raise loaded.error(path, message,
                           key=err["type"] == "extra_forbidden") from None
    loaded = LoadedScenario(scenario, file, marks)
    check_references(loaded)
    return loaded


def check_references(loaded: LoadedScenario,
                     max_prompt_tokens: int | None = MAX_PROMPT_TOKENS_TOTAL) -> None:
    """What can be known before running: ids arrive before use and once, checkpoints exist,
    totals stay within the limits. Follows checkpoints and rewinds, as the engine will.
    ``max_prompt_tokens``: the file limit on all prompts together (None: no limit, for scenarios
    the project generates itself to measure scale, never for what a user brings).

    A request's size is its prompt plus its scripted output (what ``same_as`` without ``first``
    copies: prompt then output), so a chain of ``same_as`` is counted in full; words of every
    ``text`` part count against the toy tokenizer's vocabulary."""
    arrived: dict[str, int] = {}        # request id -> its tokens as far as the file says
    saved: dict[str, dict[str, int]] = {}
    words: set[str] = set()
    prompt_total = 0
    iterations = 0
    for i, step in enumerate(loaded.scenario.steps):
        at = loaded.step_path(i)
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
                elif isinstance(part, TextPart):   # every distinct word takes one id of WORD_SPAN
                    split = part.text.split()
                    words.update(split)
                    if len(words) > WORD_SPAN:
                        raise loaded.error(at + ("prompt", j, "text"), f"more than {WORD_SPAN:,} distinct "
                                           f"words in the prompts (the toy tokenizer's vocabulary)")
                    size += len(split)
                else:                   # a tokens or a random part
                    size += len(part.tokens) if hasattr(part, "tokens") else part.random
                if max_prompt_tokens is not None and prompt_total + size > max_prompt_tokens:
                    break
            prompt_total += size
            arrived[args.id] = size + len(args.output or ())
        elif kind == "admit" and args is not True:
            raise loaded.error(at, "write `- admit` (admit: false is not an event)")
        elif kind in ("restart", "reset_prefix_cache") and args is False:
            raise loaded.error(at, f"write `- {kind}`")
        elif kind == "reset_prefix_cache" and args is not True:
            if args.reset_connector and loaded.scenario.config.connector is not None:
                raise loaded.error(at + ("reset_connector",),
                                   "reset_connector with a KV connector is not modelled: blockviz "
                                   "runs vLLM's OffloadingConnector without its reset_cache (drop "
                                   "reset_connector, or the connector)")
        elif kind in ("finish", "abort"):
            for j, rid in enumerate(args):
                need(rid, at + (j,) if len(args) > 1 else at)
        elif kind == "preempt":
            need(args)
        elif kind == "decode":
            for j, rid in enumerate(args.requests or ()):
                need(rid, at + ("requests", j))
        elif kind == "checkpoint":
            saved[args] = dict(arrived)
        elif kind == "rewind":
            if args not in saved:
                known = ", ".join(sorted(saved)) or "none yet"
                raise loaded.error(at, f"unknown checkpoint {args!r} (saved so far: {known})")
            arrived = dict(saved[args])
        iterations += step.engine_steps
        if max_prompt_tokens is not None and prompt_total > max_prompt_tokens:
            raise loaded.error(at, f"prompts total more than {max_prompt_tokens:,} tokens")
        if iterations > MAX_ITERATIONS_TOTAL:
            raise loaded.error(at, f"more than {MAX_ITERATIONS_TOTAL:,} engine iterations in all")


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
    """1-based (line, column in characters) of byte ``index`` of ``raw`` (a BOM takes no column)."""
    text = raw[:index].decode("utf-8", "replace").removeprefix("\ufeff")
    return _position(text, len(text))


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
