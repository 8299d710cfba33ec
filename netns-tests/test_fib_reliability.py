"""FIB reliability against a real kernel (issue 12): scans racing writes, metric changes, and the
reconciler's failed state after conflicts. Same throwaway namespaces as test_netlink_adapter."""

from __future__ import annotations

import threading
import time

from agent.fib.types import Op, OpKind
from agent.model import Prefix
from test_netlink_adapter import GW0, GW1, fib, ns  # noqa: F401  (fixtures)

ROUTES = 20000


def _in_thread(fn, timeout: float):
    """Run `fn` in a daemon thread; (finished, result or exception). A thread that is still
    blocked at the deadline is left behind (it is a daemon): the test fails instead of hanging."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return (not t.is_alive()), out


def test_scans_while_a_20k_route_batch_is_in_flight_both_finish(ns, fib):
    """The agent's full scan (links + routes dump, event loop) runs while the writer thread has a
    20k-route batch in flight. With one shared socket each side threw away the other's replies:
    the dump blocked forever in recv or the batch lost its ACK (10 s timeout, all ops failed)."""
    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(ROUTES)]
    writes: dict = {}

    def write():
        t0 = time.monotonic()
        for route in (GW0, GW1, GW0, GW1):  # four full batches: plenty of overlap with the scans
            errors = fib.apply([Op(OpKind.REPLACE, p, route) for p in prefixes])
            assert errors == [], errors[:3]
        return time.monotonic() - t0

    writer = threading.Thread(target=lambda: writes.update(_in_thread(write, 120)[1]), daemon=True)
    writer.start()
    scans = 0
    while writer.is_alive() or scans == 0:
        finished, out = _in_thread(lambda: (fib.links_dump(), fib.dump()), 15)
        assert finished, "the scan blocked while a batch was in flight"
        assert "error" not in out, f"the scan failed: {out['error']!r}"
        links, dump = out["value"]
        assert {"lo", "v0", "v1"} <= {link.name for link in links}
        assert set(dump.ours) <= set(prefixes)
        scans += 1
    writer.join(130)
    assert "error" not in writes, f"the batches failed: {writes['error']!r}"
    assert "value" in writes, "the writer never finished"
    assert scans >= 2
    assert fib.dump().ours == {p: GW1 for p in prefixes}
    assert fib.writer.sock.timeouts == 0 and fib.scanner.sock.timeouts == 0
    print(f"\n{scans} scans during 4 x {ROUTES}-route batches ({writes['value']:.2f}s)")
