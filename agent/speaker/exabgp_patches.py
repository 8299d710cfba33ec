"""Patches to ExaBGP 5.0.15, installed by `agent.speaker.launcher` before ExaBGP starts.

DOC: standalone like the launcher (standard library at import, ExaBGP inside `install`, nothing
from `agent`). Each patch replaces or wraps one ExaBGP method; everything else (TCP, OPEN and
capabilities, KEEPALIVEs and the hold timer, NOTIFICATIONs, route refresh, graceful restart, MD5,
sending, the JSON lines for state/open/notification/refresh) stays ExaBGP's.

* Reading (`Connection.next_message`, `Protocol.read_message`): ExaBGP read a message with two
  ``recv`` calls and a ``poll``, then gave the reactor a full loop turn per message (every peer,
  the API pipes, an ``accept()`` per listening socket, debug-log lambdas). Now a connection reads
  up to 64 KiB at a time into its own buffer and splits messages out of it (`split_frame`, pure),
  and UPDATEs are handled in batches (up to `BATCH_MESSAGES` or `BATCH_SECONDS`) before the
  session's loop yields once, as if one UPDATE had arrived (the hold timer counts it). Other
  messages are handled one at a time as before. With ``adj-rib-in false`` ExaBGP never kept
  anything per received route, so the batching changes no state.
* Raw UPDATEs (``raw=True``): an UPDATE is not decoded at all: one line ``raw-update PEER CAPS
  HEX`` (`raw_prefix`, `caps_flags`; HEX is the body after the 19-octet header) is written to the
  API processes that receive updates, on the same ordered pipe as the JSON lines (the state
  ``up`` is written before the session reads its first UPDATE, ``down`` after its last; the lines
  of a batch are written in one go before anything else). ExaBGP keeps nothing per route. An
  UPDATE before the session is established is an FSM error (NOTIFICATION 5/1 or 5/2).
* Header errors: ExaBGP 5.0.15 detected a bad marker, a bad length and an unknown type, but with
  ``receive { notification; }`` in the API its report to the API process failed (a call with the
  wrong arguments) and the session was closed without a NOTIFICATION. Now they are NOTIFICATION
  1/1, 1/2 (data: the length field), 1/3 (data: the type), then close; the API sees the usual
  ``down`` with ``notification sent (1,2)``.
* ``neighbor PEER notify CODE SUBCODE [HEXDATA]`` (an API command, `parse_notify`): the
  NOTIFICATION goes to each matching established session, which is then closed (ExaBGP reconnects
  after its back-off, as after any error). Answered in order with the other API commands, once
  the NOTIFICATION is written (``done``) or the session is gone or 5 s passed (``error``); no
  matching established session is ``error``.
* ``teardown N`` on an established session always sends Cease 6/N: ExaBGP 5.0.15 closed silently
  when graceful restart was negotiated, which a peer takes for a restart (and keeps our routes).
  What looks like a graceful restart is now only a crash, a SIGKILL or SIGTERM of ExaBGP.
* Announcing (`Neighbor.remove_self`): every route injected from the API was deep-copied
  (``copy.deepcopy`` of its NLRI and all its attributes: ~60 objects, ~0.4 ms a prefix, most of
  the export time) before "next-hop self" was resolved. Now the NLRI is copied shallowly and the
  attributes are shared; when the NEXT_HOP attribute must change, one copy of the attributes per
  command and neighbour carries the resolved address (nothing mutates a route's attributes
  once it is in the adj-RIB-out; a withdrawal from it is deep-copied as before). A route's
  ``family()`` is one shared (afi, safi) object instead of a new one per call (~6 a route).
* Logging: when the level is not DEBUG, ``log.debug`` is a no-op (the message lambdas were
  still built and checked on every message); when the API's INFO lines are off, the text of
  each announced route (``Change.extensive``, built for "route added to ..." whether logged or
  not) is not built.
* The API loop (`ASYNC.run`): commands are generators run step by step. ExaBGP ran them through
  ``asyncio.run`` (a new event loop per reactor turn), at most 50 steps per turn, and then slept
  ``reactor.speed/100`` s even with commands queued: ~50 prefixes per 10 ms. Now the steps run
  plainly; ``unpaced=True`` runs them for up to `async_budget` seconds per turn (or `async_limit`
  steps) and the reactor does not sleep while commands are queued, so sessions still get a turn
  (KEEPALIVEs, received messages) every budget.
"""

