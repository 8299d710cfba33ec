"""Route ops in runs (`agent.fib.runops`): the lists of ops they stand for, the messages the
encoder packs from them, and a table's way through the lanes without building one op."""

from __future__ import annotations

import errno

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops
from agent.daemon.writer import kind_counts
from agent.fib.codec import iter_messages
from agent.fib.encoder import Encoder
from agent.fib.nhg import NhLayer
from agent.fib.nhusers import record_outcome
from agent.fib.reconciler import FibState
from agent.fib.runops import AddRun, NhAddRun, OpsSlice, object_ops
from agent.fib.types import FibSettings, NhOp, NhRouteOp, Op, OpError, OpKind
from agent.fib.writer import _with_ack

P = Prefix.parse
ADD = OpKind.ADD


def route(gateway: str, metric: int = 20, dev: str = "eth0") -> KernelRoute:
    return intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop(gateway, dev)), metric))


R1, R2, R6 = route("10.0.0.1"), route("10.0.0.2", 30), route("fd00::1")
V4 = [P(f"10.1.{i}.0/24") for i in range(40)] + [P("0.0.0.0/0"), P("10.9.0.0/16")]
V6 = [P(f"2001:db8:{i:x}::/48") for i in range(10)] + [P("::/0")]


def test_an_add_run_is_the_list_of_its_ops_built_once():
    one = AddRun(V4, R1, None)
    each = AddRun(V4 + V6, None, [R1, R2] * 21 + [R6] * 11)
    assert one == [Op(ADD, p, R1) for p in V4]
    assert list(each) == [Op(ADD, p, r) for p, r in zip(V4 + V6, [R1, R2] * 21 + [R6] * 11)]
    assert len(one) == len(V4) and one[3] is one[3] and one[-1] is one.items[-1]  # (identity: errors)
    part = one[5:9]
    assert isinstance(part, OpsSlice) and len(part) == 4 and part == one.items[5:9]
    assert part[0] is one[5] and part[-1] is one[8] and list(part) == one.items[5:9]
    assert one[::2] == one.items[::2] and one[40:100] == one.items[40:]


def test_the_encoder_packs_a_run_as_it_packs_its_ops():
    enc = Encoder(FibSettings(), {"eth0": 2})
    runs = [AddRun(V4, R1, None), AddRun(V4 + V6, None, [R1, R2] * 21 + [R6] * 11), AddRun(V6, R6, None),
            AddRun(V6[:-1] * 3, R6, None), AddRun(V4[:40] * 2, R2, None)]  # (no /0: one route's own loop)
    head = [NhOp(ADD, 201 << 20, 4, NextHop("10.0.0.1", "eth0")), NhOp(ADD, (201 << 20) + 1, 0, None, (((201 << 20), 1),))]
    runs.append(NhAddRun(head, AddRun(V4, R1, None), (201 << 20) + 1, None))
    runs.append(NhAddRun(head, AddRun(V4, None, [R1, R2] * 21), None, [7, 8] * 21))
    runs.append(NhAddRun(head, AddRun(V6[:-1] * 4, R6, None), 9, None))
    for run in runs:
        ops = list(run)  # (built: the reference)
        for start, stop in ((0, len(run)), (0, 1), (1, 3), (2, 30), (17, len(run)), (len(run) - 1, len(run))):
            fresh = type(run).__new__(type(run))  # a run whose ops were never built
            for name in type(run).__slots__:
                setattr(fresh, name, getattr(run, name))
            fresh._items = None
            got = enc.encode_batch(fresh[start:stop], 100)
            want = enc.encode_batch(ops[start:stop], 100)  # (a list: one message each)
            assert b"".join(got) == b"".join(want), (type(run).__name__, start, stop)
            assert got[-1:] == want[-1:]  # the last message on its own (the writer sets its ACK flag)
            assert fresh._items is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 33)), min_size=1, max_size=80),
       st.integers(0, 3), st.sampled_from([1, 0xFFF0, 0xFFFF, 0x1FFE0, 0x7FFFFF00]), st.booleans())
