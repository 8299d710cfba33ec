"""The ExaBGP configuration (text and environment) for a set of `BgpPeer`s: a pure function.

DOC: `render(peers, speaker, api_command, secrets)` returns an `ExabgpConfig` whose ``text`` is
the configuration file and ``env`` the ``exabgp.*`` environment variables. Nothing here touches
the file system: the MD5 secrets come in as a mapping (`read_secrets` reads them), the API
helper's argv as `api_command` (the supervisor builds it, see `agent.speaker.process`).

One ``process`` (``encoder json``, ``respawn false``: a helper that dies takes ExaBGP down with it
through the supervisor, which restarts both) and one ``neighbor`` block per peer:

* ``api { processes [agent]; neighbor-changes; receive { parsed; update; notification; open;
  refresh; keepalive; } }``: JSON state changes, parsed UPDATEs (no raw packets), notifications,
  OPENs, route refreshes and KEEPALIVEs (one per peer every hold time / 3: the implicit
  End-of-RIB of a peer without graceful restart, `agent.sources.bgp`). No ``negotiated``: ExaBGP would repeat the negotiated block in every UPDATE.
* ``manual-eor true``: after a restart ExaBGP must not send End-of-RIB before the agent has
  re-announced (the peer would flush the routes it kept for us under graceful restart).
* ``adj-rib-in false`` (the agent keeps the routes; ExaBGP's copy costs 10x the memory);
  ``adj-rib-out true``: ExaBGP re-sends our (few) advertisements itself when a session comes
  back and answers route refreshes.
* ``capability { route-refresh enable; graceful-restart N; }`` (graceful restart only when N > 0),
  and ``add-path receive;`` for a peer with ``addPath: {receive: true}``: ExaBGP then offers
  ADD-PATH receive (RFC 7911) for every family of the session (no ``add-path`` family block:
  all of them), and the launcher's raw-update line says, per family, whether it was negotiated
  (`agent.speaker.wire`: the path ids are kept).
* ``passive true`` for passive peers, else ``connect PORT``. ExaBGP never listens on the wildcard
  addresses by itself: with BgpSpeaker ``listenAddresses`` unset, ``exabgp.tcp.bind`` is empty and
  each passive peer gets ``listen PORT`` (ExaBGP binds its ``local-address`` only, sets that
  peer's MD5 key on the listening socket, and follows reloads); with ``listenAddresses`` given,
  ``exabgp.tcp.bind`` lists them (empty list: no listener) and no neighbour has its own.
* ``md5-password`` written base64 with ``md5-base64 true`` (no quoting problem, whatever the
  characters), ``outgoing-ttl N`` for eBGP multihop (ExaBGP 5 sets it on outgoing and accepted
  sockets), ``hold-time``, ``local-address`` when given (else ExaBGP's auto discovery).
* GTSM (``ttlSecurity: N``, RFC 5082): ``incoming-ttl 256-N`` and ``outgoing-ttl 255``. What
  ExaBGP 5.0.15 does with them (``reactor/network/tcp.py``, ``outgoing.py``, ``listener.py``):
  incoming-ttl becomes ``IP_MINTTL`` (IPv6: ``IPV6_MINHOPCOUNT``) on each connection it opens
  and on the peer's own listening socket (``listen``, so passive peers), so the kernel drops
  segments (the SYN included) that arrive with a lower TTL; outgoing-ttl is ``IP_TTL`` /
  ``IPV6_UNICAST_HOPS`` on connections it opens and accepts (written explicitly: without it
  5.0.15 also sends 255, older versions sent the minimum). Its shared listeners of
  ``exabgp.tcp.bind`` get no minimum, hence the configuration refuses ttlSecurity with
  BgpSpeaker listenAddresses (`agent.config.resolve`).

The environment: no daemonising, no pid file, no privilege drop (``exabgp.daemon.user`` is the
agent's own user: a setuid would also clear the parent-death signal that stops an orphaned
ExaBGP), acks on, JSON encoder, no API respawn, no CLI named pipes, no statistics logging, logs
to stdout (read by the supervisor).
"""