from __future__ import annotations

import time

BATCH_MESSAGES = 256  # UPDATEs handled before the session's loop gets a turn
BATCH_SECONDS = 0.005  # ... or this long
READ_CHUNK = 65536
NOTIFY_TIMEOUT = 5.0  # seconds the notify command waits for its NOTIFICATION to be written
HEADER = 19
MARKER = b"\xff" * 16
WAIT = object()  # yielded by an API command that waits: the API loop ends its turn

CAP_ASN4, CAP_ADDPATH_V4, CAP_ADDPATH_V6, CAP_EXTENDED = 1, 2, 4, 8


def caps_flags(asn4: bool, addpath_v4: bool, addpath_v6: bool, extended: bool) -> int:
    """The decimal <caps> of a raw-update line: 1 4-octet AS, 2 ADD-PATH receive IPv4 unicast,
    4 ADD-PATH receive IPv6 unicast, 8 extended messages (a fixed contract with the agent)."""
    return ((CAP_ASN4 if asn4 else 0) | (CAP_ADDPATH_V4 if addpath_v4 else 0)
            | (CAP_ADDPATH_V6 if addpath_v6 else 0) | (CAP_EXTENDED if extended else 0))


def raw_prefix(peer: str, caps: int) -> str:
    """``raw-update PEER CAPS ``: a raw-update line is this, then the UPDATE body's ``hex()``."""
    return f"raw-update {peer} {caps} "


def split_frame(buf: bytes, pos: int, max_size: int, valid_length=None):
    """The message starting at `buf[pos]`: None when more bytes are needed, else
    ``(end, msg_type, length, error)`` where `error` is None or ``(code, subcode, data)`` of the
    NOTIFICATION to send (RFC 4271 6.1: 1/1 bad marker, 1/2 bad length with the length field as
    data). `valid_length` maps a type to a check of its length (ExaBGP's ``Message.Length``)."""
    if len(buf) - pos < HEADER:
        return None
    if buf[pos:pos + 16] != MARKER:
        return pos + HEADER, 0, 0, (1, 1, b"")
    length = int.from_bytes(buf[pos + 16:pos + 18], "big")
    msg_type = buf[pos + 18]
    check = valid_length.get(msg_type) if valid_length else None
    if length < HEADER or length > max_size or (check is not None and not check(length)):
        return pos + HEADER, msg_type, length, (1, 2, buf[pos + 16:pos + 18])
    if len(buf) - pos < length:
        return None
    return pos + length, msg_type, length, None


def parse_notify(command: str) -> tuple[int, int, bytes]:
    """``notify CODE SUBCODE [HEXDATA]`` -> (code, subcode, data); raises ValueError."""
    words = command.split()
    if len(words) not in (3, 4) or words[0] != "notify":
        raise ValueError("expected: notify CODE SUBCODE [HEXDATA]")
    if not (words[1].isdigit() and words[2].isdigit()):
        raise ValueError("CODE and SUBCODE are decimal numbers")
    code, subcode = int(words[1]), int(words[2])
    if not 1 <= code <= 255 or not 0 <= subcode <= 255:
        raise ValueError("CODE is 1-255, SUBCODE 0-255")
    data = bytes.fromhex(words[3]) if len(words) == 4 else b""
    if len(data) > 4096 - 21:
        raise ValueError("HEXDATA longer than a NOTIFICATION can carry")
    return code, subcode, data


def install(raw_updates: bool = False, unpaced: bool = False, async_limit: int = 0,
            async_budget: float = 0.01) -> None:
    """Install every patch (raw UPDATEs and the unpaced API loop only when asked)."""
    _patch_logging()
    _patch_reading(raw_updates)
    _patch_notify()
    _patch_api_loop(unpaced, async_limit, async_budget)
    _patch_next_hop_self()


# ---- logging ---------------------------------------------------------------------------------

