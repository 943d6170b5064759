"""The app's endpoints are the operator's: ``blockviz app --live SPEC``, loopback by default."""
from __future__ import annotations

import json

import pytest

from blockviz.live.endpoints import (
    DEFAULT,
    ENV,
    EndpointSpec,
    SpecError,
    allowed,
    parse_spec,
    split_app_args,
)


def test_specs():
    assert parse_spec("tcp://127.0.0.1:5557") == EndpointSpec("tcp://127.0.0.1:5557")
    s = parse_spec("tcp://10.0.0.2:6000?replay=tcp://10.0.0.2:6001&topic=kv@e0&bind=1&dp_ranks=4")
    assert (s.replay, s.topic, s.bind, s.dp_ranks) == ("tcp://10.0.0.2:6001", "kv@e0", True, 4)
    assert parse_spec(s.text) == s
    for bad in ("http://x", "tcp://h:1?colour=red", "tcp://h:1?dp_ranks=0", "tcp://h:1?bind=maybe",
                "tcp://h:1?replay=file:///etc/passwd", "tcp://h :1", "tcp://h:1?dp_ranks=x"):
        with pytest.raises(SpecError):
            parse_spec(bad)


def test_allowed_defaults_to_loopback_and_drops_what_does_not_parse():
    assert allowed({}) == [EndpointSpec(DEFAULT)]
    assert allowed({ENV: "not json"}) == [EndpointSpec(DEFAULT)]
    env = {ENV: json.dumps(["tcp://127.0.0.1:7000?bind=1", "bogus", "ipc:///tmp/kv"])}
    assert [s.endpoint for s in allowed(env)] == ["tcp://127.0.0.1:7000", "ipc:///tmp/kv"]


def test_app_arguments():
    rest, specs = split_app_args(["--server.port", "8600", "--live", "tcp://127.0.0.1:1",
                                  "--live=tcp://127.0.0.1:2?replay=tcp://127.0.0.1:3"])
    assert rest == ["--server.port", "8600"] and len(specs) == 2
    with pytest.raises(SpecError):
        split_app_args(["--live"])
    with pytest.raises(SpecError):
        split_app_args(["--live", "udp://x"])


def test_blockviz_app_refuses_a_bad_spec(cli):
    p = cli("app", "--live", "udp://nowhere")
    assert p.returncode == 2 and "udp://nowhere" in p.stderr and "Traceback" not in p.stderr
