"""The endpoints the app may subscribe to: the operator's list, never a user's.

``blockviz app --live SPEC [--live SPEC ...]`` names them; the app's server process reads them from
``BLOCKVIZ_LIVE`` (a JSON list of specs, set by ``blockviz app``). Without any, the one allowed is
vLLM's default seen from this machine: ``tcp://127.0.0.1:5557`` (vLLM binds ``tcp://*:5557``; the
subscriber connects over loopback). A page offers only these, by their index: nothing a browser
sends can make the server connect anywhere else.

A spec is an endpoint with options as a query string::

    tcp://127.0.0.1:5557
    tcp://127.0.0.1:5557?replay=tcp://127.0.0.1:5558&topic=kv@engine0&dp_ranks=2
    tcp://127.0.0.1:6000?bind=1          (vLLM connects its PUB here: the subscriber binds)
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from urllib.parse import parse_qs

ENV = "BLOCKVIZ_LIVE"
DEFAULT = "tcp://127.0.0.1:5557"
SCHEMES = ("tcp://", "ipc://", "inproc://")
OPTIONS = ("replay", "topic", "bind", "dp_ranks")
MAX_DP_RANKS = 64      # one SUB socket (and one replay socket) per data-parallel rank
MAX_SPECS = 16


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class EndpointSpec:
    endpoint: str
    replay: str | None = None
    topic: str = ""
    bind: bool = False
    dp_ranks: int = 1

    @property
    def text(self) -> str:
        """How the page names it (the spec, as written)."""
        opts = [f"{k}={v}" for k, v in (("replay", self.replay), ("topic", self.topic),
                                         ("bind", 1 if self.bind else None),
                                         ("dp_ranks", None if self.dp_ranks == 1 else self.dp_ranks))
                if v]
        return self.endpoint + ("?" + "&".join(opts) if opts else "")


def _endpoint(text: str, what: str) -> str:
    if not text.startswith(SCHEMES) or len(text) > 300 or any(c.isspace() for c in text):
        raise SpecError(f"{what} {text!r}: expected tcp://HOST:PORT, ipc://PATH or inproc://NAME")
    return text


def parse_spec(spec: str) -> EndpointSpec:
    """``ENDPOINT[?replay=EP&topic=T&bind=1&dp_ranks=N]`` -> EndpointSpec (SpecError if bad)."""
    endpoint, _, query = spec.strip().partition("?")
    endpoint = _endpoint(endpoint, "endpoint")
    try:
        opts = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise SpecError(f"{spec!r}: options are key=value pairs joined by &") from None
    unknown = set(opts) - set(OPTIONS)
    if unknown:
        raise SpecError(f"{spec!r}: unknown option(s) {', '.join(sorted(unknown))} "
                        f"(known: {', '.join(OPTIONS)})")
    one = {k: v[-1] for k, v in opts.items()}
    replay = _endpoint(one["replay"], "replay") if one.get("replay") else None
    bind = one.get("bind", "0").lower()
    if bind not in ("0", "1", "true", "false", "yes", "no", ""):
        raise SpecError(f"{spec!r}: bind must be 1 or 0")
    try:
        ranks = int(one.get("dp_ranks", "1"))
    except ValueError:
        raise SpecError(f"{spec!r}: dp_ranks must be a whole number") from None
    if not 1 <= ranks <= MAX_DP_RANKS:
        raise SpecError(f"{spec!r}: dp_ranks must be from 1 to {MAX_DP_RANKS}")
    return EndpointSpec(endpoint, replay, one.get("topic", ""), bind in ("1", "true", "yes"), ranks)


def env_list(name: str, env: dict | None = None) -> list:
    """The JSON list in the environment variable ``name`` (``blockviz app`` sets it for the
    server), or [] when it is unset or not a JSON list."""
    raw = (os.environ if env is None else env).get(name)
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def allowed(env: dict | None = None) -> list[EndpointSpec]:
    """The operator's endpoints (BLOCKVIZ_LIVE), else the loopback default. A spec that does not
    parse is left out (``blockviz app`` refuses it before the server starts)."""
    value = env_list(ENV, env)
    specs = value[:MAX_SPECS] if value and all(isinstance(s, str) for s in value) else [DEFAULT]
    out = []
    for s in specs:
        try:
            out.append(parse_spec(s))
        except SpecError:
            continue
    return out


def take_flag(args: list[str], flag: str, needs: str) -> tuple[list[str], list[str]]:
    """``args`` without every ``FLAG VALUE`` and ``FLAG=VALUE`` in them, and the values in order.
    SpecError for a FLAG without a value (``needs`` says what it takes)."""
    rest, values, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a == flag:
            if i + 1 >= len(args):
                raise SpecError(f"{flag} needs {needs}")
            values.append(args[i + 1])
            i += 2
            continue
        if a.startswith(flag + "="):
            values.append(a.split("=", 1)[1])
        else:
            rest.append(a)
        i += 1
    return rest, values


def split_app_args(args: list[str]) -> tuple[list[str], list[str]]:
    """``blockviz app``'s arguments -> (streamlit's, the --live specs). Raises SpecError for a
    bad spec or a --live without one."""
    rest, specs = take_flag(args, "--live", "an endpoint, e.g. --live tcp://127.0.0.1:5557")
    if len(specs) > MAX_SPECS:
        raise SpecError(f"at most {MAX_SPECS} --live endpoints")
    for s in specs:
        parse_spec(s)
    return rest, specs