def _patch_logging() -> None:
    from exabgp.logger import log
    from exabgp.logger.option import option
    from exabgp.rib.change import Change

    debug = log.__dict__.get("debug") or log.debug
    load = option.load.__func__
    extensive = Change.extensive

    def noop(*_args, **_kwargs):
        return None

    def patched_load(cls, env):
        load(cls, env)
        log.debug = debug if cls.logit.get("DEBUG") else staticmethod(noop)
        # a route's text is only ever built for the "route added/removed" INFO lines of the API
        Change.extensive = extensive if cls.log_enabled("processes", "INFO") else (lambda self: "")

    Change.__repr__ = extensive

    option.load = classmethod(patched_load)


# ---- reading -----------------------------------------------------------------------------------

def _patch_reading(raw: bool) -> None:
    from exabgp.bgp.fsm import FSM
    from exabgp.bgp.message import Message, Notification, Notify, Update
    from exabgp.bgp.message.action import Action
    from exabgp.bgp.message.direction import Direction
    from exabgp.bgp.message.open.capability.extended import ExtendedMessage
    from exabgp.bgp.message.update.attribute import Attribute
    from exabgp.logger import log
    from exabgp.protocol.family import AFI, SAFI
    from exabgp.reactor import protocol
    from exabgp.reactor.network.connection import Connection
    from exabgp.reactor.network.error import LostConnection, NotConnected, TooSlowError, error

    UPDATE, MESSAGES, LENGTHS = Message.CODE.UPDATE, Message.CODE.MESSAGES, Message.Length
    _UPDATE, _NOP = protocol._UPDATE, protocol._NOP
    WITHDRAW_ATTR, DISCARD_ATTR = Attribute.CODE.INTERNAL_TREAT_AS_WITHDRAW, Attribute.CODE.INTERNAL_DISCARD

    def next_message(self):
        """One message from the buffer, reading the socket when needed: ``(length, type, header,
        body, notify)``, or None when no whole message is there yet. Raises NetworkError."""
        buf, pos = self.__dict__.get("_agent_buf", b""), self.__dict__.get("_agent_pos", 0)
        while True:
            frame = split_frame(buf, pos, self.msg_size, LENGTHS)
            if frame is not None:
                end, msg_type, length, err = frame
                header, body = buf[pos:pos + HEADER], buf[pos + HEADER:end]
                self._agent_buf, self._agent_pos = buf, end
                notify = Notify(*err) if err else None
                return length, msg_type, header, (b"" if err else body), notify
            if not self.io:
                self.close()
                raise NotConnected("Trying to read on a closed TCP connection")
            try:
                data = self.io.recv(READ_CHUNK)
            except TimeoutError as exc:
                self.close()
                raise TooSlowError(f"Timeout while reading data from the network ({exc})") from None
            except OSError as exc:
                if exc.args[0] in error.block:
                    self._agent_buf, self._agent_pos = buf, pos
                    return None
                self.close()
                raise LostConnection(f"issue reading on the socket: {exc}") from None
            if not data:
                self.close()
                log.warning(lambda: f"{self.name()} {self.peer} lost TCP session with peer", self.session())
                raise LostConnection("the TCP connection was closed by the remote end")
            buf, pos = buf[pos:] + data, 0

    def decode(self, msg_id, header, body):
        """ExaBGP's handling of one message (statistics, API, decoding), as in 5.0.15: the
        message to hand to the session (None: an UPDATE nobody needs decoded)."""
        api, processes = self.neighbor.api, self.peer.reactor.processes
        code = "receive-" + Message.CODE.short(msg_id)
        self.peer.stats[code] += 1
        for_api = api.get(code, False)
        packets, consolidate, parsed = api["receive-packets"], api["receive-consolidate"], api["receive-parsed"]
        negotiated = self.negotiated if api.get("negotiated", False) else None
        if for_api and packets and not consolidate:
            processes.packets(self.peer.neighbor, "receive", msg_id, negotiated, header, body)
        if msg_id == UPDATE and not self.neighbor["adj-rib-in"] and not (for_api or self.log_routes) \
                and not (parsed or consolidate):
            return None
        try:
            message = Message.unpack(msg_id, body, Direction.IN, self.negotiated)
        except (KeyboardInterrupt, SystemExit, Notify):
            raise
        except Exception:
            raise Notify(1, 0, 'can not decode update message of type "%d"' % msg_id) from None
        if message.TYPE == Update.TYPE and WITHDRAW_ATTR in message.attributes:
            for nlri in message.nlris:
                nlri.action = Action.WITHDRAW
        if for_api:
            if consolidate:
                processes.message(msg_id, self.neighbor, "receive", message, negotiated, header, body)
            elif parsed:
                processes.message(msg_id, self.neighbor, "receive", message, negotiated, b"", b"")
        if message.TYPE == Notification.TYPE:
            raise message
        if message.TYPE == Update.TYPE and DISCARD_ATTR in message.attributes:
            return _NOP
        return message

    def raw_line_prefix(self):
        prefix = self.__dict__.get("_agent_raw_prefix")
        if prefix is None:
            neg = self.negotiated
            caps = caps_flags(bool(neg.asn4), bool(neg.addpath.receive(AFI.ipv4, SAFI.unicast)),
                              bool(neg.addpath.receive(AFI.ipv6, SAFI.unicast)),
                              neg.msg_size == ExtendedMessage.EXTENDED_SIZE)
            prefix = self._agent_raw_prefix = raw_prefix(str(self.neighbor["peer-address"]), caps)
        return prefix

    def read_message(self):
        peer, connection = self.peer, self.connection
        processes = peer.reactor.processes
        batchable = raw or not self.neighbor["adj-rib-in"]
        lines: list[str] = []
        batch, started = 0, 0.0

        def flush():
            nonlocal batch
            if lines and not processes.silence:
                text = "\n".join(lines)
                for process in self.neighbor.api["receive-update"]:
                    processes.write(process, text, self.neighbor)
            lines.clear()
            if raw and batch:
                peer.stats["receive-update"] += batch
            batch = 0

        while True:
            pending = peer.__dict__.get("_agent_notify")
            if pending is not None and pending[1] is self:
                peer._agent_notify = None
                flush()
                raise pending[0]
            try:
                frame = connection.next_message()
            except BaseException:
                flush()
                raise
            if frame is None:
                if batch:
                    flush()
                    yield _UPDATE
                    return
                yield _NOP
                continue
            _length, msg_id, header, body, notify = frame
            if notify is not None:
                flush()
                raise notify
            if msg_id not in MESSAGES:
                flush()
                raise Notify(1, 3, bytes([msg_id]))  # RFC 4271 6.1: the data is the bad type
            if msg_id == UPDATE and batchable:
                if raw:
                    if peer.fsm != FSM.ESTABLISHED:
                        flush()
                        raise Notify(5, 1 if peer.fsm == FSM.OPENSENT else 2, "UPDATE before the session is established")
                    lines.append(raw_line_prefix(self) + body.hex())
                else:
                    decode(self, msg_id, header, body)
                batch += 1
                if batch == 1:
                    started = time.monotonic()
                elif batch >= BATCH_MESSAGES or time.monotonic() - started > BATCH_SECONDS:
                    flush()
                    yield _UPDATE
                    return
                continue
            if batch:  # the session accounts for the UPDATEs before this message first
                flush()
                yield _UPDATE
            message = decode(self, msg_id, header, body)
            yield _UPDATE if message is None else message
            return

    Connection.next_message = next_message
    protocol.Protocol.read_message = read_message


