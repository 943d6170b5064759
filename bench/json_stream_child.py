"""One ``blockviz json`` in a fresh process (``python -m bench.json_stream_child MODE FILE``), so
that its peak RSS is its own: MODE ``stream`` is the command as it is (``blockviz.cli.main``);
``eager`` is how it was written before (the whole document built, then ``json.dump``), kept here
to be measured side by side. The JSON goes to stdout; the last line on stderr is this process's
peak RSS as JSON."""
from __future__ import annotations

import json
import sys

from .scale_child import _peak_rss_mb


def eager(file: str) -> None:
    from blockviz.scenario import load
    from blockviz.sim.contract import timeline_dict
    from blockviz.sim.runner import run
    loaded = load(file)
    engine, timeline = run(loaded)
    json.dump(timeline_dict(loaded.scenario.id, engine, timeline), sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


def main(argv: list[str]) -> int:
    mode, file = argv
    if mode == "stream":
        from blockviz.cli import main as cli
        rc = cli(["json", file])
    else:
        eager(file)
        rc = 0
    sys.stdout.flush()
    print(json.dumps({"peak_rss_mb": _peak_rss_mb()}), file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
