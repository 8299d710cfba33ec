"""Configuration of BGP sessions: `BgpPeer` objects and the one `BgpSpeaker` (ExaBGP settings).

DOC: the same Kubernetes-shaped resources as every kind (`agent.config.base`: ``apiVersion
routeagent.io/v1alpha1``, camelCase fields, ``extra="forbid"``, frozen, strict scalars, every
error at its exact field). `KINDS` lists the kinds defined here (joined in `agent.config.kinds`).

* `BgpPeer` (any number, one per neighbour): addresses, ASNs, router id, passive/active, hold
  time, families, MD5 password file, graceful restart, eBGP multihop TTL or GTSM (``ttlSecurity``,
  RFC 5082, Calico's name and meaning: the hop count to the neighbour), import policy name,
  administrative distance override, max-prefix per family, ADD-PATH receive (``addPath:
  {receive: true}``, RFC 7911). The MD5 secret is never stored in the
  model: `BgpPeerSpec.read_md5_password()` reads the file (`agent.config.files.read_bounded`:
  a regular file of at most 82 bytes, never blocking on a FIFO) when the loader checks the
  object (`BgpPeer.file_problems`: a missing, empty, oversized or unreadable file is a problem at
  ``spec.md5PasswordFile``, so such a configuration is rejected like any other invalid one) and
  again when the ExaBGP configuration is written; nothing here logs it or puts it in a repr.
* `BgpSpeaker` (at most one): where ExaBGP listens for passive sessions (port, and optionally
  an address list; by default only on each passive peer's localAddress, never on the wildcard
  addresses, so it can run beside a BIRD on the same host: give one of them another address or
  port), and
  which interpreter runs ExaBGP (``auto``: PyPy when it can import exabgp, else the agent's own
  Python; see `agent.speaker.process.resolve_interpreter`), and how received UPDATEs cross the
  ExaBGP boundary (``updates``: ``json``, decoded by ExaBGP; ``raw``, handed over undecoded by the
  launcher's patch and decoded by the agent, which needs ExaBGP 5.0.15 exactly: see
  `agent.speaker.launcher`).

Defaults worth knowing: ``holdTime`` 90 s, ``gracefulRestartSeconds`` 120 (0 turns the
capability off), ``families`` the family of ``peerAddress``, ``port`` 179, active (we connect).
"""

from __future__ import annotations

import enum
import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic_core import InitErrorDetails

from .base import (
    Distance,
    DnsSubdomain,
    IPAddress,
    LabelSelector,
    Resource,
    _at,
    _check_dns_subdomain,
    _error,
    _Model,
    _raise,
    unique_errors,
)
from .bfd import PeerBfd
from .crd_schema import Cel, cel_rules
from .files import FileProblem, FileTooLarge, read_bounded
from ..core.bgp import Family

ASN = Annotated[StrictInt, Field(ge=1, le=2**32 - 1)]

AS_TRANS = 23456  # RFC 6793: never a real AS
MD5_KEY_MAX = 80  # TCP_MD5SIG_MAXKEYLEN: the longest key the kernel takes


class MaxPrefixAction(str, enum.Enum):
    WARN = "warn"  # log and count, keep accepting
    DISCARD_EXTRA = "discardExtra"  # keep the session, ignore prefixes beyond the limit
    # close the session with Cease 6/1 (maximum number of prefixes reached); sent with or without
    # graceful restart (ExaBGP 5.0.15 alone closed silently with it: the launcher's teardown patch)
    TEARDOWN = "teardown"


class UpdatesMode(str, enum.Enum):
    JSON = "json"  # ExaBGP decodes every UPDATE and writes it as JSON
    RAW = "raw"  # ExaBGP writes the UPDATE's bytes (hex), the agent decodes them; ExaBGP 5.0.15 only


class AddPathSpec(_Model):
    """ADD-PATH (RFC 7911) on the session: several paths per prefix, each with its path id."""

    receive: StrictBool = False
    """Offer to receive several paths per prefix in every family of the session (used where the
    peer offers to send them, e.g. BIRD ``add paths tx``): each path is its own RIB candidate, so
    paths of one peer can form an ECMP route (both BgpSpeaker ``updates`` modes)."""


