"""FIB reliability against a real kernel (issue 12): scans racing writes, metric changes, and the
reconciler's failed state after conflicts. Same throwaway namespaces as test_netlink_adapter."""

from __future__ import annotations

import errno
import json
import threading
import time

import pytest

from agent.fib.netlink import LinkIndex, NetlinkFib, RouteMonitor
from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, Op, OpKind, RouteEvent
from agent.core.model import NextHop, Prefix
from test_netlink_adapter import GW0, GW1, PROTO, P, fib, kr, ns, wait_events  # noqa: F401  (fixtures)

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


# ---- issue 12 item 5: metrics ----
def _flush(state: FibState, fib) -> list[tuple[str, int]]:
    ops = state.plan()
    state.done(ops, fib.apply(ops))
    return [(o.kind.value, o.route.metric) for o in ops]


def _scan(state: FibState, fib) -> None:
    dump = fib.dump()
    state.resync(dump.ours, dump.extra)


def _metrics(ns, prefix: str, family: int = 4) -> dict[int, str]:
    """Our routes for `prefix` in the kernel: metric -> gateway."""
    out = ns.ip("-j", f"-{family}", "route", "show", "table", "all", "proto", str(PROTO), "root", prefix)
    return {r.get("metric", 0): r.get("gateway") for r in json.loads(out or "[]")}


def test_metric_change_is_make_before_break_in_the_kernel(ns, fib):
    prefix = "10.20.0.0/16"
    state = FibState(FibSettings())
    state.open_gate()
    state.want({P(prefix): GW0})
    assert _flush(state, fib) == [("add", 20)]
    # the new route cannot be installed (gateway unreachable): the old one must stay
    state.want({P(prefix): kr(NextHop("203.0.113.1", "v0"), metric=50)})
    assert _flush(state, fib) == [("add", 50)]
    assert _metrics(ns, prefix) == {20: "192.0.2.2"} and P(prefix) in state.failed
    # a reachable one: added first, the old one deleted by the next batch only
    state.want({P(prefix): kr(NextHop("198.51.100.2", "v1"), metric=50)})
    ops = state.plan(retry_failed=True)
    assert [(o.kind.value, o.route.metric) for o in ops] == [("add", 50)]
    state.done(ops, fib.apply(ops))
    assert _metrics(ns, prefix) == {20: "192.0.2.2", 50: "198.51.100.2"}
    _scan(state, fib)  # a scan between the two batches changes nothing
    assert _flush(state, fib) == [("delete", 20)]
    assert _metrics(ns, prefix) == {50: "198.51.100.2"}
    _scan(state, fib)
    assert state.plan() == [] and state.converged and not state.failed


def test_ipv6_metric_0_is_1024_and_switching_back_leaves_only_the_new_route(ns, fib):
    prefix = "2001:db8:20::/48"
    route = kr(NextHop("2001:db8:a::2", "v0"))
    state = FibState(FibSettings())
    state.open_gate()
    state.want({P(prefix): route.with_metric(0)})
    assert _flush(state, fib) == [("add", 1024)]
    assert _metrics(ns, prefix, 6) == {1024: "2001:db8:a::2"}
    _scan(state, fib)  # reads back 1024: nothing to repair
    assert state.plan() == [] and state.converged
    state.want({P(prefix): route})
    assert _flush(state, fib) + _flush(state, fib) == [("add", 20), ("delete", 1024)]
    assert _metrics(ns, prefix, 6) == {20: "2001:db8:a::2"}
    _scan(state, fib)
    assert state.plan() == [] and state.converged


# ---- issue 12 item 6: failed state, late echoes ----
def _drain(ns, monitor) -> list:
    """Every event queued on `monitor`, up to a marker route added now (events are in order)."""
    ns.ip("route", "add", "10.255.0.0/16", "via", "192.0.2.2", "proto", "static")
    try:
        return wait_events(monitor, lambda e: isinstance(e, RouteEvent) and str(e.prefix) == "10.255.0.0/16",
                           timeout=15)
    finally:
        ns.ip("route", "del", "10.255.0.0/16", "proto", "static")


