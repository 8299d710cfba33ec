"""The BFD child process: `BfdThread` behind a line protocol on stdin/stdout.

DOC: measured here (docs/bfd.md), a BFD thread inside the agent's process transmits up to ~55 ms
late while the agent's event loop is busy (it must win the GIL back from the loop's thread: one
switch interval per hand-over at best, and never during a long C call or a full GC pass over a
500k-route RIB), and 9 ms late in a process of its own on the same loaded machine. So the agent
runs BFD here, in a child process (`python -m agent.bfd.child`, started by `agent.bfd.client`):
the BFD thread owns the sockets and timers as before, and this module only moves lines:

* stdin, one JSON object per line: ``{"configure": [{"peer", "local", "minRx", "minTx",
  "multiplier"}, ...]}`` (the whole set of sessions wanted). End of file (the agent died or
  stopped): the sessions stop and the process exits.
* stdout, one JSON object per line: ``{"change": {"peer", "old", "new", "diag"}}`` at once for each
  state change, and ``{"views": {...}, "counts": [[peer, what, n], ...], "lateMaxMs": x}`` when
  they changed, at most every `VIEW_SECONDS`.

A writer thread does the writing, so a parent slow to read never blocks the BFD thread.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import sys
import threading

from .runtime import BfdThread, SessionSpec
from .session import Change, Timers

VIEW_SECONDS = 0.5


def spec_from_json(d: dict) -> SessionSpec:
    return SessionSpec(d["peer"], d.get("local"), Timers(d["minRx"], d["minTx"], d["multiplier"]))


def change_to_json(c: Change) -> dict:
    return {"change": {"peer": c.key, "old": c.old.label, "new": c.new.label, "diag": c.diag.name.lower(),
                       "at": c.at}}


def _writer(bfd: BfdThread, out: queue.SimpleQueue, stream) -> None:
    last = None
    while True:
        try:
            item = out.get(timeout=VIEW_SECONDS)
        except queue.Empty:
            item = None
        if item is StopIteration:
            return
        lines = [] if item is None else [item]
        views = {p: dataclasses.asdict(v) for p, v in bfd.views().items()}
        snap = {"views": views, "counts": [[*k, n] for k, n in sorted(bfd.counts().items())],
                "lateMaxMs": round(bfd.late_max * 1000, 3), "lateP99Ms": bfd.late_quantile(0.99),
                "sends": sum(bfd.late_hist)}
        if snap != last:
            last = snap
            lines.append(snap)
        try:
            for line in lines:
                stream.write(json.dumps(line) + "\n")
            stream.flush()
        except (BrokenPipeError, ValueError):
            return


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s route-agent-bfd %(levelname)s %(message)s")
    out: queue.SimpleQueue = queue.SimpleQueue()
    bfd = BfdThread(lambda change: out.put(change_to_json(change)))
    bfd.start()
    writer = threading.Thread(target=_writer, args=(bfd, out, sys.stdout), name="bfd-writer", daemon=True)
    writer.start()
    try:
        for line in sys.stdin:
            try:
                msg = json.loads(line)
                bfd.configure([spec_from_json(d) for d in msg["configure"]])
            except (ValueError, KeyError, TypeError) as exc:
                logging.error("bad command from the agent: %s (%s)", line[:200].strip(), exc)
    finally:
        bfd.stop()
        out.put(StopIteration)
        writer.join(2)


if __name__ == "__main__":
    main()