class MaxPrefixSpec(_Model):
    """A limit on the prefixes accepted from the peer in one family, and what exceeding it does."""

    family: Family
    """Address family the limit applies to (``ipv4-unicast`` or ``ipv6-unicast``)."""
    limit: StrictInt = Field(ge=1, le=2**32 - 1)
    """Largest number of prefixes received in this family."""
    action: MaxPrefixAction = MaxPrefixAction.WARN
    """``warn``, ``discardExtra`` or ``teardown`` (Cease 6/1)."""
    restart_seconds: StrictInt | None = Field(None, ge=1, le=86400)
    """With ``teardown``: bring the session back after this delay; unset: it stays down until the configuration changes."""

    @model_validator(mode="after")
    def _restart_needs_teardown(self) -> "MaxPrefixSpec":
        if self.restart_seconds is not None and self.action is not MaxPrefixAction.TEARDOWN:
            _raise(type(self).__name__, [_at(
                ("restartSeconds",), self.restart_seconds, "restart_without_teardown",
                f"restartSeconds only applies to action teardown (action is {self.action.value})",
            )])
        return self


def _check_router_id(value: str) -> str:
    try:
        addr = ipaddress.IPv4Address(value)
    except ValueError:
        raise _error("router_id", f"invalid router id {value!r}: a router id is an IPv4 address "
                                  "(dotted quad), also on IPv6-only sessions") from None
    if int(addr) == 0:
        raise _error("router_id", "router id 0.0.0.0 is not allowed")
    return str(addr)


def _check_secret_path(value: str) -> str:
    if not value.startswith("/") or "\0" in value:
        raise _error("absolute_path", f"expected an absolute file path, got {value!r}")
    return str(Path(value))


# built-in import policies (agent.policy.BUILTIN_POLICIES), whose names are not DNS subdomains
BUILTIN_POLICY_NAMES = frozenset({"acceptAll"})


def _check_policy_name(value: str) -> str:
    return value if value in BUILTIN_POLICY_NAMES else _check_dns_subdomain(value)


RouterId = Annotated[StrictStr, AfterValidator(_check_router_id)]
PolicyName = Annotated[StrictStr, AfterValidator(_check_policy_name)]
SecretPath = Annotated[StrictStr, Field(max_length=4096), AfterValidator(_check_secret_path)]


class NodeOverride(_Model):
    """Values of one node that differ from the peer's common ones (one cluster-wide BgpPeer)."""

    node_name: DnsSubdomain
    """The Node (metadata.name) these values apply to."""
    router_id: RouterId | None = None
    """Our BGP identifier on this node."""
    local_address: IPAddress | None = None
    """Our source address on this node."""
    local_as: ASN | None = Field(None, alias="localAS")
    """Our AS number on this node."""


