"""``blockviz live | publish | events`` — vLLM's KV-event stream from the command line.

  blockviz live tcp://127.0.0.1:5557 [--bind] [--replay tcp://127.0.0.1:5558] [--record F.jsonl]
  blockviz publish six-blocks --endpoint tcp://*:5557 --replay tcp://*:5558
  blockviz events state F.jsonl [--json]

Bad input (a file, a frame, an option) is a located line on stderr or a counted note, never a
traceback; exit status 2 for what stops a command. The heavy imports (pyzmq, msgspec, the
engine) happen in the commands, so ``blockviz --help`` stays quick.
"""
from __future__ import annotations

import argparse
import json
import sys

from blockviz.i18n import LANGS, event_label, t
from blockviz.live.endpoints import MAX_DP_RANKS

EXIT_INPUT = 2


def _bounded(kind, hi, *, zero: bool = False):
    """A number above 0 (``zero``: at least 0) and at most ``hi`` (every option is bounded; NaN
    and infinity are not numbers here)."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (0 <= v if zero else 0 < v) or not v <= hi:
            most = f"{hi:,}" if isinstance(hi, int) else f"{hi:,g}"
            raise argparse.ArgumentTypeError(
                f"{text} must be {'a number >= 0' if zero else '> 0'} and at most {most}")
        return v
    return parse


_non_negative = _bounded(float, 86_400.0, zero=True)


def _limits(p: argparse.ArgumentParser) -> None:
    from blockviz.live.reducer import MAX_HASHES, MAX_TOKENS_PER_HASH
    p.add_argument("--max-hashes", type=_bounded(int, 1 << 27), default=None, metavar="N",
                   help=f"cached hashes kept per rank at most (default {MAX_HASHES:,})")
    p.add_argument("--max-tokens-per-hash", type=_bounded(int, 1 << 20), default=None, metavar="N",
                   help=f"token ids kept per hash at most (default {MAX_TOKENS_PER_HASH:,})")


def _limit_kw(args) -> dict:
    return {k: getattr(args, k) for k in ("max_hashes", "max_tokens_per_hash")
            if getattr(args, k) is not None}


# -- output -------------------------------------------------------------------------------------
def _output(red, name: str, args) -> None:
    """The final state: as JSON (--json) or as text."""
    if args.json:
        json.dump(red.report(), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    from blockviz.live.reducer import CANNOT_KNOW
    lang = args.lang
    w = sys.stdout.write
    w(t("live_cli_summary", lang, name=name, batches=red.batches, events=red.events,
        messages=red.messages, cached=red.cached()) + "\n")
    ranks = sorted(red.ranks)
    for r in ranks:
        rs = red.ranks[r]
        if len(ranks) > 1:
            w(t("live_cli_rank", lang, rank=r) + "\n")
        for line in rs.state.render("  " if len(ranks) > 1 else "", lang):
            w(line + "\n")
        seqs = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in rs.missing)
        w(t("live_cli_missing", lang, seqs=seqs or t("live_cli_none", lang)) + "\n")
        if rs.restarts:
            w(t("live_cli_restarts", lang, n=rs.restarts) + "\n")
    notes = red.notes
    if notes.total:
        w(t("live_cli_notes", lang, n=notes.total) + "\n")
        for n in notes.kept():
            w(f"  - {n.text(lang)}\n")
        if notes.dropped:
            counts = ", ".join(f"{k} {v}" for k, v in notes.counts.most_common())
            w("  " + t("live_cli_notes_more", lang, n=notes.dropped, counts=counts) + "\n")
    w(t("live_cli_cannot_know", lang) + "\n")
    for key in CANNOT_KNOW:
        w(f"  - {t('live_unknown_' + key, lang)}\n")


# -- blockviz events state ----------------------------------------------------------------------
def cmd_state(args) -> int:
    from blockviz.live.capture import FORMAT
    from blockviz.live.stream import reduce_file
    try:
        red, header, _bad = reduce_file(args.file, **_limit_kw(args))
    except OSError as e:
        print(t("live_cli_no_file", args.lang, file=args.file, e=e.strerror or e), file=sys.stderr)
        return EXIT_INPUT
    if header is None and red.messages == 0:
        print(t("live_cli_not_capture", args.lang, file=args.file, format=FORMAT),
              file=sys.stderr)
        return EXIT_INPUT
    _output(red, args.file, args)
    return 0


# -- blockviz live ------------------------------------------------------------------------------
def cmd_live(args) -> int:
    import time

    import zmq

    from blockviz.live.subscribe import LiveSession
    lang = args.lang
    try:
        sess = LiveSession(args.endpoint, bind=args.bind, topic=args.topic, replay=args.replay,
                           dp_ranks=args.dp_ranks, record=args.record,
                           replay_timeout_s=args.replay_timeout,
                           max_message_bytes=args.max_message_bytes, **_limit_kw(args))
    except (zmq.ZMQError, ValueError) as e:
        print(t("live_cli_socket", lang, endpoint=args.endpoint, e=e), file=sys.stderr)
        return EXIT_INPUT
    except OSError as e:
        print(t("live_cli_record", lang, file=args.record, e=e.strerror or e), file=sys.stderr)
        return EXIT_INPUT
    red = sess.red
    mode = "bind" if args.bind else "connect"
    if not args.quiet:
        print(t("live_cli_listening", lang, mode=mode, endpoint=args.endpoint,
                ranks=args.dp_ranks, replay=args.replay or "-"), file=sys.stderr)
    reason = "interrupted"
    shown, last_show = None, 0.0
    try:
        while True:
            sess.pump(0.1)
            if args.max_batches and red.batches >= args.max_batches:
                reason = "max_batches"
                break
            if (args.until_idle is not None and sess.idle_for() >= args.until_idle
                    and not sess.replaying()):
                reason = "idle"
                break
            now = time.monotonic()
            line = (red.batches, red.events, red.gaps, red.notes.total, red.cached())
            if not args.quiet and line != shown and now - last_show >= 1.0:
                _progress(line, lang)
                shown, last_show = line, now
    except KeyboardInterrupt:
        pass
    finally:
        sess.close()
    final = (red.batches, red.events, red.gaps, red.notes.total, red.cached())
    if not args.quiet:
        if final != shown:
            _progress(final, lang)
        print(t(f"live_cli_stopped_{reason}", lang, n=args.max_batches, s=args.until_idle),
              file=sys.stderr)
    _output(red, args.endpoint, args)
    return 0


# -- blockviz publish ---------------------------------------------------------------------------
def cmd_publish(args) -> int:
    import zmq

    from blockviz.live.publish import Publisher, publish_scenario
    from blockviz.scenario import load
    from blockviz.scenario.lessons import resolve
    lang = args.lang
    loaded = load(resolve(args.scenario))       # a ScenarioError is blockviz's located line
    try:
        pub = Publisher(args.endpoint, replay=args.replay, topic=args.topic,
                        buffer_steps=args.buffer_steps)
    except (zmq.ZMQError, ValueError) as e:
        print(t("live_cli_socket", lang, endpoint=args.endpoint, e=e), file=sys.stderr)
        return EXIT_INPUT

    def say(key: str, **fields) -> None:
        if not args.quiet:
            print(t(key, lang, **fields), file=sys.stderr, flush=True)

    def on_step(i, n, step, engines, seqs):
        sent = f" (seq {seqs[0]}..{seqs[-1]})" if len(seqs) > 1 else (
            f" (seq {seqs[0]})" if seqs else "")
        say("publish_step", i=i, n=n, event=event_label(step, lang), engines=engines,
            batches=len(seqs), seqs=sent)

    try:
        say("publish_sockets", mode=t("publish_binds" if pub.binds else "publish_connects", lang),
            endpoint=pub.endpoint, replay=pub.replay_endpoint or "-", topic=args.topic)
        if pub.binds and "*" in pub.endpoint:
            say("publish_all_interfaces")
        pub.serve(args.start_delay_s)      # subscribers subscribe meanwhile (the slow joiner)
        sent = publish_scenario(loaded, pub, interval_s=args.interval_ms / 1000.0,
                                device=args.device, payloads=not args.no_payloads,
                                on_step=on_step, note=lambda k, f: say(k, **f))
        say("publish_done", n=sent, s=args.hold_s)
        pub.serve(args.hold_s)
    except KeyboardInterrupt:
        return 130
    finally:
        pub.close()
    return 0


def _progress(line, lang: str) -> None:
    batches, events, gaps, notes, cached = line
    print(t("live_cli_progress", lang, batches=batches, events=events, gaps=gaps, notes=notes,
            cached=cached), file=sys.stderr, flush=True)


def add_parser(sub) -> None:
    """Register ``live``, ``publish`` and ``events`` on the ``blockviz`` command's subparsers."""
    lv = sub.add_parser("live", help="subscribe to a running vLLM's KV events (ZeroMQ)",
                        description="Subscribe to vLLM's KV-event stream (--kv-events-config) and "
                                    "show what its prefix cache holds. vLLM binds its PUB socket "
                                    "when the endpoint has '*' or '::' (its default tcp://*:5557: "
                                    "connect here) and connects it otherwise (tcp://HOST:P: use "
                                    "--bind here). Stops on Ctrl+C, --until-idle or --max-batches, "
                                    "then prints the state.")
    lv.add_argument("endpoint", help="the PUB endpoint, e.g. tcp://127.0.0.1:5557")
    lv.add_argument("--bind", action="store_true",
                    help="bind the SUB socket (when vLLM connects its PUB: an endpoint without *)")
    lv.add_argument("--topic", default="", help="KVEventsConfig.topic (default empty: all)")
    lv.add_argument("--dp-ranks", type=_bounded(int, MAX_DP_RANKS), default=1, metavar="N",
                    help="data-parallel ranks: rank r on the endpoint's port + r (default 1)")
    lv.add_argument("--replay", default=None, metavar="ENDPOINT",
                    help="the replay ROUTER (KVEventsConfig.replay_endpoint): asked from seq 0 at "
                         "start and for every gap")
    lv.add_argument("--record", default=None, metavar="FILE",
                    help="write every message received (vllm-kv-events-capture/1)")
    lv.add_argument("--until-idle", type=_bounded(float, 86_400.0), default=None, metavar="S",
                    help="stop after S seconds without a message (counted from the start too)")
    lv.add_argument("--max-batches", type=_bounded(int, 1 << 62), default=None, metavar="N",
                    help="stop after N batches")
    lv.add_argument("--replay-timeout", type=_bounded(float, 3_600.0), default=5.0, metavar="S",
                    help="give up a replay that is quiet for S seconds (default 5)")
    lv.add_argument("--max-message-bytes", type=_bounded(int, 1 << 30), default=64 << 20, metavar="N",
                    help="refuse frames over N bytes (default 64 MiB)")
    lv.add_argument("--json", action="store_true", help="print the final state as JSON")
    lv.add_argument("--lang", choices=LANGS, default="en")
    lv.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _limits(lv)
    lv.set_defaults(fn=cmd_live)
    pb = sub.add_parser("publish", help="publish a scenario's KV events as vLLM's ZeroMQ publisher",
                        description="Run a scenario (a file or a built-in lesson's id) on blockviz's "
                                    "engine and publish its KV events exactly as vLLM 0.33's "
                                    "ZmqEventPublisher would: one batch per engine step with "
                                    "events, seqs from 0, a replay ROUTER. The PUB socket binds "
                                    "when the endpoint has '*' or '::' (tcp://*:P binds on every "
                                    "interface; tcp://[::ffff:127.0.0.1]:P on loopback only) and "
                                    "connects otherwise.")
    pb.add_argument("scenario", help="a scenario file or a built-in lesson's id")
    pb.add_argument("--endpoint", required=True, help="KVEventsConfig.endpoint")
    pb.add_argument("--replay", default=None, metavar="ENDPOINT",
                    help="KVEventsConfig.replay_endpoint (the ROUTER binds there)")
    pb.add_argument("--topic", default="", help="KVEventsConfig.topic (default empty)")
    pb.add_argument("--interval-ms", type=_non_negative, default=0.0, metavar="N",
                    help="pause after every engine step (default 0)")
    pb.add_argument("--start-delay-s", type=_non_negative, default=1.0, metavar="S",
                    help="wait before the first step so subscribers can subscribe (default 1)")
    pb.add_argument("--hold-s", type=_non_negative, default=2.0, metavar="S",
                    help="keep answering replay requests after the last batch (default 2)")
    pb.add_argument("--buffer-steps", type=_bounded(int, 1 << 24), default=10_000, metavar="N",
                    help="KVEventsConfig.buffer_steps: batches kept for replay (default 10000)")
    pb.add_argument("--no-payloads", action="store_true",
                    help="skip the KV tensors (as blockviz json --no-payloads: outputs the scenario "
                         "leaves to the model then come from the seeded toy sampler)")
    pb.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    pb.add_argument("--lang", choices=LANGS, default="en")
    pb.add_argument("--quiet", action="store_true", help="no progress on stderr")
    pb.set_defaults(fn=cmd_publish)
    e = sub.add_parser("events", help="read recordings of vLLM's KV-event stream",
                       description="Recordings in the framing vllm-kv-events-capture/1 (what "
                                   "`blockviz live --record` writes).")
    esub = e.add_subparsers(dest="events_command", required=True, metavar="{state}")
    st = esub.add_parser("state", help="what a subscriber can know from a recording",
                         description="Reduce a recording to the prefix cache a subscriber can "
                                     "rebuild: per (medium, group_idx), the cached hashes in store "
                                     "order with parent, token ids, LoRA, extra keys and copy "
                                     "count; what went wrong (late join, gaps, unreadable "
                                     "messages); what no subscriber can know.")
    st.add_argument("file", help="a recording (JSON Lines, vllm-kv-events-capture/1)")
    st.add_argument("--json", action="store_true",
                    help='{"caches": {"GPU/0": [{"hash", "parent", "count", "token_ids", '
                         '"lora_name", "extra_keys", ...}]}, "batches", "missing_seqs", "notes", ...}')
    st.add_argument("--lang", choices=LANGS, default="en")
    _limits(st)
    st.set_defaults(fn=cmd_state)
