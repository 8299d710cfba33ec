"""The core queue is bounded; at the bound kernel deltas become one full resync, idempotent work
is not queued twice, and configuration and session events are never dropped."""

from types import SimpleNamespace

from agent.api.metrics import Metrics
from agent.daemon.events import MAX_EVENTS, Event, EventQueue


def overflows(metrics, kind, action):
    return metrics.registry.get_sample_value("route_agent_event_queue_overflows_total",
                                             {"kind": kind, "action": action}) or 0


def drain(q):
    return [q.get_nowait() for _ in range(q.qsize())]


def test_kernel_deltas_at_the_bound_coalesce_into_one_resync():
    m = Metrics()
    q = EventQueue(maxsize=3, counter=m.queue_overflows)
    for i in range(103):
        q.put(Event("kernel", [i]))
    assert q.qsize() == 4  # the bound, plus one full resync standing for the other 100 batches
    assert overflows(m, "kernel", "coalesced") == 100
    events = drain(q)
    assert [e.kind for e in events] == ["kernel"] * 3 + ["scan"]
    assert events[-1].data == "queue-full"
    # once that resync was taken, the next overflow asks for a new one
    for i in range(5):
        q.put(Event("main-table", [i]))
    assert [(e.kind, e.data) for e in drain(q)][-1] == ("scan", "queue-full")


def test_config_and_session_events_are_kept_beyond_the_bound_and_counted():
    m = Metrics()
    q = EventQueue(maxsize=2, counter=m.queue_overflows)
    q.put(Event("kernel", []))
    q.put(Event("kernel", []))
    for ev in (Event("config", "c"), Event("bgp", "update"), Event("k8s", "batch"), Event("flushed", ())):
        q.put(ev)
    q.put(Event("status", "periodic"))
    q.put(Event("status", "soon"))  # one waiting status event does the same
    kinds = [e.kind for e in drain(q)]
    assert kinds == ["kernel", "kernel", "config", "bgp", "k8s", "flushed", "status"]
    assert overflows(m, "config", "kept") == overflows(m, "bgp", "kept") == 1
    assert overflows(m, "status", "coalesced") == 1


def test_below_the_bound_every_event_is_queued_in_order():
    q = EventQueue(maxsize=10)
    evs = [Event("scan", "overrun"), Event("kernel", [1]), Event("config", "x"), Event("kernel", [2])]
    for ev in evs:
        q.put(ev)
    assert drain(q) == evs


def test_a_waiting_full_scan_absorbs_the_next_ones_until_it_is_taken():
    """Link flaps and periodic scans must not queue scans faster than a big scan runs."""
    q = EventQueue(maxsize=10)
    for reason in ("overrun", "link-down", "periodic"):
        q.put(Event("scan", reason))
    q.put(Event("kernel", [1]))
    assert drain(q) == [Event("scan", "overrun"), Event("kernel", [1])]
    q.put(Event("scan", "link-down"))  # the waiting one was taken: a new change needs a new scan
    assert drain(q) == [Event("scan", "link-down")]


async def test_the_agents_queue_is_bounded(tmp_path):
    from agent.daemon.agent import Agent

    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata:\n  name: node\n")
    agent = Agent(str(path))
    assert agent.queue.maxsize == MAX_EVENTS

    class Monitor:
        def read(self):
            return [object()]

    for _ in range(MAX_EVENTS + 50):
        agent.routing.on_monitor(Monitor())
    assert agent.queue.qsize() == MAX_EVENTS + 1


async def test_urgent_event_overtakes_the_queue_and_wakes_a_waiting_get():
    import asyncio

    from agent.daemon.events import Event, EventQueue

    q = EventQueue(maxsize=10)
    for i in range(5):
        q.put(Event("bgp", i))
    q.put_urgent(Event("bfd", "down"))
    assert q.get_nowait() == Event("bfd", "down")
    assert [q.get_nowait().data for _ in range(5)] == [0, 1, 2, 3, 4]
    assert q.get_nowait().kind == "urgent" and q.empty()  # the placeholder, no handler
    waiter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    q.put_urgent(Event("bfd", "up"))
    assert await asyncio.wait_for(waiter, 1) == Event("bfd", "up")


def test_the_rest_of_a_burst_goes_behind_urgent_events_and_ahead_of_the_rest():
    from agent.daemon.events import Event, EventQueue

    q = EventQueue(maxsize=10)
    q.put(Event("kernel", "later"))
    q.put_next(Event("bgp", "rest of the burst"))
    q.put_urgent(Event("bfd", "down"))
    taken = [q.get_nowait() for _ in range(5)]
    assert [e.data for e in taken if e.kind != "urgent"] == ["down", "rest of the burst", "later"]


async def test_a_burst_of_updates_gives_way_to_a_waiting_bfd_change(tmp_path):
    """`Routing.handle_bgp` stops between two events of a burst when something urgent waits
    (a BFD change read by its thread) and queues the rest behind it, ahead of what came later."""
    from agent.core.bgp import PeerState, PeerStatus
    from agent.daemon.agent import Agent
    from agent.daemon.events import Event

    path = tmp_path / "c.yaml"
    path.write_text("""apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: tor}
spec: {peerAddress: 10.0.0.1, peerAS: 65001, localAS: 65000, routerId: 10.0.0.254}
""")
    r = Agent(str(path), state_dir=str(tmp_path / "s"), node_name="n").routing
    seen = []
    r.bgp.handle = lambda ev, now, run=None: seen.append(ev) or SimpleNamespace(
        updates=[], withdrawn=[], logs=[], timers=[], synced=[])
    burst = tuple(PeerState("10.0.0.1", s) for s in (PeerStatus.UP, PeerStatus.DOWN, PeerStatus.UP))
    r.queue.put(Event("kernel", "later"))
    r.urgent_waiting = lambda: len(seen) == 1  # a change came while the first event was handled
    r.handle_bgp(burst)
    assert seen == [burst[0]]
    rest = [e for e in (r.queue.get_nowait() for _ in range(3)) if e.kind != "urgent"]
    assert rest[0] == Event("bgp", burst[1:]) and rest[1] == Event("kernel", "later")
