"""`FibWriter`: urgent nexthop group writes (a BFD failure) are handed to the batch in flight
instead of waiting for it, unless that batch writes the same objects."""

from types import SimpleNamespace

from agent.daemon.writer import FibWriter
from agent.fib.types import NhOp, OpKind


class Netlink:
    def __init__(self, accept=True):
        self.accept = accept
        self.injected = []

    def inject(self, kops):
        if self.accept:
            self.injected += kops
        return self.accept


def writer(netlink, urgent, inflight):
    routing = SimpleNamespace(nhg=SimpleNamespace(urgent=list(urgent)), netlink=netlink)
    w = FibWriter(routing, queue=None, metrics=None)
    w._flushing, w._inflight_objects = True, set(inflight)
    return w, routing


SHRINK = NhOp(OpKind.REPLACE, 7, 0, None, ((2, 1),))


def test_urgent_group_writes_go_to_the_batch_in_flight():
    nl = Netlink()
    w, r = writer(nl, [SHRINK], inflight={5, 6})
    w.flush()
    assert nl.injected == [SHRINK] and r.nhg.urgent == []


def test_they_wait_when_the_batch_writes_the_same_group():
    nl = Netlink()
    w, r = writer(nl, [SHRINK], inflight={7})
    w.flush()
    assert nl.injected == [] and r.nhg.urgent == [SHRINK]


def test_they_stay_urgent_when_the_batch_is_being_finished():
    nl = Netlink(accept=False)
    w, r = writer(nl, [SHRINK], inflight=set())
    w.flush()
    assert r.nhg.urgent == [SHRINK]
