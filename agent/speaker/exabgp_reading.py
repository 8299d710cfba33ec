"""ExaBGP 5.0.15's receive path, patched (installed by `agent.speaker.exabgp_patches`).

DOC: standalone like the launcher (standard library at import, ExaBGP inside `install`, nothing
from `agent`); the pure parts (`caps_flags`, `raw_prefix`, `split_frame`) are tested directly.

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
"""

from __future__ import annotations

import time

BATCH_MESSAGES = 256  # UPDATEs handled before the session's loop gets a turn
BATCH_SECONDS = 0.005  # ... or this long
READ_CHUNK = 65536
HEADER = 19
MARKER = b"\xff" * 16

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


def install(raw: bool) -> None:
    """Patch `Connection.next_message` (new) and `Protocol.read_message`."""
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