from __future__ import annotations

import base64
import os
import pwd
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..config.bgp import BgpPeer, BgpSpeakerSpec

PROCESS_NAME = "agent"


@dataclass(frozen=True)
class ExabgpConfig:
    text: str = field(repr=False)  # may contain MD5 secrets (base64)
    env: dict[str, str]


def _token(value: str, what: str) -> str:
    """A bare word for the configuration file: refuse anything the tokeniser would split."""
    if not value or any(c.isspace() or c in ";{}[]#\"'\\," for c in value):
        raise ValueError(f"{what} {value!r} cannot be written into the ExaBGP configuration")
    return value


def _current_user() -> str:
    # not getpass.getuser(): it trusts $USER/$LOGNAME, and a root agent started with USER=alice
    # would have ExaBGP drop to alice
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "root" if os.getuid() == 0 else str(os.getuid())  # ExaBGP only drops as root


def read_secrets(peers: Sequence[BgpPeer]) -> dict[str, str]:
    """MD5 passwords by peer name, read from each peer's md5PasswordFile (raises SecretError)."""
    out = {}
    for peer in peers:
        secret = peer.spec.read_md5_password()
        if secret is not None:
            out[peer.metadata.name] = secret
    return out


def render(
    peers: Sequence[BgpPeer],
    speaker: BgpSpeakerSpec,
    api_command: Sequence[str],
    secrets: Mapping[str, str] | None = None,
    *,
    user: str | None = None,
    log_level: str = "INFO",
    held: Mapping[str, str] | None = None,
) -> ExabgpConfig:
    """The configuration text and environment for `peers`.

    `api_command` is the argv ExaBGP runs as its API helper (an absolute program path first).
    `secrets` maps peer names to MD5 passwords (a peer with md5PasswordFile but no entry is an
    error). `user` is what ExaBGP "drops" to (default: the current user, i.e. no drop). `held`
    maps the names of peers held down (max-prefix) to a throw-away MD5 key: see `_held`.
    Raises ValueError for peers ExaBGP cannot hold together (two with the same address) and for a
    passive peer without a local address to listen on.
    """
    secrets = secrets or {}
    if not api_command or not api_command[0].startswith("/"):
        raise ValueError("api_command must start with an absolute program path")
    run = " ".join(_token(arg, "API helper argument") for arg in api_command)
    lines = [
        "# generated by route-agent: do not edit",
        f"process {PROCESS_NAME} {{",
        f"    run {run};",
        "    encoder json;",
        "    respawn false;",
        "}",
    ]
    seen: dict[str, str] = {}
    for peer in peers:
        name, spec = peer.metadata.name, peer.spec
        if spec.peer_address in seen:
            raise ValueError(f"BgpPeer {name}: peer address {spec.peer_address} is already used by "
                             f"BgpPeer {seen[spec.peer_address]}")
        seen[spec.peer_address] = name
        lines += _neighbor(peer, secrets, speaker, (held or {}).get(name))
    env = {
        "exabgp.daemon.daemonize": "false",
        "exabgp.daemon.drop": "false",
        "exabgp.daemon.user": user or _current_user(),
        "exabgp.daemon.pid": "",
        "exabgp.api.ack": "true",
        "exabgp.api.encoder": "json",
        "exabgp.api.respawn": "false",
        "exabgp.api.terminate": "false",
        "exabgp.api.cli": "false",
        "exabgp.log.enable": "true",
        "exabgp.log.level": log_level,
        "exabgp.log.destination": "stdout",
        "exabgp.log.statistics": "false",
        "exabgp.log.packets": "false",
        "exabgp.log.routes": "false",
        "exabgp.log.short": "true",
        "exabgp.tcp.bind": " ".join(speaker.listen_addresses or ()),
        "exabgp.tcp.port": str(speaker.listen_port),
        "exabgp.tcp.attempts": "0",
        "exabgp.bgp.passive": "false",
    }
    return ExabgpConfig("\n".join(lines) + "\n", env)


