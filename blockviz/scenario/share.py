"""Share a scenario by link: its text, compressed, in the URL (``?s=CODE``). Nothing is stored on
the server, so a link works on any server with the app, and after a restart.

CODE is the URL-safe base64 (RFC 4648 §5, ``-`` and ``_``, no ``=`` padding) of the zlib stream
(deflate with zlib's header and Adler-32 check, level 9) of the scenario's UTF-8 text, YAML or
JSON, exactly as written. A code is at most ``MAX_CODE_CHARS`` characters, so that a whole link
stays within about 8 KB (what browsers, servers and chat programs pass on without cutting).

Decoding treats a code as hostile: its length and alphabet are checked before anything is
decoded; it is decompressed with a cap on the output (``MAX_FILE_BYTES``, the file limit: a "zip
bomb" stops there, never expanded in full); a stream cut short, followed by junk or failing its
check is refused; the text must be UTF-8. The text is then what a file would be, and goes through
the same loader and limits (named ``LINK_FILE``). Every refusal is a :class:`ScenarioError` with an
English message (translated by ``blockviz.i18n.errors``), never a traceback.
"""
from __future__ import annotations

import base64
import binascii
import re
import zlib

from blockviz.scenario.load import ScenarioError
from blockviz.scenario.schema import MAX_FILE_BYTES

MAX_CODE_CHARS = 8_000          # the ``s`` value; the rest of a link is ~100 characters
LINK_FILE = "shared-link.yaml"  # the name errors carry for a link's scenario
PARAM = "s"
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


class LinkTooLong(ScenarioError):
    """The scenario does not fit in a link: download the file instead."""

    def __init__(self, chars: int) -> None:
        self.chars = chars
        super().__init__(LINK_FILE, None, None, "", f"the link would be {chars:,} characters long; "
                                                    f"a link holds at most {MAX_CODE_CHARS:,}")


class BadLink(ScenarioError):
    """A code that does not decode to a text (damaged, cut short, or hostile)."""

    def __init__(self, message: str) -> None:
        super().__init__(LINK_FILE, None, None, "", message)


def encode(text: str) -> str:
    """The link code of ``text`` (any length: see :func:`share_code` for the limit)."""
    raw = zlib.compress(text.encode("utf-8", "surrogatepass"), 9)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def share_code(text: str) -> str:
    """The link code of ``text``, or :class:`LinkTooLong` when it is over ``MAX_CODE_CHARS``."""
    code = encode(text)
    if len(code) > MAX_CODE_CHARS:
        raise LinkTooLong(len(code))
    return code


def decode(code: str) -> str:
    """The text a code stands for; :class:`BadLink` (or LinkTooLong) when it is not a good one."""
    if not isinstance(code, str):
        raise BadLink("the link's scenario code is damaged (not text)")
    code = code.strip()
    if not code:
        raise BadLink("the link's scenario code is empty")
    if len(code) > MAX_CODE_CHARS:
        raise LinkTooLong(len(code))
    try:
        if not _ALPHABET.fullmatch(code) or len(code) % 4 == 1:
            raise ValueError(code)
        raw = base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))
    except (binascii.Error, ValueError):
        raise BadLink("the link's scenario code is damaged (not URL-safe base64); copy the whole "
                      "link again") from None
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(raw, MAX_FILE_BYTES + 1)   # never more than the cap, whatever
    except zlib.error:
        raise BadLink("the link's scenario code is damaged (not compressed data); copy the whole "
                      "link again") from None
    if len(out) > MAX_FILE_BYTES:
        raise BadLink(f"the link's scenario expands to more than {MAX_FILE_BYTES:,} bytes, the limit "
                      f"for a scenario")
    if not inflater.eof:
        raise BadLink("the link's scenario code is cut short; copy the whole link again")
    if inflater.unused_data:
        raise BadLink("the link's scenario code has extra data after the scenario; copy the whole "
                      "link again")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadLink(f"the link's scenario is not UTF-8 text (byte {e.start})") from None


def link(base_url: str, code: str, *, step: int | None = None, lang: str | None = None,
         embed: bool = False) -> str:
    """The player's URL for a code: ``BASE/?s=CODE&step=K&lang=L`` (and ``&embed=true``)."""
    query = f"{PARAM}={code}"
    if step is not None:
        query += f"&step={int(step)}"
    if lang:
        query += f"&lang={lang}"
    if embed:
        query += "&embed=true"
    return f"{base_url.rstrip('/')}/?{query}"

