"""FIB netlink plumbing without a namespace: one owner per socket, deadlines on every read,
link snapshots the writer can hold while the loop reloads the links.

These open NETLINK_ROUTE sockets in the current namespace (no privilege needed) but never send
anything except link dump requests."""

import errno
import socket
import time

import pytest

from agent.fib.codec import RTM_GETLINK
from agent.fib.encoder import Encoder, UnknownDevice, encode_dump_request
from agent.fib.links import LinkIndex
from agent.fib.netlink import NetlinkFib
from agent.fib.nlsock import NlSocket, SocketBusy, dump
from agent.fib.types import FibSettings, Link, LinkEvent, Op, OpKind
from agent.core.model import KernelRoute, NextHop, RouteType, nexthops
from tests.factories import P

A = P("10.1.0.0/24")
VIA_ETH0 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")), 20)


def test_writer_and_scanner_have_a_socket_each():
    with NetlinkFib(FibSettings(), LinkIndex()) as fib:
        assert fib.writer.sock is not fib.scanner.sock
        assert fib.writer.sock.fileno() != fib.scanner.sock.fileno()


def test_a_second_concurrent_user_of_a_socket_is_refused_not_queued():
    sock = NlSocket("scan")
    try:
        with sock.owned():
            with pytest.raises(SocketBusy):
                with sock.owned():
                    pass
        with sock.owned():  # released again
            pass
    finally:
        sock.close()


def test_a_reply_that_never_comes_is_a_timeout_not_a_hang():
    sock = NlSocket("scan", timeout=0.2)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError) as exc:
            with sock.owned():
                sock.recv()
        assert exc.value.errno == errno.ETIMEDOUT
        assert time.monotonic() - t0 < 5 and sock.timeouts == 1
    finally:
        sock.close()


def test_a_dump_whose_replies_went_elsewhere_times_out_and_the_socket_is_replaced():
    """The shared-socket failure: the dump's replies carry a sequence number it does not wait
    for (in the agent: taken by the other reader), so it must give up, not block forever."""
    sock = NlSocket("scan", timeout=0.3)
    try:
        old_fd = sock.sock
        request = encode_dump_request(RTM_GETLINK, socket.AF_UNSPEC, 1000)
        with pytest.raises(TimeoutError):
            with sock.owned():
                dump(sock, request, 1001, lambda *a: None)  # waits for seq 1001, replies are 1000
        assert sock.sock is not old_fd and sock.reopened == 1
        seen = []
        with sock.owned():  # the fresh socket works
            assert dump(sock, encode_dump_request(RTM_GETLINK, socket.AF_UNSPEC, 7), 7,
                        lambda mtype, buf, off, end: seen.append(mtype))
        assert seen  # at least lo
    finally:
        sock.close()


def test_link_snapshot_held_by_the_writer_survives_a_reload_on_the_loop():
    """The writer resolves devices with the snapshot it took; a reload running meanwhile (on
    the loop thread: here, in the middle of `load`) neither empties nor changes that map."""
    links = LinkIndex([Link("eth0", 2, True), Link("eth1", 3, True)])
    held = links.snapshot
    encoder = Encoder(FibSettings(), held.index_of)
    encoded = []

    def reloaded_links():
        yield Link("eth1", 3, True)
        encoded.append(encoder.encode(Op(OpKind.REPLACE, A, VIA_ETH0), 1))  # the writer, mid-load
        yield Link("eth0", 7, True)  # eth0 re-created with another ifindex

    links.load(reloaded_links())
    assert len(encoded) == 1
    assert dict(held.index_of) == {"eth0": 2, "eth1": 3}  # the held snapshot never changed
    assert links.index("eth0") == 7 and links.snapshot is not held
    with pytest.raises(TypeError):
        held.index_of["eth0"] = 9  # read-only


def test_link_event_publishes_a_new_snapshot_and_leaves_the_old_one_alone():
    links = LinkIndex([Link("v1", 3, True)])
    held = links.snapshot
    links.apply(LinkEvent(False, Link("uplink1", 3, True)))  # renamed
    assert links.index("uplink1") == 3 and links.index("v1") is None
    assert dict(held.index_of) == {"v1": 3}
    assert links.generation != held.generation
    links.apply(LinkEvent(True, Link("uplink1", 3, True)))
    assert links.links() == [] and not links.is_up("uplink1")
    encoder = Encoder(FibSettings(), links.snapshot.index_of)
    with pytest.raises(UnknownDevice):
        encoder.encode(Op(OpKind.REPLACE, A, VIA_ETH0), 1)
