"""The node's own interface addresses (for the import guard), read from the kernel.

DOC: an RTM_GETADDR dump through the netlink adapter: every address of every interface except
host-scope ones (loopback), as ``address/prefixlen`` text. The agent refreshes it at start and on
every full scan, so new addresses reach the guard within `fullScanSeconds`.
"""

from __future__ import annotations

from ..fib.netlink import dump_addresses

RT_SCOPE_HOST = 254


def node_addresses() -> list[str]:
    return sorted({f"{addr}/{plen}" for addr, plen, scope in dump_addresses() if scope != RT_SCOPE_HOST})