def _our_route_events(state: FibState, events) -> None:
    """What the agent does with monitor events for routes of ours (main._our_route_event)."""
    for ev in events:
        if isinstance(ev, RouteEvent) and ev.foreign is None:
            cur = state.actual.get(ev.prefix)
            if ev.deleted and cur == ev.route:
                state.kernel_changed(ev.prefix, None)
            elif not ev.deleted and cur != ev.route:
                state.kernel_changed(ev.prefix, ev.route)


def test_late_echoes_of_our_deletes_do_not_undo_the_re_add(ns, fib):
    """Delete a batch, add the same routes again, and only then read the monitor (the agent reads
    at most 256 datagrams per loop turn, so echoes of a big batch trickle in late). The echoes
    of our own deletes must not look like someone deleting the re-added routes (-> EEXIST)."""
    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(3000)]
    state = FibState(FibSettings())
    state.open_gate()
    with RouteMonitor(FibSettings(), fib.links) as monitor:
        for route in (GW0, None, GW0):  # install, sweep, learn again
            state.want({p: route for p in prefixes})
            _flush(state, fib)
        events = _drain(ns, monitor)
        assert [e for e in events if isinstance(e, RouteEvent) and e.foreign is None] == []
        assert monitor.echoes_dropped >= 3000
        _our_route_events(state, events)
        assert state.plan() == [] and state.converged
        # a deletion by someone else is still seen and repaired
        ns.ip("route", "del", "10.0.5.0/24", "proto", str(PROTO))
        _our_route_events(state, _drain(ns, monitor))
        assert [(o.kind, str(o.prefix)) for o in state.plan()] == [(OpKind.ADD, "10.0.5.0/24")]


def test_eexist_for_our_own_route_is_settled_by_the_scan_and_the_withdrawal_goes_through(ns, fib):
    prefix = "10.30.0.0/16"
    ns.ip("route", "add", prefix, "via", "192.0.2.2", "proto", str(PROTO), "metric", "20")  # ours, unknown
    state = FibState(FibSettings())
    state.open_gate()
    state.want({P(prefix): GW0})
    assert _flush(state, fib) == [("add", 20)]
    assert state.failed[P(prefix)].errno == errno.EEXIST
    _scan(state, fib)  # the conflict scan: the route is ours and wanted
    assert not state.failed and state.converged and not state.retry_waiting
    state.want({P(prefix): None})
    ops = state.plan(retry_failed=False)  # no retry timer needed
    state.done(ops, fib.apply(ops))
    assert [o.kind for o in ops] == [OpKind.DELETE] and ns.ours() == {}


def test_a_dump_gives_way_when_asked_and_the_next_one_is_whole(ns, fib):
    """The full scan's dump gives way to a BFD change (`interrupt`): it stops after the datagram
    it is reading, nothing of it is returned, and the scan socket (with the rest of that dump
    unread in the kernel) is replaced, so the next dump is complete."""
    from agent.fib.netlink import ScanInterrupted

    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(ROUTES)]
    assert fib.apply([Op(OpKind.ADD, p, GW0) for p in prefixes]) == []
    asked = []

    def interrupt():
        asked.append(1)
        return len(asked) >= 3
    reopened = fib.scanner.sock.reopened
    try:
        fib.dump(interrupt)
    except ScanInterrupted:
        pass
    else:
        raise AssertionError("the dump did not give way")
    assert len(asked) == 3 and fib.scanner.sock.reopened == reopened + 1
    dump = fib.dump(lambda: False)
    assert set(dump.ours) == set(prefixes)