def _held(spec, speaker: BgpSpeakerSpec, hold_key: str) -> list[str]:
    """A peer held down after a max-prefix teardown stays configured (removed, ExaBGP would answer
    its connections with Cease 6/3 "no session configured", which replaces the 6/1 as the reason
    the peer shows), but passive, and with an MD5 key the peer does not know: where ExaBGP
    listens for it, the kernel drops its SYNs unanswered (connection attempts time out); where
    ExaBGP does not listen (an active peer, no listenAddresses) they are refused, as before."""
    out = ["    passive true;"]
    if spec.passive and speaker.listen_addresses is None and spec.local_address is not None:
        out.append(f"    listen {speaker.listen_port};")
    return out + [f"    md5-password {hold_key};", "    md5-base64 true;"]


def _held_router_id(router_id: str | None) -> str:
    """Another router id for a held peer: ExaBGP keys a neighbour without ``listen`` by a name
    holding its router id, so holding and restoring the peer replace ExaBGP's peer object (a
    changed neighbour of the same key is only applied by a session reset, which a peer that is
    not connected never has: restored, it would stay passive). A held peer sends no OPEN."""
    return "0.0.0.2" if router_id == "0.0.0.1" else "0.0.0.1"


def _neighbor(peer: BgpPeer, secrets: Mapping[str, str], speaker: BgpSpeakerSpec,
              hold_key: str | None = None) -> list[str]:
    name, spec = peer.metadata.name, peer.spec
    out = [
        "",
        f"neighbor {spec.peer_address} {{",
        f"    description \"BgpPeer {_token(name, 'peer name')}\";",
        f"    router-id {spec.router_id if hold_key is None else _held_router_id(spec.router_id)};",
    ]
    if spec.local_address is not None:
        out.append(f"    local-address {spec.local_address};")
    out += [
        f"    local-as {spec.local_as};",
        f"    peer-as {spec.peer_as};",
        f"    hold-time {spec.hold_time};",
    ]
    if hold_key is not None:
        out += _held(spec, speaker, hold_key)
    elif spec.passive:
        out.append("    passive true;")
        if speaker.listen_addresses is None:
            if spec.local_address is None:
                raise ValueError(f"BgpPeer {name}: a passive peer needs localAddress (where ExaBGP "
                                 "listens for it) unless BgpSpeaker listenAddresses is set")
            out.append(f"    listen {speaker.listen_port};")
    else:
        out += ["    passive false;", f"    connect {spec.port};"]
    if spec.ebgp_multihop is not None:
        out.append(f"    outgoing-ttl {spec.ebgp_multihop};")
    if spec.ttl_security is not None:  # GTSM: accept TTL >= 256 - hops, send 255 (RFC 5082 3)
        out += [f"    incoming-ttl {256 - spec.ttl_security};", "    outgoing-ttl 255;"]
    if hold_key is not None:
        pass
    elif spec.md5_password_file is not None:
        if name not in secrets:
            raise ValueError(f"BgpPeer {name}: no MD5 password was read from md5PasswordFile")
        b64 = base64.b64encode(secrets[name].encode("ascii")).decode("ascii")
        out += [f"    md5-password {b64};", "    md5-base64 true;"]
    out += [
        "    manual-eor true;",
        "    adj-rib-in false;",
        "    adj-rib-out true;",
        "    group-updates true;",
        "    family {",
        *(f"        {f.afi_safi};" for f in spec.families),
        "    }",
        "    capability {",
        "        route-refresh enable;",
    ]
    if spec.graceful_restart_seconds:
        out.append(f"        graceful-restart {spec.graceful_restart_seconds};")
    if spec.add_path.receive:  # every family of the session (no add-path block: ExaBGP's default)
        out.append("        add-path receive;")
    out += [
        "    }",
        "    api {",
        f"        processes [ {PROCESS_NAME} ];",
        "        neighbor-changes;",
        "        receive { parsed; update; notification; open; refresh; keepalive; }",
        "    }",
        "}",
    ]
    return out