class BgpPeerSpec(_Model):
    """One BGP neighbour of this node."""

    # some of `_rules` below, for the API server (agent.config.crd_schema.Cel)
    model_config = ConfigDict(json_schema_extra=cel_rules(
        Cel("!has(self.localAddress) || !isIP(self.localAddress) || !isIP(self.peerAddress)"
            " || ip(self.localAddress).family() == ip(self.peerAddress).family()",
            "localAddress must be of the family of peerAddress", field_path=".localAddress"),
        Cel("!isIP(self.peerAddress) || !ip(self.peerAddress).isUnspecified()",
            "peerAddress cannot be the unspecified address", field_path=".peerAddress"),
        Cel("!has(self.holdTime) || self.holdTime == 0 || self.holdTime >= 3",
            "hold time must be 0 or at least 3 seconds (RFC 4271)", field_path=".holdTime"),
        Cel("!has(self.ebgpMultihop) || self.peerAS != self.localAS",
            "ebgpMultihop applies to eBGP only (peerAS equals localAS)", field_path=".ebgpMultihop"),
        Cel("self.peerAS != 23456 && self.localAS != 23456",
            "AS 23456 is AS_TRANS (RFC 6793), not a usable AS number"),
        Cel("!has(self.ttlSecurity) || !has(self.ebgpMultihop)",
            "ttlSecurity and ebgpMultihop are exclusive", field_path=".ttlSecurity"),
    ))

    peer_address: IPAddress
    """The neighbour's address (IPv4 or IPv6, no zone index)."""
    peer_as: ASN = Field(alias="peerAS")
    """The neighbour's AS number."""
    local_as: ASN = Field(alias="localAS")
    """Our AS number on this session (equal to peerAS: iBGP)."""
    router_id: RouterId | None = None
    """Our BGP identifier on this session (an IPv4 address, also on IPv6 sessions); unset: the
    node's IPv4 InternalIP (Kubernetes) or the host's first global IPv4 address (standalone)."""
    local_address: IPAddress | None = None
    """Our source address for the session; unset: chosen by the kernel. Same family as peerAddress."""
    port: StrictInt = Field(179, ge=1, le=65535)
    """The neighbour's TCP port (where we connect to)."""
    passive: StrictBool = False
    """Only accept the session: the neighbour connects to localAddress (required unless BgpSpeaker
    listenAddresses is set) on the speaker's listenPort; we never connect."""
    hold_time: StrictInt = Field(90, ge=0, le=65535)
    """Hold time proposed in our OPEN, in seconds: 0 (no keepalives) or at least 3."""
    families: tuple[Family, ...] = Field(default=(), max_length=2)
    """Address families of the session; default: the family of peerAddress."""
    md5_password_file: SecretPath | None = None
    """File holding the TCP MD5 (RFC 2385) password (trailing newline ignored, at most 80 bytes)."""
    graceful_restart_seconds: StrictInt = Field(120, ge=0, le=4095)
    """Graceful restart (RFC 4724) time we announce; 0: no graceful restart capability."""
    ebgp_multihop: StrictInt | None = Field(None, ge=1, le=255)
    """eBGP only: the TTL of our packets, for a neighbour that is not directly connected."""
    ttl_security: StrictInt | None = Field(None, ge=1, le=254)
    """GTSM (RFC 5082): hops to the neighbour (1: directly connected). We send with TTL 255 and
    the kernel drops the neighbour's packets that arrive with a TTL below 256 - ttlSecurity. The
    neighbour must do the same (BIRD ``ttl security on``, FRR ``ttl-security hops``). Not with
    ebgpMultihop."""
    import_policy: PolicyName | None = None
    """Name of a RoutePolicy or ``acceptAll``; unset: eBGP routes are refused (RFC 8212)."""
    admin_distance: Distance | None = None
    """Administrative distance of this peer's routes; unset: AgentConfig adminDistance.ebgp/ibgp."""
    max_prefix: tuple[MaxPrefixSpec, ...] = Field((), max_length=2)
    """Limits on received prefixes, at most one per family."""
    allow_default_route: StrictBool = False
    """Accept 0.0.0.0/0 and ::/0 from this peer (the hijack guard refuses them otherwise)."""
    export_policy: StrictStr | None = Field(None, max_length=253)
    """Name of the export policy; unset: nothing is advertised to an eBGP peer (RFC 8212), every
    selected advertisement to an iBGP peer."""
    allow_covering_routes: StrictBool = False
    """Accept routes that cover the node's own prefixes (aggregates such as a fabric /16)."""
    allow_own_as: StrictInt = Field(0, ge=0, le=10)
    """AS_PATH loop detection (RFC 4271 9.1.2): a route whose AS_PATH holds localAS more than this
    many times is dropped (reason ``as_loop``) before any policy; 0: any occurrence (allowas-in)."""
    add_path: AddPathSpec = Field(default_factory=AddPathSpec)
    """ADD-PATH (RFC 7911): ``{receive: true}`` keeps every path the peer sends as its own candidate."""

    bfd: PeerBfd | None = None
    """BFD for the session (RFC 5880/5881 single hop): ``{profile: NAME}`` or ``{minRx, minTx,
    multiplier}`` (ms; defaults 300/300/3); unset: no BFD. A BFD session going down tears the BGP
    session down (Cease) and its routes are not used again before BFD is back up."""

    node_selector: LabelSelector | None = None
    """The nodes that have this session (their Node labels); unset: every node."""
    node_overrides: tuple[NodeOverride, ...] = Field((), max_length=4096)
    """Per-node values replacing routerId, localAddress or localAS on one named node."""

    @model_validator(mode="before")
    @classmethod
    def _default_families(cls, data: Any) -> Any:
        """No ``families``: the family of peerAddress (an explicit empty list stays an error)."""
        if isinstance(data, dict) and "families" not in data:
            addr = data.get("peerAddress", data.get("peer_address"))
            try:
                version = ipaddress.ip_address(addr).version if isinstance(addr, str) else None
            except ValueError:
                version = None  # reported by the peerAddress check
            if version:
                return {**data, "families": [f"ipv{version}-unicast"]}
        return data

    @model_validator(mode="after")
    def _rules(self) -> "BgpPeerSpec":
        errors: list[InitErrorDetails] = []
        if not self.families:
            errors.append(_at(("families",), [], "no_families",
                              "at least one family is needed (ipv4-unicast, ipv6-unicast)"))
        elif len(set(self.families)) != len(self.families):
            errors.append(_at(("families",), [f.value for f in self.families], "duplicate_family",
                              "each family at most once"))
        if AS_TRANS in (self.peer_as, self.local_as):
            which = "peerAS" if self.peer_as == AS_TRANS else "localAS"
            errors.append(_at((which,), AS_TRANS, "as_trans",
                              "AS 23456 is AS_TRANS (RFC 6793), not a usable AS number"))
        peer = ipaddress.ip_address(self.peer_address)
        if peer.is_unspecified or peer.is_multicast:
            errors.append(_at(("peerAddress",), self.peer_address, "peer_address",
                              f"{self.peer_address} cannot be a BGP neighbour address"))
        if peer.version == 6 and peer.is_link_local:
            errors.append(_at(("peerAddress",), self.peer_address, "link_local_peer",
                              "link-local neighbour addresses are not supported (they need an interface)"))
        if self.local_address is not None:
            local = ipaddress.ip_address(self.local_address)
            if local.version != peer.version:
                errors.append(_at(("localAddress",), self.local_address, "address_family",
                                  f"IPv{local.version} localAddress for IPv{peer.version} peerAddress: "
                                  "the session runs over one family (MP-BGP carries the other)"))
            elif local == peer:
                errors.append(_at(("localAddress",), self.local_address, "same_address",
                                  "localAddress equals peerAddress"))
        if self.hold_time in (1, 2):
            errors.append(_at(("holdTime",), self.hold_time, "hold_time",
                              "hold time must be 0 or at least 3 seconds (RFC 4271)"))
        if self.ebgp_multihop is not None and self.peer_as == self.local_as:
            errors.append(_at(("ebgpMultihop",), self.ebgp_multihop, "multihop_ibgp",
                              "ebgpMultihop applies to eBGP only (peerAS equals localAS)"))
        if self.ttl_security is not None and self.ebgp_multihop is not None:
            errors.append(_at(("ttlSecurity",), self.ttl_security, "ttl_security_multihop",
                              "ttlSecurity and ebgpMultihop are exclusive: with GTSM our packets always "
                              "leave with TTL 255, and ttlSecurity already gives the number of hops"))
        errors += unique_errors(self.node_overrides, "nodeOverrides", "node", "duplicate_node",
                                key=lambda o: o.node_name, sub=("nodeName",))
        for i, o in enumerate(self.node_overrides):
            if o.local_address is not None and ipaddress.ip_address(o.local_address).version != peer.version:
                errors.append(_at(("nodeOverrides", i, "localAddress"), o.local_address, "address_family",
                                  f"localAddress {o.local_address} is not of the family of peerAddress"))
        errors += unique_errors(self.max_prefix, "maxPrefix", "family", "duplicate_family",
                                key=lambda mp: mp.family.value, sub=("family",))
        for i, mp in enumerate(self.max_prefix):
            if self.families and mp.family not in self.families:
                errors.append(_at(("maxPrefix", i, "family"), mp.family.value, "family_not_configured",
                                  f"{mp.family.value} is not one of the session's families"))
        _raise(type(self).__name__, errors)
        return self

    @property
    def ebgp(self) -> bool:
        return self.peer_as != self.local_as

    def for_node(self, node_name: str, node_ipv4: str | None) -> "BgpPeerSpec":
        """This spec as it applies on one node: its override, and the router id defaulted to the
        node's IPv4 address (still None when there is none: the caller reports it)."""
        update: dict[str, Any] = {"node_overrides": (), "node_selector": None}
        for o in self.node_overrides:
            if o.node_name == node_name:
                update |= {k: v for k, v in (("router_id", o.router_id), ("local_address", o.local_address),
                                             ("local_as", o.local_as)) if v is not None}
        if update.get("router_id", self.router_id) is None and node_ipv4 is not None:
            update["router_id"] = node_ipv4
        return self.model_copy(update=update)

    def read_md5_password(self) -> str | None:
        """The MD5 secret from `md5_password_file` (one trailing newline stripped), or None.

        Raises `SecretError` (naming the file, never the content) when the file is unreadable,
        empty, longer than 80 bytes or not printable ASCII.
        """
        if self.md5_password_file is None:
            return None
        path = self.md5_password_file
        too_long = f"md5PasswordFile {path}: longer than {MD5_KEY_MAX} bytes (the TCP MD5 key limit)"
        try:
            raw = read_bounded(path, MD5_KEY_MAX + 2)  # the key, then "\r\n" at most
        except FileTooLarge:
            raise SecretError(too_long) from None
        except FileProblem as exc:
            raise SecretError(f"md5PasswordFile {path}: {exc}") from None
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        if not raw:
            raise SecretError(f"md5PasswordFile {path}: the file is empty")
        if len(raw) > MD5_KEY_MAX:
            raise SecretError(too_long)
        if not all(0x20 < b < 0x7F for b in raw):
            raise SecretError(f"md5PasswordFile {path}: the password must be printable ASCII without spaces")
        return raw.decode("ascii")


