"""`FibWriter`: urgent nexthop group writes (a BFD failure) are handed to the batch in flight
instead of waiting for it (`NetlinkWriter.inject` orders them after that batch's own writes of
the same objects: netns-tests/test_fib_reliability.py)."""

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


def writer(netlink, urgent):
    routing = SimpleNamespace(nhg=SimpleNamespace(urgent=list(urgent)), netlink=netlink)
    w = FibWriter(routing, queue=None, metrics=None)
    w._flushing = True
    return w, routing


SHRINK = NhOp(OpKind.REPLACE, 7, 0, None, ((2, 1),))


def test_urgent_group_writes_go_to_the_batch_in_flight():
    nl = Netlink()
    w, r = writer(nl, [SHRINK])
    w.flush()
    assert nl.injected == [SHRINK] and r.nhg.urgent == []


async def test_when_the_batch_is_written_but_not_taken_they_go_on_their_own_and_count_after_it():
    from agent.daemon.events import EventQueue

    nl = Netlink(accept=False)
    nl.applied = []
    nl.apply = lambda kops: nl.applied.append(list(kops)) or []
    done = []
    routing = SimpleNamespace(nhg=SimpleNamespace(urgent=[SHRINK], done=lambda kops, errs: done.append((kops, errs))),
                              netlink=nl)
    w = FibWriter(routing, queue=EventQueue(), metrics=None)
    w._flushing = True  # the batch's outcome waits in the queue
    w.flush()
    ev = await w.queue.get()
    assert ev.kind == "urgent-flushed" and nl.applied == [[SHRINK]] and routing.nhg.urgent == []
    w.urgent_flushed(ev.data)
    assert done == []  # recorded only after the batch written before it
    w._flushing = False
    w.urgent_flushed(w._urgent_done.pop())
    assert done == [([SHRINK], [])]
    w.close()


def test_kind_counts_counts_kernel_ops_by_kind():
    """The metric's op counts: route ops plain or through a nexthop object by their own kind,
    object writes by theirs (counted by identity, in C)."""
    from agent.core.model import KernelRoute, Prefix, RouteType
    from agent.daemon.writer import kind_counts
    from agent.fib.types import NhRouteOp, Op

    r = KernelRoute(RouteType.BLACKHOLE, (), 20)
    add = Op(OpKind.ADD, Prefix.parse("10.0.0.0/24"), r)
    kops = ([NhRouteOp(add, 5)] * 3 + [NhRouteOp(add._replace(kind=OpKind.REPLACE), 5), add,
            Op(OpKind.DELETE, add.prefix, r), SHRINK, NhOp(OpKind.ADD, 8, 4)])
    assert kind_counts(kops) == {OpKind.ADD: 5, OpKind.REPLACE: 2, OpKind.DELETE: 1}
    assert kind_counts(kops[4:6]) == {OpKind.ADD: 1, OpKind.DELETE: 1}
    assert kind_counts([]) == {}
