"""The ground every configuration kind stands on: field types, the model base, metadata, selectors.

DOC: every configuration object is a resource ``{apiVersion, kind, metadata, spec}`` with
``apiVersion: routeagent.io/v1alpha1``. Standalone, the agent reads them from YAML files
(`agent.config.loader`); in a cluster the same objects are CRDs whose schemas are generated from
these models (`agent.config.crds`). So the models obey the rules of a structural CRD schema:

* field names are camelCase in YAML/JSON (``alias_generator=to_camel``) and snake_case in Python
  (``populate_by_name`` lets code build models by Python name; the loader validates by alias only,
  so ``next_hops:`` in a file is an unknown field, as it would be for the API server);
* ``extra="forbid"`` everywhere: an unknown or misspelt field is an error, never silently ignored;
* no free-form dicts (the one exception is ``metadata.labels``, string to string), explicit types
  with bounds, strict scalars (``port: "9180"`` is rejected, as the API server would), attribute
  docstrings become the schema descriptions;
* every model is frozen; values with a canonical text (prefixes, addresses) are stored canonical.

Cross-field rules live in ``model_validator``s that report each violation at the exact field
(``spec.routes[2].nextHops[0].gateway``) by raising a `ValidationError` built from
`InitErrorDetails` (`_at`, `_raise`), so the loader can print a precise path for every problem.

This module owns what the kinds share: the error helpers, the validated scalar types
(`IPPrefix`, `IPAddress`, `DnsSubdomain` ...), `_Model`, `Resource` (the
apiVersion/kind/metadata/spec wrapper every kind derives from), `Metadata`, `LabelSelector` and
`unique_errors` (the "duplicate X (already in list[i])" rule). The kinds live in one module per
family (`agentconfig`, `static`, `bgp`, `policy`, `advertisement`, `nodestate`); the rules
between objects in `resolve`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Hashable, Iterable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..core.model import canonical_address
from .crd_schema import Cel

API_VERSION = "routeagent.io/v1alpha1"
U32_MAX = 2**32 - 1


# ---------------------------------------------------------------------------------------------
# Scalar types with validation and canonical form
# ---------------------------------------------------------------------------------------------


def _error(kind: str, message: str) -> PydanticCustomError:
    # No context: the message is used as is (no "{...}" templating, no "Value error, " prefix).
    return PydanticCustomError(kind, message)


_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_LABEL_VALUE_RE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def _dns_checker(kind: str, pattern: re.Pattern, limit: int, what: str):
    def check(value: str) -> str:
        if len(value) > limit or not pattern.fullmatch(value):
            raise _error(kind, f"invalid name {value!r}: a DNS-1123 {what}")
        return value
    return check


_check_dns_subdomain = _dns_checker(
    "dns_subdomain", _DNS_SUBDOMAIN_RE, 253,
    "subdomain is at most 253 characters of lowercase letters, digits, '-' and '.', "
    "starting and ending with a letter or digit")
_check_dns_label = _dns_checker(
    "dns_label", _DNS_LABEL_RE, 63,
    "label is at most 63 characters of lowercase letters, digits and '-', "
    "starting and ending with a letter or digit")


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        prefix, slash, name = key.rpartition("/")
        if (
            (slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)))
            or not name
            or len(name) > 63
            or not _LABEL_VALUE_RE.fullmatch(name)
        ):
            raise _error(
                "label_key",
                f"invalid label key {key!r}: an optional DNS subdomain prefix and '/', then at most "
                "63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
            )
        if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value):
            raise _error(
                "label_value",
                f"invalid value {value!r} of label {key!r}: at most 63 letters, digits, '-', '_' "
                "and '.', starting and ending with a letter or digit",
            )
    return labels


def _check_prefix(value: str) -> str:
    address, slash, length = value.partition("/")
    if not slash or not length.isdigit() or "%" in address:
        raise _error(
            "ip_prefix",
            f"invalid prefix {value!r}: expected an IPv4 or IPv6 network in CIDR notation, "
            "like 10.0.0.0/24 or 2001:db8::/32",
        )
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise _error("ip_prefix", f"invalid prefix {value!r}: {exc}") from None
    if net.network_address != ipaddress.ip_address(address):
        raise _error(
            "ip_prefix_host_bits",
            f"host bits set in {value}: the network is {net}",
        )
    return str(net)


def _check_address(value: str) -> str:
    if "%" in value:
        raise _error(
            "ip_address",
            f"invalid address {value!r}: no zone index ('%'), name the interface in 'device'",
        )
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        raise _error("ip_address", f"invalid address {value!r}: expected an IPv4 or IPv6 address") from None
    return canonical_address(str(addr))


def _check_gateway(value: str) -> str:
    addr = ipaddress.ip_address(value)  # already canonical
    if addr.is_unspecified or addr.is_multicast:
        raise _error("ip_gateway", f"{value} cannot be a gateway (unspecified or multicast address)")
    return value


def _check_interface(value: str) -> str:
    # The kernel's dev_valid_name(): 1..15 bytes (IFNAMSIZ 16 with the NUL), not "." or "..",
    # no '/', ':' or whitespace.
    if (
        not value
        or len(value.encode()) > 15
        or value in (".", "..")
        or any(c in "/:" or c.isspace() or c == "\0" for c in value)
    ):
        raise _error(
            "interface_name",
            f"invalid interface name {value!r}: 1 to 15 bytes, no '/', ':' or whitespace, "
            "not '.' or '..'",
        )
    return value



# The same checks as CEL rules in the CRDs (`agent.config.crd_schema.Cel`), so the API server
# refuses what these validators refuse. Kubernetes' ip()/cidr() also refuse IPv4-mapped IPv6
# addresses (::ffff:10.0.0.1), which no configuration here needs. 45 and 49 characters are the
# longest text of an IPv6 address and prefix (the lengths bound the rules' estimated cost).
_CEL_IP = Cel("isIP(self)", "must be an IPv4 or IPv6 address (no zone index)", max_length=45)
_CEL_PREFIX = Cel("isCIDR(self) && cidr(self) == cidr(self).masked()",
                  "must be a network in CIDR notation without host bits, like 10.0.0.0/24 or 2001:db8::/32",
                  max_length=49)
_CEL_GATEWAY = Cel("isIP(self) && !ip(self).isUnspecified()",
                   "must be an IPv4 or IPv6 address other than the unspecified one", max_length=45)

DnsSubdomain = Annotated[StrictStr, AfterValidator(_check_dns_subdomain)]
DnsLabel = Annotated[StrictStr, AfterValidator(_check_dns_label)]
IPPrefix = Annotated[StrictStr, AfterValidator(_check_prefix), _CEL_PREFIX]
IPAddress = Annotated[StrictStr, AfterValidator(_check_address), _CEL_IP]
Gateway = Annotated[StrictStr, AfterValidator(_check_address), AfterValidator(_check_gateway), _CEL_GATEWAY]
InterfaceName = Annotated[StrictStr, AfterValidator(_check_interface)]
Distance = Annotated[StrictInt, Field(ge=0, le=255)]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


def _raise(title: str, errors: list[InitErrorDetails]) -> None:
    """Raise all cross-field `errors` at once, each at its own location (relative to the model)."""
    if errors:
        raise ValidationError.from_exception_data(title, errors)


def _at(loc: tuple[str | int, ...], value: object, kind: str, message: str) -> InitErrorDetails:
    return InitErrorDetails(type=_error(kind, message), loc=loc, input=value)


# ---------------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------------


class Metadata(_Model):
    """Kubernetes object metadata: only what the agent uses."""

    name: DnsSubdomain
    """Object name (DNS-1123 subdomain), unique per kind. Becomes the origin name of its routes."""
    namespace: DnsLabel | None = None
    """Namespace, when the object comes from (or is meant for) a cluster."""
    labels: Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_labels)] = Field(
        default_factory=dict
    )
    """Kubernetes labels."""
    annotations: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Kubernetes annotations (kept, not used; e.g. kubectl's last-applied-configuration)."""


