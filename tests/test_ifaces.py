"""Links and interface addresses decoded by hand (`agent.fib.ifaces`), cross-checked against
pyroute2's message classes on messages pyroute2 builds; truncated or nameless messages give None."""

from __future__ import annotations

import pytest
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from agent.fib import ifaces
from agent.fib.types import Link

HDR = ifaces.NLMSG_HDRLEN


def link_msg(name, index, flags, extra=()) -> bytes:
    m = ifinfmsg()
    m["index"] = index
    m["flags"] = flags
    m["attrs"] = [("IFLA_MTU", 1500), *extra, *([("IFLA_IFNAME", name)] if name else [])]
    m.encode()
    return bytes(m.data)


def addr_msg(family, address, prefixlen, scope, local=None) -> bytes:
    m = ifaddrmsg()
    m["family"] = family
    m["prefixlen"] = prefixlen
    m["scope"] = scope
    m["index"] = 7
    attrs = [("IFA_ADDRESS", address)] if address else []
    if local:
        attrs.append(("IFA_LOCAL", local))
    m["attrs"] = [*attrs, ("IFA_LABEL", "eth0")] if family == 2 else attrs
    m.encode()
    return bytes(m.data)


def theirs_link(data: bytes):
    m = ifinfmsg(data)
    m.decode()
    name = m.get("IFLA_IFNAME")
    return Link(name, m["index"], bool(m["flags"] & 1)) if name else None


def theirs_addr(data: bytes):
    m = ifaddrmsg(data)
    m.decode()
    address = m.get("IFA_LOCAL") or m.get("IFA_ADDRESS")
    return (address, m["prefixlen"], m["scope"]) if address else None


@pytest.mark.parametrize("name,index,flags", [
    ("eth0", 3, 0x1043), ("veth-node-peer0", 1234567, 0x1002), ("lo", 1, 0x49), ("é0", 9, 0x1003)])
def test_links_as_pyroute2_decodes_them(name, index, flags):
    data = link_msg(name, index, flags, extra=[("IFLA_TXQLEN", 1000)])
    ours = ifaces.decode_link(data, HDR, len(data))
    assert ours == theirs_link(data) == Link(name, index, bool(flags & 1))


@pytest.mark.parametrize("family,address,prefixlen,scope,local,want", [
    (2, "192.0.2.10", 24, 0, None, "192.0.2.10"),
    (2, "192.0.2.255", 32, 0, "10.0.0.1", "10.0.0.1"),  # point-to-point: IFA_LOCAL is ours
    (10, "2001:db8::1", 64, 0, None, "2001:db8::1"),
    (10, "fe80::1:2", 64, 253, None, "fe80::1:2"),
])
def test_addresses_as_pyroute2_decodes_them(family, address, prefixlen, scope, local, want):
    data = addr_msg(family, address, prefixlen, scope, local)
    ours = ifaces.decode_address(data, HDR, len(data))
    assert ours == theirs_addr(data) == (want, prefixlen, scope)


def test_nameless_addressless_and_truncated_messages_are_none():
    assert ifaces.decode_link(link_msg(None, 3, 1), HDR, len(link_msg(None, 3, 1))) is None
    data = addr_msg(2, None, 24, 0)
    assert ifaces.decode_address(data, HDR, len(data)) is None
    full = link_msg("eth0", 3, 1)
    for cut in (HDR + 4, HDR + 16, len(full) - 4):  # (the last 3 octets are padding)
        assert ifaces.decode_link(full[:cut], HDR, cut) is None
    full = addr_msg(2, "192.0.2.1", 24, 0)
    for cut in (HDR + 4, HDR + 8 + 6):  # (inside the header; inside IFA_ADDRESS)
        assert ifaces.decode_address(full[:cut], HDR, cut) is None


def test_the_agent_does_not_import_pyroute2():
    import subprocess
    import sys
    code = "import sys, agent.daemon.agent; print('pyroute2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
