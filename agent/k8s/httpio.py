"""What the reflector needs of the official client's HTTP layer (urllib3 responses, ApiException).

DOC: the reflector (`agent.k8s.reflector`) reads watch responses itself; this module holds the
small, stateless pieces that know urllib3 and the client: its signals (`Gone` for 410, `NotFound`
for 404, `Stalled` for a silent watch, `WatchError` for other ERROR events), mapping an
ApiException to them (`raise_status`), recognising a read timeout (`timed_out`), changing the
read timeout of an open response (`set_read_timeout`: the stall bound learned from bookmarks
applies to the stream already open), unblocking a read (`abort`: shut the socket down) and a
one-line error text (`short`).
"""

from __future__ import annotations

import socket

from urllib3.exceptions import MaxRetryError, ReadTimeoutError


class Gone(Exception):
    """The resourceVersion is too old (410): relist."""


class NotFound(Exception):
    """The resource is not served (404)."""


class Stalled(Exception):
    """The watch sent nothing (no event, no bookmark) for longer than the stall bound."""


class WatchError(Exception):
    """An ERROR event other than 410 in a watch stream."""

    def __init__(self, code, reason, message) -> None:
        super().__init__(f"watch ERROR {code} {reason}: {message}")
        self.code = code


def raise_status(e: Exception) -> None:
    """Map the client's ApiException for 410 and 404 to the reflector's own signals."""
    status = getattr(e, "status", None)
    if status == 410:
        raise Gone() from e
    if status == 404:
        raise NotFound() from e


def timed_out(e: BaseException) -> bool:
    """A read timeout, raised as is or after the client's retries."""
    return isinstance(e, ReadTimeoutError) or (
        isinstance(e, MaxRetryError) and isinstance(e.reason, ReadTimeoutError))


def _sock(resp):
    return getattr(getattr(resp, "connection", None), "sock", None)


def set_read_timeout(resp, seconds: float) -> None:
    """The read timeout of the open response's socket (every later read waits at most this)."""
    sock = _sock(resp)
    if sock is not None:
        try:
            sock.settimeout(seconds)
        except OSError:
            pass


def abort(resp) -> None:
    """Unblock a thread reading `resp` (a urllib3 response) by shutting its socket down."""
    sock = _sock(resp)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def short(e: Exception) -> str:
    status = getattr(e, "status", None)
    if status is not None and getattr(e, "reason", None):
        return f"HTTP {status} {e.reason}"
    return str(e).splitlines()[0][:200] if str(e) else ""
