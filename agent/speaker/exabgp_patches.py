"""Patches to ExaBGP 5.0.15, installed by `agent.speaker.launcher` before ExaBGP starts.

DOC: standalone like the launcher (standard library at import, ExaBGP inside `install`, nothing
from `agent`). Each patch replaces or wraps one ExaBGP method; everything else (TCP, OPEN and
capabilities, KEEPALIVEs and the hold timer, NOTIFICATIONs, route refresh, graceful restart, MD5,
sending, the JSON lines for state/open/notification/refresh) stays ExaBGP's.

* Reading, raw UPDATEs and header errors: `agent.speaker.exabgp_reading`.
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
* A reload (SIGUSR1) no longer loses what the API queued for a session: ExaBGP keeps the route
  refreshes, End-of-RIB markers and operational messages waiting to be sent in the peer's
  `Neighbor` object, and a reload gives an established peer the newly parsed one, with empty
  queues. A ``route-refresh`` asked just before a reload (a policy change that also edits a peer)
  was dropped; now the reload moves what is still queued into the new object, ahead of anything
  newer (`Peer.reconfigure`). And a reload that came while some session still had routes to
  send (an export burst) was dropped, not postponed: the reactor cleared the signal, then saw
  the pending adj-RIB-out and went on (`Reactor._pending_adjribout`), so a peer added or released
  then was never configured. That guard protects the re-sending of routes written in the
  configuration file; the agent's configuration has none (its routes come from the API and stay
  in each peer's RIB over a reload), so the reload now happens at once.
"""

from __future__ import annotations

import time

NOTIFY_TIMEOUT = 5.0  # seconds the notify command waits for its NOTIFICATION to be written
WAIT = object()  # yielded by an API command that waits: the API loop ends its turn


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


def _sibling(name: str):
    """Module `name` from this file's directory (the launcher loads this file by path too)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"route_agent_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def install(raw_updates: bool = False, unpaced: bool = False, async_limit: int = 0,
            async_budget: float = 0.01) -> None:
    """Install every patch (raw UPDATEs and the unpaced API loop only when asked)."""
    _patch_logging()
    _sibling("exabgp_reading").install(raw_updates)
    _patch_notify()
    _patch_api_loop(unpaced, async_limit, async_budget)
    _patch_next_hop_self()
    _patch_reload()


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


# ---- reload ------------------------------------------------------------------------------------

QUEUED = ("refresh", "eor", "messages")  # a Neighbor's deques of what the API asked to send


def _patch_reload() -> None:
    from exabgp.reactor.loop import Reactor
    from exabgp.reactor.peer import Peer

    Reactor._pending_adjribout = lambda self: False  # (it only ever dropped the reload)

    reconfigure = Peer.reconfigure

    def keeping_queued(self, restart_neighbor=None):
        old = self.neighbor
        if restart_neighbor is not None and old is not None and old is not restart_neighbor:
            for name in QUEUED:
                queued = getattr(old, name)
                if queued:
                    getattr(restart_neighbor, name).extendleft(reversed(queued))
                    queued.clear()
        return reconfigure(self, restart_neighbor)

    Peer.reconfigure = keeping_queued


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