class SecretError(ValueError):
    """A secret file could not be used; the message names the file, never its content."""


class BgpPeer(Resource):
    """A BGP neighbour; its routes have the origin ``ebgp/<name>`` or ``ibgp/<name>``."""

    kind: Literal["BgpPeer"] = "BgpPeer"
    spec: BgpPeerSpec

    def file_problems(self) -> list[tuple[tuple[str, ...], str]]:
        """The MD5 password file must be usable now (the message never holds the secret)."""
        try:
            self.spec.read_md5_password()
        except SecretError as exc:
            return [(("spec", "md5PasswordFile"), str(exc))]
        return []


class BgpSpeakerSpec(_Model):
    """How the agent runs its BGP speaker (ExaBGP)."""

    listen_addresses: tuple[IPAddress, ...] | None = Field(None, max_length=16)
    """Addresses ExaBGP listens on, for every passive peer. Unset: only the localAddress of each
    passive peer (with that peer's MD5 key), and nowhere without passive peers; empty: nowhere."""
    listen_port: StrictInt = Field(179, ge=1, le=65535)
    """TCP port ExaBGP listens on. Beside a BIRD on the same host, use another address or port."""
    interpreter: StrictStr = "auto"
    """Interpreter for ExaBGP: ``auto`` (pypy3 when it can import exabgp, else the agent's Python) or an absolute path."""
    updates: UpdatesMode = UpdatesMode.RAW
    """How received UPDATEs reach the agent: ``raw`` (default: undecoded, decoded by the agent; needs ExaBGP 5.0.15, refused otherwise) or ``json`` (decoded by ExaBGP; the fallback)."""

    @model_validator(mode="after")
    def _rules(self) -> "BgpSpeakerSpec":
        errors: list[InitErrorDetails] = []
        if self.interpreter != "auto" and (not self.interpreter.startswith("/") or any(
                c.isspace() or c in ";'\"" for c in self.interpreter)):
            errors.append(_at(("interpreter",), self.interpreter, "interpreter",
                              "expected 'auto' or an absolute path without spaces or quotes"))
        errors += unique_errors(self.listen_addresses or (), "listenAddresses", "address", "duplicate_address")
        _raise(type(self).__name__, errors)
        return self


class BgpSpeaker(Resource):
    """Speaker settings; at most one per configuration (none: all defaults)."""

    kind: Literal["BgpSpeaker"] = "BgpSpeaker"
    spec: BgpSpeakerSpec = Field(default_factory=BgpSpeakerSpec)


KINDS: dict[str, type[BgpPeer] | type[BgpSpeaker]] = {
    "BgpPeer": BgpPeer,
    "BgpSpeaker": BgpSpeaker,
}
