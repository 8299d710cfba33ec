"""BgpPeer / BgpSpeaker models and the generated ExaBGP configuration (checked by ExaBGP itself)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from agent.core.bgp import Family
from agent.speaker.exabgp_conf import read_secrets, render
from agent.config.bgp import (
    KINDS,
    BgpPeer,
    BgpSpeaker,
    BgpSpeakerSpec,
    MaxPrefixAction,
    SecretError,
)
from agent.speaker.process import RELAY

API = "routeagent.io/v1alpha1"


def peer_doc(name="tor1", **spec):
    base = {"peerAddress": "10.0.0.1", "peerAS": 65000, "localAS": 65001, "routerId": "10.0.0.2"}
    return {"apiVersion": API, "kind": "BgpPeer", "metadata": {"name": name}, "spec": {**base, **spec}}


def make_peer(name="tor1", **spec) -> BgpPeer:
    return BgpPeer.model_validate(peer_doc(name, **spec), by_alias=True, by_name=False)


def errors(doc, cls=BgpPeer) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(doc, by_alias=True, by_name=False)
    return {".".join(str(p) for p in e["loc"]): e["msg"] for e in info.value.errors()}


# ---- models -----------------------------------------------------------------------------------


def test_kinds_and_defaults():
    assert set(KINDS) == {"BgpPeer", "BgpSpeaker"}
    p = make_peer()
    s = p.spec
    assert (s.port, s.passive, s.hold_time, s.graceful_restart_seconds) == (179, False, 90, 120)
    assert s.families == (Family.IPV4_UNICAST,) and s.ebgp and s.max_prefix == ()
    assert make_peer(peerAddress="fd00::1").spec.families == (Family.IPV6_UNICAST,)
    assert p.model_dump(mode="json")["spec"]["peerAS"] == 65000  # camelCase out, as in YAML
    sp = BgpSpeaker.model_validate({"apiVersion": API, "kind": "BgpSpeaker", "metadata": {"name": "s"}})
    assert sp.spec == BgpSpeakerSpec() and sp.spec.listen_addresses is None  # passive peers only
    assert (sp.spec.listen_port, sp.spec.interpreter) == (179, "auto")


def test_full_peer():
    p = make_peer(localAddress="10.0.0.2", port=1179, passive=True, holdTime=30,
                  families=["ipv4-unicast", "ipv6-unicast"], md5PasswordFile="/etc/ra/md5",
                  gracefulRestartSeconds=0, ebgpMultihop=2, importPolicy="from-tor",
                  adminDistance=15,
                  maxPrefix=[{"family": "ipv4-unicast", "limit": 1000, "action": "teardown",
                              "restartSeconds": 60},
                             {"family": "ipv6-unicast", "limit": 10, "action": "discardExtra"}])
    assert p.spec.max_prefix[0].action is MaxPrefixAction.TEARDOWN
    assert p.spec.max_prefix[1].restart_seconds is None
    assert p.spec.import_policy == "from-tor" and p.spec.admin_distance == 15
    assert make_peer(importPolicy="acceptAll").spec.import_policy == "acceptAll"  # built-in


@pytest.mark.parametrize("spec,field,fragment", [
    ({"peerAddress": "10.0.0.300"}, "spec.peerAddress", "invalid address"),
    ({"peerAddress": "fe80::1"}, "spec.peerAddress", "link-local"),
    ({"peerAddress": "0.0.0.0"}, "spec.peerAddress", "cannot be a BGP neighbour"),
    ({"peerAS": 0}, "spec.peerAS", "greater than or equal to 1"),
    ({"localAS": 2**32}, "spec.localAS", "less than or equal to"),
    ({"peerAS": 23456}, "spec.peerAS", "AS_TRANS"),
    ({"routerId": "2001:db8::1"}, "spec.routerId", "IPv4 address"),
    ({"routerId": "0.0.0.0"}, "spec.routerId", "not allowed"),
    ({"localAddress": "fd00::2"}, "spec.localAddress", "family"),
    ({"localAddress": "10.0.0.1"}, "spec.localAddress", "equals peerAddress"),
    ({"port": 0}, "spec.port", "greater than or equal to 1"),
    ({"port": "179"}, "spec.port", "valid integer"),
    ({"holdTime": 2}, "spec.holdTime", "at least 3"),
    ({"families": []}, "spec.families", "at least one family"),
    ({"families": ["ipv4-unicast", "ipv4-unicast"]}, "spec.families", "each family at most once"),
    ({"families": ["ipv4-flow"]}, "spec.families.0", "ipv4-unicast"),
    ({"md5PasswordFile": "relative/path"}, "spec.md5PasswordFile", "absolute"),
    ({"gracefulRestartSeconds": 4096}, "spec.gracefulRestartSeconds", "less than or equal to 4095"),
    ({"ebgpMultihop": 0}, "spec.ebgpMultihop", "greater than or equal to 1"),
    ({"ebgpMultihop": 2, "localAS": 65000}, "spec.ebgpMultihop", "eBGP only"),
    ({"ttlSecurity": 0}, "spec.ttlSecurity", "greater than or equal to 1"),
    ({"ttlSecurity": 255}, "spec.ttlSecurity", "less than or equal to 254"),
    ({"ttlSecurity": "on"}, "spec.ttlSecurity", "valid integer"),
    ({"ttlSecurity": 1, "ebgpMultihop": 2}, "spec.ttlSecurity", "ttlSecurity and ebgpMultihop are exclusive"),
    ({"importPolicy": "Bad_Name"}, "spec.importPolicy", "DNS-1123"),
    ({"adminDistance": 256}, "spec.adminDistance", "less than or equal to 255"),
    ({"maxPrefix": [{"family": "ipv4-unicast", "limit": 0}]}, "spec.maxPrefix.0.limit", "greater than"),
    ({"maxPrefix": [{"family": "ipv4-unicast", "limit": 5, "action": "drop"}]},
     "spec.maxPrefix.0.action", "warn"),
    ({"maxPrefix": [{"family": "ipv4-unicast", "limit": 5, "restartSeconds": 5}]},
     "spec.maxPrefix.0.restartSeconds", "only applies to action teardown"),
    ({"maxPrefix": [{"family": "ipv6-unicast", "limit": 5}]}, "spec.maxPrefix.0.family",
     "not one of the session's families"),
    ({"maxPrefix": [{"family": "ipv4-unicast", "limit": 5}, {"family": "ipv4-unicast", "limit": 6}]},
     "spec.maxPrefix.1.family", "duplicate family"),
    ({"peer_as": 1}, "spec.peer_as", "Extra inputs"),
    ({"md5Password": "x"}, "spec.md5Password", "Extra inputs"),
])
def test_peer_errors_name_the_field(spec, field, fragment):
    errs = errors(peer_doc(**spec))
    assert field in errs, errs
    assert fragment in errs[field], errs


def test_missing_required_fields():
    doc = peer_doc()
    del doc["spec"]["peerAS"], doc["spec"]["routerId"]
    assert set(errors(doc)) == {"spec.peerAS"}  # routerId defaults to the node's IPv4 address


@pytest.mark.parametrize("spec,field", [
    ({"listenAddresses": ["10.0.0.1", "10.0.0.1"]}, "spec.listenAddresses.1"),
    ({"listenAddresses": ["10.0.0"]}, "spec.listenAddresses.0"),
    ({"listenPort": 70000}, "spec.listenPort"),
    ({"interpreter": "pypy3"}, "spec.interpreter"),
    ({"interpreter": "/usr/bin/py thon"}, "spec.interpreter"),
])
def test_speaker_errors_name_the_field(spec, field):
    doc = {"apiVersion": API, "kind": "BgpSpeaker", "metadata": {"name": "s"}, "spec": spec}
    assert field in errors(doc, BgpSpeaker)


def test_models_are_frozen():
    p = make_peer()
    with pytest.raises(ValidationError):
        p.spec.port = 1


# ---- secrets ----------------------------------------------------------------------------------


def test_md5_secret_is_read_from_the_file_and_never_in_reprs(tmp_path):
    f = tmp_path / "pw"
    f.write_text("Sw0rdfish!\n")
    p = make_peer(md5PasswordFile=str(f))
    assert p.spec.read_md5_password() == "Sw0rdfish!"
    assert read_secrets([p, make_peer("other", peerAddress="10.0.0.5")]) == {"tor1": "Sw0rdfish!"}
    conf = render([p], BgpSpeakerSpec(), [sys.executable, RELAY, "/run/x.sock", "t"], read_secrets([p]))
    for text in (repr(p), str(p), repr(conf), p.model_dump_json()):
        assert "Sw0rdfish" not in text
    assert "md5-password U3cwcmRmaXNoIQ==;" in conf.text and "md5-base64 true;" in conf.text


@pytest.mark.parametrize("content,fragment", [
    (b"", "empty"), (b"\n", "empty"), (b"x" * 81, "80 bytes"), (b"has space", "printable"),
    (b"caf\xc3\xa9", "printable"),
])
def test_bad_secret_files(tmp_path, content, fragment):
    f = tmp_path / "pw"
    f.write_bytes(content)
    with pytest.raises(SecretError) as info:
        make_peer(md5PasswordFile=str(f)).spec.read_md5_password()
    assert fragment in str(info.value) and str(f) in str(info.value)
    if content.strip():
        assert content.decode("utf-8", "replace") not in str(info.value)  # never the secret


def test_missing_secret_file(tmp_path):
    with pytest.raises(SecretError, match="No such file"):
        make_peer(md5PasswordFile=str(tmp_path / "nope")).spec.read_md5_password()
    with pytest.raises(ValueError, match="no MD5 password"):
        render([make_peer(md5PasswordFile="/x")], BgpSpeakerSpec(), [sys.executable])


def test_secret_file_bounds_fifo_directory_and_crlf(tmp_path):
    f = tmp_path / "pw"
    f.write_bytes(b"k" * 80 + b"\r\n")  # the longest key, with a CRLF
    assert make_peer(md5PasswordFile=str(f)).spec.read_md5_password() == "k" * 80
    big = tmp_path / "big"
    big.write_bytes(b"S3cret" * 200_000)
    with pytest.raises(SecretError, match="longer than 80 bytes") as info:
        make_peer(md5PasswordFile=str(big)).spec.read_md5_password()
    assert "S3cret" not in str(info.value)
    with pytest.raises(SecretError, match="is a directory"):
        make_peer(md5PasswordFile=str(tmp_path)).spec.read_md5_password()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: an open() without O_NONBLOCK would wait forever
    with pytest.raises(SecretError, match="not a regular file"):
        make_peer(md5PasswordFile=str(fifo)).spec.read_md5_password()


def peer_yaml(last_line: str) -> str:
    """A BgpPeer document as a file holds it; `last_line` is its last spec field (line 9)."""
    return ("apiVersion: routeagent.io/v1alpha1\nkind: BgpPeer\nmetadata: {name: tor1}\nspec:\n"
            "  peerAddress: 10.0.0.1\n  peerAS: 65000\n  localAS: 65001\n  routerId: 10.0.0.2\n"
            f"  {last_line}\n")


SECRET_PEER = peer_yaml("md5PasswordFile: PATH")


def _file(content: bytes):
    def make(d):
        (d / "pw").write_bytes(content)
        return d / "pw"
    return make


def _fifo(d):
    os.mkfifo(d / "fifo")
    return d / "fifo"


@pytest.mark.parametrize("make,fragment", [
    (lambda d: d / "missing", "No such file"),
    (_file(b""), "empty"),
    (lambda d: d, "is a directory"),
    (_file(b"TopS3cret" * 20), "longer than 80 bytes"),
    (_file(b"Top S3cret"), "printable"),
    (_fifo, "not a regular file"),
], ids=["missing", "empty", "directory", "oversized", "space", "fifo"])
def test_an_unusable_secret_file_is_a_configuration_problem_at_its_field(tmp_path, make, fragment):
    """Issue 12 item 4: a reload with a bad md5PasswordFile is rejected like any invalid
    configuration (it used to pass, then the BGP task failed and ExaBGP kept the old peers)."""
    from agent.config.loader import ConfigError, load_text

    path = make(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_text(SECRET_PEER.replace("PATH", str(path)), "peers.yaml")
    (p,) = info.value.problems
    assert (p.file, p.object, p.field, p.line) == ("peers.yaml", "BgpPeer/tor1", "spec.md5PasswordFile", 9)
    assert fragment in p.message and str(path) in p.message
    assert "S3cret" not in str(info.value)  # never the secret, not even a bad one


def test_a_usable_secret_file_loads(tmp_path):
    from agent.config.loader import load_text

    (tmp_path / "pw").write_text("Sw0rdfish!\n")
    config = load_text(SECRET_PEER.replace("PATH", str(tmp_path / "pw")), "peers.yaml")
    assert config.peers[0].spec.md5_password_file == str(tmp_path / "pw")


# ---- the generated configuration ---------------------------------------------------------------


def _sample(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    peers = [
        make_peer("tor1", localAddress="10.0.0.2", holdTime=30, ebgpMultihop=3, md5PasswordFile=str(pw),
                  families=["ipv4-unicast", "ipv6-unicast"]),
        make_peer("tor2", peerAddress="fd00::1", peerAS=65001, passive=True, gracefulRestartSeconds=0),
        make_peer("rr", peerAddress="10.0.0.9", peerAS=65001, port=1179),
    ]
    speaker = BgpSpeakerSpec(listenAddresses=["127.0.0.2", "::1"], listenPort=1790)
    api = [sys.executable, "-S", "-E", RELAY, str(tmp_path / "api.sock"), "tok"]
    return render(peers, speaker, api, read_secrets(peers)), peers


def _block(text: str, header: str) -> str:
    start = text.index(header)
    return text[start:text.index("\n}\n", start)]


def test_rendered_text_and_env(tmp_path):
    conf, _ = _sample(tmp_path)
    text = conf.text
    proc = _block(text, "process agent {")
    assert f"run {sys.executable} -S -E {RELAY} {tmp_path / 'api.sock'} tok;" in proc
    assert "encoder json;" in proc and "respawn false;" in proc
    tor1 = _block(text, "neighbor 10.0.0.1 {")
    for want in ("router-id 10.0.0.2;", "local-address 10.0.0.2;", "local-as 65001;", "peer-as 65000;",
                 "hold-time 30;", "passive false;", "connect 179;", "outgoing-ttl 3;", "manual-eor true;",
                 "adj-rib-in false;", "ipv4 unicast;", "ipv6 unicast;", "route-refresh enable;",
                 "graceful-restart 120;", "processes [ agent ];", "neighbor-changes;",
                 "receive { parsed; update; notification; open; refresh; keepalive; }"):
        assert want in tor1, want
    tor2 = _block(text, "neighbor fd00::1 {")
    assert "passive true;" in tor2 and "connect" not in tor2 and "graceful-restart" not in tor2
    assert "local-address" not in tor2 and "md5" not in tor2 and "ipv4 unicast" not in tor2
    assert "connect 1179;" in _block(text, "neighbor 10.0.0.9 {")
    assert "negotiated" not in text  # would repeat the negotiated block in every UPDATE
    env = conf.env
    assert env["exabgp.tcp.bind"] == "127.0.0.2 ::1" and env["exabgp.tcp.port"] == "1790"
    for key, value in {"exabgp.daemon.drop": "false", "exabgp.daemon.daemonize": "false",
                       "exabgp.daemon.pid": "", "exabgp.api.ack": "true", "exabgp.log.statistics": "false",
                       "exabgp.api.respawn": "false", "exabgp.api.cli": "false",
                       "exabgp.api.encoder": "json"}.items():
        assert env[key] == value, key


def test_duplicate_peer_address_and_unwritable_tokens():
    a, b = make_peer("a"), make_peer("b")
    with pytest.raises(ValueError, match="already used by BgpPeer a"):
        render([a, b], BgpSpeakerSpec(), [sys.executable])
    with pytest.raises(ValueError, match="cannot be written"):
        render([a], BgpSpeakerSpec(), [sys.executable, "/path with space"])
    with pytest.raises(ValueError, match="absolute"):
        render([a], BgpSpeakerSpec(), ["python3"])


def _exabgp_validate(tmp_path, conf) -> subprocess.CompletedProcess:
    path = tmp_path / "exabgp.conf"
    path.write_text(conf.text)
    (tmp_path / "empty.env").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("exabgp")}
    env.update(conf.env, EXABGP_ENVFILE=str(tmp_path / "empty.env"))
    return subprocess.run([sys.executable, "-m", "exabgp", "validate", "-n", str(path)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_exabgp_accepts_the_generated_configuration(tmp_path):
    conf, peers = _sample(tmp_path)
    r = _exabgp_validate(tmp_path, conf)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for p in peers:
        assert f"neighbor  {p.spec.peer_address}" in out, out


def test_exabgp_validation_catches_a_broken_configuration(tmp_path):
    # the check above is meaningful: the same validation refuses a bad value
    conf, _ = _sample(tmp_path)
    broken = type(conf)(conf.text.replace("hold-time 30;", "hold-time 2;"), conf.env)
    r = _exabgp_validate(tmp_path, broken)
    assert r.returncode != 0 and "holdtime must be zero or at least 3" in r.stdout + r.stderr


# ---- where ExaBGP listens (issue 12 item 8) -----------------------------------------------------


def _listen_peers():
    return [
        make_peer("active", localAddress="10.0.0.2"),
        make_peer("p4", peerAddress="10.0.0.9", localAddress="10.0.0.2", passive=True),
        make_peer("p4b", peerAddress="10.0.0.10", localAddress="10.0.0.2", passive=True),
        make_peer("p6", peerAddress="fd00::1", localAddress="fd00::2", passive=True),
    ]


def test_by_default_exabgp_listens_only_on_the_local_address_of_each_passive_peer(tmp_path):
    api = [sys.executable, "-S", "-E", RELAY, str(tmp_path / "api.sock"), "tok"]
    conf = render(_listen_peers(), BgpSpeakerSpec(listenPort=1790), api)
    assert conf.env["exabgp.tcp.bind"] == ""  # never 0.0.0.0 / ::
    assert "listen" not in _block(conf.text, "neighbor 10.0.0.1 {")
    for addr in ("10.0.0.9", "10.0.0.10", "fd00::1"):
        assert "listen 1790;" in _block(conf.text, f"neighbor {addr} {{")
    r = _exabgp_validate(tmp_path, conf)
    assert r.returncode == 0, r.stdout + r.stderr
    # no passive peer: no listener at all
    assert render(_listen_peers()[:1], BgpSpeakerSpec(), api).env["exabgp.tcp.bind"] == ""


def test_explicit_listen_addresses_replace_the_per_peer_listeners():
    conf = render(_listen_peers(), BgpSpeakerSpec(listenAddresses=["10.0.0.2"]), [sys.executable])
    assert conf.env["exabgp.tcp.bind"] == "10.0.0.2" and "listen " not in conf.text
    assert render(_listen_peers(), BgpSpeakerSpec(listenAddresses=[]), [sys.executable]).env[
        "exabgp.tcp.bind"] == ""


PASSIVE = peer_yaml("passive: true")


def test_a_passive_peer_needs_a_local_address_unless_the_speaker_lists_listen_addresses():
    from agent.config.loader import ConfigError, load_text
    from agent.config.resolve import NodeIdentity, for_node

    with pytest.raises(ValueError, match="needs localAddress"):
        render([make_peer(passive=True)], BgpSpeakerSpec(), [sys.executable])
    with pytest.raises(ConfigError) as info:
        load_text(PASSIVE, "peers.yaml")
    (p,) = info.value.problems
    assert (p.object, p.field) == ("BgpPeer/tor1", "spec.localAddress") and "passive" in p.message
    speaker = ("---\napiVersion: routeagent.io/v1alpha1\nkind: BgpSpeaker\nmetadata: {name: s}\n"
               "spec: {listenAddresses: [10.0.0.2]}\n")
    assert load_text(PASSIVE + speaker).peers[0].spec.passive
    # a nodeOverride may give the address; a node without one is refused when resolved
    override = PASSIVE + "  nodeOverrides: [{nodeName: n1, localAddress: 10.0.0.2}]\n"
    config = load_text(override)
    assert for_node(config, NodeIdentity("n1")).peers[0].spec.local_address == "10.0.0.2"
    with pytest.raises(ValueError, match="localAddress: unset on node n2"):
        for_node(config, NodeIdentity("n2"))


# ---- a peer held down after a max-prefix teardown (issue 14 item 3) ----------------------------


def test_a_held_down_peer_stays_configured_passive_with_a_key_it_does_not_know(tmp_path):
    """Removed from ExaBGP's configuration, the peer got Cease 6/3 "no session configured" on
    every retry where ExaBGP listens; held, it is never connected to and its SYNs go unanswered
    (TCP MD5 on the listening socket), so the peer's last error stays the Cease 6/1."""
    key = base64.b64encode(b"k" * 48).decode()
    api = [sys.executable, "-S", "-E", RELAY, str(tmp_path / "api.sock"), "tok"]
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    peers = [*_listen_peers(), make_peer("md5", peerAddress="10.0.0.11", md5PasswordFile=str(pw))]
    held = {name: key for name in ("active", "p4", "md5")}
    conf = render(peers, BgpSpeakerSpec(listenPort=1790), api, read_secrets(peers), held=held)
    active = _block(conf.text, "neighbor 10.0.0.1 {")
    assert "passive true;" in active and "connect" not in active and "listen" not in active
    assert f"md5-password {key};" in active and "md5-base64 true;" in active
    p4 = _block(conf.text, "neighbor 10.0.0.9 {")
    assert "passive true;" in p4 and "listen 1790;" in p4 and f"md5-password {key};" in p4
    md5 = _block(conf.text, "neighbor 10.0.0.11 {")
    assert f"md5-password {key};" in md5 and md5.count("md5-password") == 1  # not its real one
    assert "md5" not in _block(conf.text, "neighbor 10.0.0.10 {")  # not held: as configured
    assert _exabgp_validate(tmp_path, conf).returncode == 0
    glob = render(peers, BgpSpeakerSpec(listenAddresses=["10.0.0.2"]), api, read_secrets(peers), held=held)
    assert "listen " not in glob.text and f"md5-password {key};" in _block(glob.text, "neighbor 10.0.0.9 {")


