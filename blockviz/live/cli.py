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

EXIT_INPUT = 2


def _positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be > 0")
        return v
    return parse


def _limits(p: argparse.ArgumentParser) -> None:
    from blockviz.live.reducer import MAX_HASHES, MAX_TOKENS_PER_HASH
    p.add_argument("--max-hashes", type=_positive(int), default=None, metavar="N",
                   help=f"cached hashes kept per rank at most (default {MAX_HASHES:,})")
    p.add_argument("--max-tokens-per-hash", type=_positive(int), default=None, metavar="N",
                   help=f"token ids kept per hash at most (default {MAX_TOKENS_PER_HASH:,})")


def _limit_kw(args) -> dict:
    kw = {}
    if args.max_hashes is not None:
        kw["max_hashes"] = args.max_hashes
    if args.max_tokens_per_hash is not None:
        kw["max_tokens_per_hash"] = args.max_tokens_per_hash
    return kw


# -- output -------------------------------------------------------------------------------------
def print_state(red, name: str, lang: str, out=sys.stdout) -> None:
    from blockviz.i18n import t
    from blockviz.live.reducer import CANNOT_KNOW
    w = out.write
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
    from blockviz.i18n import t
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
    if args.json:
        json.dump(red.report(), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print_state(red, args.file, args.lang)
    return 0


def add_parser(sub) -> None:
    """Register ``live``, ``publish`` and ``events`` on the ``blockviz`` command's subparsers."""
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
    st.add_argument("--lang", choices=["en", "zh"], default="en")
    _limits(st)
    st.set_defaults(fn=cmd_state)
