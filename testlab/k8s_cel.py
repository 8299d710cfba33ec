"""CEL as the Kubernetes API server evaluates it, for the test API server and the tests.

DOC: `rule_errors(rules, value, old)` evaluates a schema's ``x-kubernetes-validations`` against one
value with `celpy` (cel-python, pure Python) and returns the messages of the rules that do not
hold. Kubernetes adds libraries to standard CEL; the part the route-agent CRDs and admission policy
use is here, with the API server's semantics (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go):

* ``isIP(s)``, ``ip(s)``: an IPv4 or IPv6 address without zone, IPv4-mapped IPv6 refused;
  ``ip.family()``, ``ip.isUnspecified()``, ``ip.isLoopback()``, ``ip.isLinkLocalUnicast()``,
  ``ip.isGlobalUnicast()``;
* ``isCIDR(s)``, ``cidr(s)``: an address and a length (host bits allowed), same address rules;
  ``cidr.ip()``, ``cidr.masked()``, ``cidr.prefixLength()``, ``cidr.containsIP(ip or string)``,
  ``==`` between two CIDRs (address and length).

A rule that fails to evaluate (an error value, e.g. ``ip('x')``) counts as not holding, as the API
server reports it as invalid. ``oldSelf`` is bound when an old value is given (transition rules).
`evaluate(expression, activation)` runs any expression (the admission policy's tests use it).
Compiled programs are cached per expression.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

import celpy
from celpy import celtypes

_ENV = celpy.Environment()


class CelError(Exception):
    """An expression does not compile or its result is not a boolean."""


class IP:
    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and self.addr == other.addr

    def __hash__(self) -> int:
        return hash(self.addr)

    def __repr__(self) -> str:
        return f"ip({str(self.addr)!r})"


class CIDR:
    def __init__(self, iface: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> None:
        self.iface = iface

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CIDR) and self.iface.ip == other.iface.ip
                and self.iface.network.prefixlen == other.iface.network.prefixlen)

    def __hash__(self) -> int:
        return hash((self.iface.ip, self.iface.network.prefixlen))

    def __repr__(self) -> str:
        return f"cidr({str(self.iface)!r})"


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in text:
        raise ValueError(f"IP address with zone value is not allowed: {text}")
    addr = ipaddress.ip_address(text)
    if addr.version == 6 and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address is not allowed: {text}")
    return addr


def _parse_cidr(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    address, slash, length = text.partition("/")
    if not slash or not length.isdigit() or (len(length) > 1 and length[0] == "0"):
        raise ValueError(f"invalid CIDR {text!r}")
    _parse_ip(address)
    return ipaddress.ip_interface(text)


def _bool(fn) -> celtypes.BoolType:
    try:
        fn()
        return celtypes.BoolType(True)
    except ValueError:
        return celtypes.BoolType(False)


def _is_ip(value) -> celtypes.BoolType:
    return _bool(lambda: _parse_ip(str(value)))


def _is_cidr(value) -> celtypes.BoolType:
    return _bool(lambda: _parse_cidr(str(value)))


def _ip(value) -> IP:
    if isinstance(value, CIDR):  # cidr.ip()
        return IP(value.iface.ip)
    return IP(_parse_ip(str(value)))


def _cidr(value) -> CIDR:
    return CIDR(_parse_cidr(str(value)))


def _family(ip: IP) -> celtypes.IntType:
    return celtypes.IntType(ip.addr.version)


def _masked(c: CIDR) -> CIDR:
    net = c.iface.network
    return CIDR(ipaddress.ip_interface(f"{net.network_address}/{net.prefixlen}"))


def _contains_ip(c: CIDR, other) -> celtypes.BoolType:
    ip = other.addr if isinstance(other, IP) else _parse_ip(str(other))
    return celtypes.BoolType(ip in c.iface.network)


def _pred(attr: str):
    return lambda ip: celtypes.BoolType(bool(getattr(ip.addr, attr)))


FUNCTIONS = {
    "isIP": _is_ip, "ip": _ip, "family": _family, "isCIDR": _is_cidr, "cidr": _cidr,
    "masked": _masked, "prefixLength": lambda c: celtypes.IntType(c.iface.network.prefixlen),
    "containsIP": _contains_ip,
    "isUnspecified": _pred("is_unspecified"), "isLoopback": _pred("is_loopback"),
    "isLinkLocalUnicast": lambda ip: celtypes.BoolType(ip.addr.is_link_local and not ip.addr.is_multicast),
    "isGlobalUnicast": lambda ip: celtypes.BoolType(
        not (ip.addr.is_unspecified or ip.addr.is_loopback or ip.addr.is_multicast or ip.addr.is_link_local)),
}


@functools.lru_cache(maxsize=512)
def _program(expression: str):
    try:
        return _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)
    except Exception as exc:  # celpy's CELParseError and friends
        raise CelError(f"{expression!r} does not compile: {exc}") from None


def to_cel(value: Any):
    return celpy.json_to_cel(value)


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """The value of `expression` (activation values are JSON-like, converted here); a CEL error
    value or an exception of a library function becomes `CelError`."""
    try:
        result = _program(expression).evaluate({k: to_cel(v) for k, v in activation.items()})
    except CelError:
        raise
    except Exception as exc:
        raise CelError(f"{expression!r}: {exc}") from None
    if isinstance(result, celpy.CELEvalError) or isinstance(result, Exception):
        raise CelError(f"{expression!r}: {result}")
    return result


def holds(expression: str, activation: dict[str, Any]) -> bool:
    """Whether a rule holds; an evaluation error counts as not holding."""
    try:
        result = evaluate(expression, activation)
    except CelError as exc:
        if "does not compile" in str(exc):
            raise
        return False
    if not isinstance(result, celtypes.BoolType):
        raise CelError(f"{expression!r} gave {result!r}, not a boolean")
    return bool(result)


def rule_errors(rules: list[dict], value: Any, old: Any = None) -> list[tuple[str, str]]:
    """``(fieldPath, message)`` of each rule of ``x-kubernetes-validations`` that does not hold."""
    out = []
    for rule in rules:
        activation = {"self": value}
        if old is not None:
            activation["oldSelf"] = old
        elif "oldSelf" in rule["rule"]:
            continue  # a transition rule: only on update
        if not holds(rule["rule"], activation):
            out.append((rule.get("fieldPath", ""), rule.get("message") or f"failed rule: {rule['rule']}"))
    return out
