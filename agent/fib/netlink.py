"""Thin I/O adapter between the FIB logic and the kernel: the one object the agent holds.

DOC: everything below this module is socket plumbing; the bytes are made and parsed by
`agent.fib.codec`. The adapter is split by socket, one owner per socket (`agent.fib.nlsock`):

* `agent.fib.writer.NetlinkWriter`: batched route writes on the **request** socket, called
  from the agent's writer thread;
* `agent.fib.scanner.NetlinkScanner`: link and route dumps on the **scan** socket, called from
  the event loop (start-up and full scans) while a batch may be in flight;
* `agent.fib.monitor.RouteMonitor`: notifications on the **monitor** socket, event loop;
* `agent.fib.links.LinkIndex`: owned by the event loop (link dumps and link events), read by the
  writer through immutable snapshots.

`NetlinkFib` bundles one writer and one scanner for one FibSettings: `apply()` goes to the
writer, `dump()`/`links_dump()` to the scanner, so the agent's writer thread and its loop never
share a socket. Every blocking read has a deadline; a timeout is raised (TimeoutError) to the
caller, never waited out.
"""

from __future__ import annotations

from .links import LinkIndex, LinkSnapshot
from .monitor import RouteMonitor, attach_drop_own_additions
from .nhkeys import nh_deletes
from .nlsock import DEFAULT_BUFFER, NlSocket, ScanInterrupted, SocketBusy, open_socket
from .scanner import NetlinkScanner, dump_addresses, dump_links
from .types import Dump, FibSettings, Link, Op, OpError, OpKind
from .writer import BATCH, NetlinkWriter

__all__ = [
    "BATCH", "DEFAULT_BUFFER", "LinkIndex", "LinkSnapshot", "NetlinkFib", "NetlinkScanner",
    "NetlinkWriter", "NlSocket", "RouteMonitor", "ScanInterrupted", "SocketBusy", "attach_drop_own_additions",
    "dump_addresses", "dump_links", "flush_ours", "open_socket",
]


class NetlinkFib:
    """Route writes (request socket) and dumps (scan socket) for one FibSettings."""

    def __init__(self, settings: FibSettings, links: LinkIndex, batch: int = BATCH,
                 buffer: int = DEFAULT_BUFFER):
        self.settings = settings
        self.links = links
        self.writer = NetlinkWriter(settings, links, batch=batch, buffer=buffer)
        try:
            self.scanner = NetlinkScanner(settings, links, buffer=buffer)
        except BaseException:
            self.writer.close()
            raise

    def close(self) -> None:
        self.writer.close()
        self.scanner.close()

    def __enter__(self) -> "NetlinkFib":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- writes: the writer thread ----
    def apply(self, ops) -> list[OpError]:
        """Send every op, batched; return the failures only, in the order of `ops`."""
        return self.writer.apply(ops)

    def inject(self, kops) -> bool:
        """Urgent ops for the `apply()` under way (any thread; `NetlinkWriter.inject`)."""
        return self.writer.inject(kops)

    def take_injected(self) -> list:
        return self.writer.take_injected()

    @property
    def batch(self) -> int:
        return self.writer.batch

    @property
    def ops_sent(self) -> int:
        return self.writer.ops_sent

    @property
    def errors(self) -> int:
        return self.writer.errors

    @property
    def replies_lost(self) -> int:
        return self.writer.replies_lost

    # ---- reads: the event loop ----
    def links_dump(self) -> list[Link]:
        return self.scanner.links_dump()

    def dump(self, interrupt=None) -> Dump:
        """Every route of the configured table: ours by prefix (`extra`: more of ours on one
        prefix) and the foreign ones; `interrupt`: see `NetlinkScanner.dump`."""
        return self.scanner.dump(interrupt)


def flush_ours(settings: FibSettings, links: LinkIndex | None = None) -> list[OpError]:
    """Delete every route of our protocol in the configured table (for --flush-on-exit)."""
    links = links or LinkIndex.from_kernel()
    with NetlinkFib(settings, links) as fib:
        dump = fib.dump()
        ops = [Op(OpKind.DELETE, prefix, route) for prefix, route in dump.ours.items()]
        ops += [Op(OpKind.DELETE, prefix, route) for prefix, routes in dump.extra.items() for route in routes]
        ops += nh_deletes(dump.nexthops or {}, settings.protocol)  # with nexthop objects on
        return fib.apply(ops)