@pytest.fixture
def fib1024(ns):
    """A writer of 1024-message batches: `ip monitor` must read every event of a burst, and 4096
    route events (~3 MiB of the kernel's buffers) can overflow its socket while it waits for a core."""
    with NetlinkFib(FibSettings(), LinkIndex.from_kernel(), batch=1024) as f:
        yield f


def test_an_injected_group_replace_overtakes_the_batch_in_flight(ns, fib1024):
    """A BFD failure's group replace (`NetlinkWriter.inject`) goes out at the next batch
    boundary of the `apply()` under way, before the rest of its routes, not after the call."""
    from agent.fib.types import NhOp
    from testlab.monitor import Monitor

    fib = fib1024
    a, b, group = 7001, 7002, 7003
    assert fib.apply([NhOp(OpKind.ADD, a, 4, NextHop("192.0.2.2", "v0")),
                      NhOp(OpKind.ADD, b, 4, NextHop("198.51.100.2", "v1")),
                      NhOp(OpKind.ADD, group, 0, None, ((a, 1), (b, 1)))]) == []
    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(60_000)]
    mon = Monitor(ns.name, ("route", "nexthop"), rcvbuf=16 << 20, realtime=True)
    try:
        start = len(mon.lines)
        batch = threading.Thread(target=lambda: writes.update(
            errors=fib.apply([Op(OpKind.ADD, p, GW0) for p in prefixes])), daemon=True)
        writes: dict = {}
        batch.start()
        shrink = NhOp(OpKind.REPLACE, group, 0, None, ((b, 1),))
        deadline = time.monotonic() + 30
        while not fib.inject([shrink]):  # accepted once the call is under way
            assert batch.is_alive() and time.monotonic() < deadline, "the batch ended before the injection"
            time.sleep(0.001)
        batch.join(60)
        assert writes["errors"] == []
        assert fib.take_injected() == [([shrink], [])]
        assert fib.take_injected() == []
        (obj,) = json.loads(ns.ip("-j", "nexthop", "show", "id", str(group)))
        assert [m["id"] for m in obj["group"]] == [b]
        mon.mark()
        events = mon.lines[start:]
        at = next(i for i, e in enumerate(events) if e.startswith(f"id {group} group"))
        later = [e for e in events[at:] if e.startswith("10.")]
        assert len(later) > 1024, len(later)  # routes of the same call were written after it
        assert len(ns.ours()) == len(prefixes)
    finally:
        mon.close()


def test_an_injected_write_of_an_object_the_batch_still_writes_goes_after_it(ns, fib):
    """The batch in flight replaces group G itself, in its last part; an urgent replace of G
    injected earlier must not be undone by it: it is sent after the batch's own write of G."""
    from agent.fib.types import NhOp

    a, b, group = 7101, 7102, 7103
    assert fib.apply([NhOp(OpKind.ADD, a, 4, NextHop("192.0.2.2", "v0")),
                      NhOp(OpKind.ADD, b, 4, NextHop("198.51.100.2", "v1")),
                      NhOp(OpKind.ADD, group, 0, None, ((a, 1), (b, 1)))]) == []
    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(60_000)]
    ops = [Op(OpKind.ADD, p, GW0) for p in prefixes] + [NhOp(OpKind.REPLACE, group, 0, None, ((a, 1), (b, 1)))]
    writes: dict = {}
    batch = threading.Thread(target=lambda: writes.update(errors=fib.apply(ops)), daemon=True)
    batch.start()
    shrink = NhOp(OpKind.REPLACE, group, 0, None, ((b, 1),))
    deadline = time.monotonic() + 30
    while not fib.inject([shrink]):
        assert batch.is_alive() and time.monotonic() < deadline, "the batch ended before the injection"
        time.sleep(0.001)
    batch.join(60)
    assert writes["errors"] == [] and fib.take_injected() == [([shrink], [])]
    (obj,) = json.loads(ns.ip("-j", "nexthop", "show", "id", str(group)))
    assert [m["id"] for m in obj["group"]] == [b]