# ---------------------------------------------------------------------------------------------
# Label selectors (Kubernetes metav1.LabelSelector)
# ---------------------------------------------------------------------------------------------


class LabelSelectorRequirement(_Model):
    """One requirement on a label: ``In``/``NotIn`` a set of values, ``Exists``/``DoesNotExist``."""

    key: StrictStr = Field(min_length=1, max_length=317)
    """The label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values."""
    values: tuple[StrictStr, ...] = ()
    """Non-empty for In and NotIn, empty for Exists and DoesNotExist."""

    @model_validator(mode="after")
    def _values(self) -> "LabelSelectorRequirement":
        if self.operator in ("In", "NotIn") and not self.values:
            _raise(type(self).__name__, [_at(("values",), [], "values_required",
                                             f"operator {self.operator} needs at least one value")])
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            _raise(type(self).__name__, [_at(("values",), list(self.values), "values_forbidden",
                                             f"operator {self.operator} takes no values")])
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # NotIn: also true without the key


class LabelSelector(_Model):
    """A Kubernetes label selector: every matchLabels pair and every expression must hold; an
    empty selector selects everything."""

    match_labels: Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_labels)] = Field(
        default_factory=dict)
    """Labels that must be present with exactly these values."""
    match_expressions: tuple[LabelSelectorRequirement, ...] = Field((), max_length=64)
    """Further requirements, all of which must hold."""

    def matches(self, labels: dict[str, str]) -> bool:
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(e.matches(labels) for e in self.match_expressions))


T = TypeVar("T")


def unique_errors(items: Iterable[T], field: str, what: str, kind: str,
                  key: Callable[[T], Hashable | None] = lambda item: item,
                  sub: tuple[str, ...] = (), shown: Callable[[T], Any] | None = None,
                  ) -> list[InitErrorDetails]:
    """One error per item of the list `field` whose `key` an earlier item already had.

    The error stands at ``(field, i, *sub)`` and says ``duplicate WHAT SHOWN (already in
    FIELD[j])``; a key of None is never a duplicate (an unnamed statement).
    """
    shown = shown or key
    errors: list[InitErrorDetails] = []
    seen: dict[Hashable, int] = {}
    for i, item in enumerate(items):
        k = key(item)
        if k is None:
            continue
        if k in seen:
            errors.append(_at((field, i, *sub), shown(item), kind,
                              f"duplicate {what} {shown(item)} (already in {field}[{seen[k]}])"))
        else:
            seen[k] = i
    return errors


# ---------------------------------------------------------------------------------------------
# The resource wrapper
# ---------------------------------------------------------------------------------------------


class Resource(_Model):
    """A Kubernetes-shaped object. A kind derives from it, narrowing ``kind`` to a Literal of its
    name and ``spec`` to its spec model (with a default when the spec may be left out)."""

    api_version: Literal["routeagent.io/v1alpha1"] = API_VERSION
    kind: str
    metadata: Metadata
    spec: Any

    def file_problems(self) -> list[tuple[tuple[str, ...], str]]:
        """(field path, message) for each file the object names that cannot be used now.

        The loader calls it on each valid object: a configuration whose files are missing,
        unreadable or malformed is rejected before anything is applied. Validation itself never
        touches the file system (models are built in tests and from other models too)."""
        return []