# ---- notify and teardown -----------------------------------------------------------------------

def _patch_notify() -> None:
    from exabgp.bgp.fsm import FSM
    from exabgp.bgp.message import Notify
    from exabgp.logger import log
    from exabgp.reactor.api.command.command import Command
    from exabgp.reactor.api.command.limit import extract_neighbors, match_neighbor
    from exabgp.reactor.peer import Peer
    from exabgp.reactor.protocol import Protocol

    new_notification, teardown = Protocol.new_notification, Peer.teardown

    def sending_notification(self, notification):
        for item in new_notification(self, notification):
            if item is notification:  # written
                notification._agent_sent = True
            yield item

    def explicit_teardown(self, code, restart=True):
        if restart and self.fsm == FSM.ESTABLISHED and self.proto is not None:
            self._agent_notify = (Notify(6, code), self.proto)  # read_message raises it
            self._delay.reset()
            return None
        return teardown(self, code, restart)

    def notify(self, reactor, service, line, use_json):
        def callback():
            try:
                descriptions, command = extract_neighbors(line)
                code, subcode, data = parse_notify(command)
            except ValueError as exc:
                log.error(lambda exc=exc: f"notify: {exc}: {line}", "api")
                reactor.processes.answer_error(service)
                return
            sent = []
            for key in reactor.established_peers():
                peer = reactor._peers.get(key)
                if descriptions and peer is not None and peer.proto is not None \
                        and any(match_neighbor(d, key) for d in descriptions):
                    note = Notify(code, subcode, data)
                    peer._agent_notify = (note, peer.proto)
                    sent.append((peer, note, peer.proto))
            deadline = time.monotonic() + NOTIFY_TIMEOUT
            while any(not getattr(n, "_agent_sent", False) and p.proto is proto
                      for p, n, proto in sent) and time.monotonic() < deadline:
                yield WAIT
            ok = bool(sent)
            for peer, note, proto in sent:
                ok &= getattr(note, "_agent_sent", False)
                if (peer.__dict__.get("_agent_notify") or (None,))[0] is note:
                    peer._agent_notify = None  # not sent: never on a later session
            (reactor.processes.answer_done if ok else reactor.processes.answer_error)(service)

        reactor.asynchronous.schedule(service, line, callback())
        return True

    Protocol.new_notification = sending_notification
    Peer.teardown = explicit_teardown
    Command.register("notify", True)(notify)