def test_packed_columns_are_the_messages_of_the_ops(stretches, mode, first, groups):
    """Runs of stretches of IPv4 / IPv6 prefixes (some /0), one route or group for all or each
    stretch its own, sequence numbers across a wrap of their low half (`nlsock.Seq.take` stays
    below 2**31): the encoder's blocks are
    exactly `encode`'s messages of the run's ops, the last one on its own."""
    pool4 = [P(f"10.{i}.{j}.0/24") for i in range(3) for j in range(40)] + [P("0.0.0.0/0"), P("10.7.0.0/16")]
    pool6 = [P(f"2001:db8:{i:x}::/48") for i in range(40)] + [P("::/0"), P("2001:db8::1/128")]
    routes4, routes6 = (R1, R2, route("10.0.0.3")), (R6, route("fd00::2"), route("fd00::3", 30))
    prefixes, routes, gids = [], [], []
    for k, (fam, which, count) in enumerate(stretches):
        v6 = fam == 2 or (fam == 1 and k % 2)
        pool = pool6 if v6 else pool4
        for i in range(count + 1):
            prefixes.append(pool[(k * 7 + i * (mode + 1)) % (len(pool) - (0 if mode == 3 else 2))])
            routes.append((routes6 if v6 else routes4)[which if mode else 0])
            gids.append(100 + which + (3 if v6 else 0) if mode else 100 + (3 if v6 else 0))
    enc = Encoder(FibSettings(), {"eth0": 2})
    one_route = len(set(map(id, routes))) == 1
    run = AddRun(prefixes, routes[0] if one_route else None, None if one_route else routes)
    kops = NhAddRun([], run, gids[0] if len(set(gids)) == 1 else None, None if len(set(gids)) == 1 else gids) \
        if groups else run
    for start, stop in ((0, len(kops)), (1, len(kops)), (0, len(kops) // 2 + 1)):
        got = enc.encode_batch(OpsSlice(kops, start, stop), first)
        ops = list(kops)[start:stop]
        if not ops:
            continue
        assert b"".join(got) == b"".join(enc.encode(op, first + i) for i, op in enumerate(ops))
        assert got[-1] == enc.encode(ops[-1], first + len(ops) - 1)


def test_the_ack_flag_set_on_a_message_is_the_encoders():
    enc = Encoder(FibSettings(), {"eth0": 2})
    for op in (Op(ADD, V4[0], R1), Op(OpKind.DELETE, V6[0], R6), NhRouteOp(Op(ADD, V4[1], R1), 9),
               NhOp(ADD, 5, 4, NextHop("10.0.0.1", "eth0"))):
        assert _with_ack(enc.encode(op, 7)) == enc.encode(op, 7, ack=True)
        assert _with_ack(enc.encode(op, 7)) != enc.encode(op, 7)


def test_counts_and_object_writes_read_without_building_the_ops():
    head = [NhOp(ADD, 1, 4, NextHop("10.0.0.1", "eth0")), NhOp(OpKind.REPLACE, 2, 0, None, ((1, 1),))]
    kops = NhAddRun(head, AddRun(V4, R1, None), 2, None)
    assert kind_counts(kops) == {ADD: 1 + len(V4), OpKind.REPLACE: 1}
    assert kind_counts(AddRun(V4, R1, None)) == {ADD: len(V4)}
    assert object_ops(kops, 1) == head[1:] and object_ops(kops, 5) == []
    assert kops._items is None and kops.run._items is None
    assert kind_counts(list(kops)) == kind_counts(kops)


def planned(table: list) -> tuple:
    """A FIB state and nexthop layer (gate open) that want `table` through R1, planned and expanded."""
    fib = FibState(FibSettings(nexthop_objects="on"))
    nhg = NhLayer(201, fib)
    fib.gate_open = nhg.gate_open = True
    fib.want(dict.fromkeys(table, R1))
    ops = fib.plan()
    return fib, nhg, ops, nhg.expand(ops)


def test_a_table_goes_through_the_lanes_without_one_op_built():
    """plan -> expand -> encode in the writer's slices -> done: the state the general loops
    would leave, and neither run ever built its list."""
    table = [P(f"10.{2 + i // 256}.{i % 256}.0/24") for i in range(3000)]
    fib, nhg, ops, kops = planned(table)
    assert isinstance(ops, AddRun) and isinstance(kops, NhAddRun)
    enc = Encoder(FibSettings(), {"eth0": 2})
    msgs = b"".join(m for i in range(0, len(kops), 1024) for m in enc.encode_batch(kops[i:i + 1024], 1 + i))
    assert [seq for _t, _f, seq, _o, _e in iter_messages(msgs)] == list(range(1, len(kops) + 1))
    assert len(kops) == len(table) + 2  # (a single and a group first)
    record_outcome(fib, nhg, ops, kops, [])
    assert ops._items is None and kops._items is None
    gid = nhg.route_nhid(table[0])
    assert fib.actual == dict.fromkeys(table, R1) and not fib.inflight
    assert {(r.nhid, r.metric) for r in fib.actual.values()} == {(gid, 20)} and nhg.users[gid] == len(table)


def test_a_failed_route_of_a_run_is_matched_to_its_op():
    """An error names a kernel op of the run (built on demand): the nexthop layer and the FIB
    find its route op by identity, the prefix waits for a retry, the others are installed."""
    table = [P(f"10.3.{i}.0/24") for i in range(200)]
    fib, nhg, ops, kops = planned(table)
    bad = kops[len(kops) - 5]
    assert bad.__class__ is NhRouteOp and bad.op is ops[len(ops) - 5]
    record_outcome(fib, nhg, ops, kops, [OpError(bad, errno.ENOBUFS, "x")])
    assert set(fib.failed) == {table[-5]} and len(fib.actual) == len(table) - 1
    assert table[-5] not in fib.actual and all(r.nhid for r in fib.actual.values())
    assert nhg.users == {nhg.route_nhid(table[0]): len(table) - 1}


def test_the_writer_encodes_at_most_AHEAD_batches_ahead_of_the_kernel(monkeypatch):
    """A big run is encoded while the kernel takes the batches before it, but never more than
    `AHEAD` batches ahead (the messages waiting would otherwise be the whole run's, in memory)."""
    import threading
    import time

    from agent.fib import writer as writermod
    from agent.fib.links import LinkIndex
    from agent.fib.types import Link

    w = writermod.NetlinkWriter(FibSettings(), LinkIndex([Link("eth0", 2, True)]), batch=16)
    gate, encoded, sent = threading.Semaphore(0), [], []
    real = w.encoder.encode_batch
    monkeypatch.setattr(w.encoder, "encode_batch", lambda ops, first: encoded.append(first) or real(ops, first))

    def send_batch(first, ops, index, msgs, failures, injected=False):
        gate.acquire()  # the kernel is slow: one batch per release
        sent.append(len(ops))
        assert len(list(iter_messages(b"".join(msgs)))) == len(ops)

    monkeypatch.setattr(w, "_send_batch", send_batch)
    run = AddRun([P(f"10.4.{i // 256}.{i % 256}/32") for i in range(16 * 12)], R1, None)
    result = []
    t = threading.Thread(target=lambda: result.append(w.apply(run)))
    t.start()
    for k in range(12):  # k batches taken by the kernel so far
        deadline = time.monotonic() + 5
        while len(encoded) < min(12, k + 1 + writermod.AHEAD) and time.monotonic() < deadline:
            time.sleep(0.001)  # (polling: the encoder fills up to its bound)
        assert len(encoded) == min(12, k + 1 + writermod.AHEAD), (k, len(encoded))
        gate.release()
    t.join(5)
    assert result == [[]] and sent == [16] * 12 and run._items is None
    w.close()


def test_a_batch_is_one_send_that_fits_the_sockets_buffers():
    """A batch goes in one sendmsg: with the agent's buffers it is `BATCH` messages, and a whole
    batch of the longest common route messages (IPv6, a nexthop id) is below its byte bound, so it
    takes the fast path; with small buffers (no CAP_NET_ADMIN to force them) the batch shrinks to
    fit half the send buffer and its error replies the receive buffer."""
    from agent.fib import writer as writermod
    from agent.fib.links import LinkIndex
    from agent.fib.nlsock import DEFAULT_BUFFER
    from agent.fib.types import Link

    for buffer in (DEFAULT_BUFFER, 96 << 10):
        w = writermod.NetlinkWriter(FibSettings(), LinkIndex([Link("eth0", 2, True)]), buffer=buffer)
        try:
            sndbuf, rcvbuf = w.sock.sndbuf(), w.sock.rcvbuf()
            assert w.batch_bytes == max(16 << 10, min(writermod.BATCH_BYTES, sndbuf // 2))
            assert w.batch * writermod._MSG_BOUND <= w.batch_bytes and w.batch * 1536 <= rcvbuf
            if sndbuf >= 2 * writermod.BATCH_BYTES and rcvbuf >= 1536 * writermod.BATCH:
                assert w.batch == writermod.BATCH  # (the agent's own buffers, forced as root)
            else:
                assert w.batch < writermod.BATCH
            run = NhAddRun([], AddRun([P(f"fd00:{i >> 16:x}:{i & 0xffff:x}::/64") for i in range(w.batch)], R6, None),
                           7, None)
            msgs = w.encoder.encode_batch(OpsSlice(run, 0, w.batch), 1)
            assert len(list(iter_messages(b"".join(msgs)))) == w.batch and sum(map(len, msgs)) < w.batch_bytes
        finally:
            w.close()