# ---- GTSM (issue 14 item 9) ---------------------------------------------------------------------


@pytest.mark.parametrize("hops,minimum", [(1, 255), (2, 254), (254, 2)])
def test_ttl_security_renders_the_minimum_ttl_and_255_out(tmp_path, hops, minimum):
    """ttlSecurity N (hops, Calico's meaning; BIRD `ttl security on` + `multihop N`) is ExaBGP's
    incoming-ttl 256-N (IP_MINTTL) and outgoing-ttl 255 (RFC 5082 section 3), IPv4 and IPv6,
    active and passive; ExaBGP itself accepts the result."""
    peers = [make_peer("a", localAddress="10.0.0.2", ttlSecurity=hops),
             make_peer("p6", peerAddress="fd00::1", localAddress="fd00::2", passive=True, ttlSecurity=hops),
             make_peer("plain", peerAddress="10.0.0.9")]
    api = [sys.executable, "-S", "-E", RELAY, str(tmp_path / "api.sock"), "tok"]
    conf = render(peers, BgpSpeakerSpec(), api)
    for addr in ("10.0.0.1", "fd00::1"):
        block = _block(conf.text, f"neighbor {addr} {{")
        assert f"incoming-ttl {minimum};" in block and "outgoing-ttl 255;" in block
    assert "ttl" not in _block(conf.text, "neighbor 10.0.0.9 {")
    r = _exabgp_validate(tmp_path, conf)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ttl_security_where_exabgp_cannot_enforce_it_is_a_configuration_error():
    from agent.config.loader import ConfigError, load_text

    gtsm = peer_yaml("ttlSecurity: 1")
    assert load_text(gtsm).peers[0].spec.ttl_security == 1
    speaker = ("---\napiVersion: routeagent.io/v1alpha1\nkind: BgpSpeaker\nmetadata: {name: s}\n"
               "spec: {listenAddresses: %s}\n")
    with pytest.raises(ConfigError) as info:  # the shared listener has no IP_MINTTL
        load_text(gtsm + speaker % "[10.0.0.2]")
    (p,) = info.value.problems
    assert (p.object, p.field) == ("BgpPeer/tor1", "spec.ttlSecurity") and "listenAddresses" in p.message
    assert load_text(gtsm + speaker % "[]").peers[0].spec.ttl_security == 1  # no listener at all
    # passive peers on one local address share one listening socket, and its minimum TTL
    two = "---\n".join(
        peer_yaml(f"passive: true\n  localAddress: 10.0.0.2{extra}").replace("10.0.0.1", addr).replace("tor1", name)
        for name, addr, extra in (("a", "10.0.0.7", "\n  ttlSecurity: 1"), ("b", "10.0.0.8", "")))
    with pytest.raises(ConfigError) as info:
        load_text(two)
    (p,) = info.value.problems
    assert (p.object, p.field) == ("BgpPeer/b", "spec.ttlSecurity") and "same ttlSecurity" in p.message