# ---- next-hop self -----------------------------------------------------------------------------

def _patch_next_hop_self() -> None:
    import copy

    from exabgp.bgp.message.update.attribute import Attribute, NextHop
    from exabgp.bgp.neighbor import Neighbor
    from exabgp.protocol.family import Family
    from exabgp.rib.change import Change

    NEXT_HOP = Attribute.CODE.NEXT_HOP
    families: dict = {}

    def family(self):  # one Family object per (afi, safi), not a new one on each of ~6 calls a route
        key = (self.afi, self.safi)
        found = families.get(key)
        if found is None:
            found = families[key] = Family(self.afi, self.safi)
        return found

    Family.family = family

    def remove_self(self, changes):
        nlri = object.__new__(changes.nlri.__class__)  # copy.copy, without __reduce_ex__
        nlri.__dict__.update(changes.nlri.__dict__)
        attributes = changes.attributes
        if not nlri.nexthop.SELF:
            return Change(nlri, attributes)
        own = self.ip_self(nlri.afi)
        nlri.nexthop = own
        if NEXT_HOP in attributes:
            last = self.__dict__.get("_agent_self_attributes")  # the previous prefix's, often the same
            if last is None or last[0] is not attributes or last[1] is not own:
                resolved = copy.copy(attributes)
                resolved._str = resolved._idx = resolved._json = ""
                resolved._dict = {}
                resolved[NEXT_HOP] = NextHop(str(own), own.pack())
                last = self._agent_self_attributes = (attributes, own, resolved)
            attributes = last[2]
        return Change(nlri, attributes)

    Neighbor.remove_self = remove_self


# ---- the API loop ------------------------------------------------------------------------------

def _patch_api_loop(unpaced: bool, limit: int, budget: float) -> None:
    from inspect import isgenerator

    from exabgp.logger import log
    from exabgp.reactor.asynchronous import ASYNC
    from exabgp.reactor.loop import Reactor

    run_async = ASYNC.run
    steps_max = (limit or 1 << 62) if unpaced else ASYNC.LIMIT
    seconds = budget if unpaced and not limit else float("inf")

    def run(self):
        queue = self._async
        if not queue:
            return False
        deadline = time.monotonic() + seconds
        steps = 0
        while queue:
            uid, callback = queue[0]
            if not isgenerator(callback):
                return run_async(self)  # (no command of 5.0.15 is a coroutine)
            try:
                if next(callback) is WAIT:
                    break
            except StopIteration:
                queue.popleft()
            except Exception as exc:
                log.error(lambda uid=uid, exc=exc: f"async | {uid} | problem with function: {exc}", "reactor")
                if queue and queue[0][1] is callback:
                    queue.popleft()
                self._notify_error(uid)
            steps += 1
            if steps >= steps_max or time.monotonic() > deadline:
                break
        return bool(queue)

    ASYNC.run = run
    if unpaced:
        wait_for_io = Reactor._wait_for_io

        def no_sleep_while_queued(self, sleeptime):
            return wait_for_io(self, 0 if self.asynchronous._async else sleeptime)

        Reactor._wait_for_io = no_sleep_while_queued
