"""Service VIPs this node advertises, per selection, kept up to date one object at a time.

DOC: pure logic. `ServiceVips` receives Services and EndpointSlices one change at a time (as a
watch delivers them) and a set of named `Selection` s (which Services, and which of their
addresses, an advertisement wants). For each selection it keeps the /32 and /128 prefixes this
node should attract, and reports after every update which selections changed, so the caller
recomputes only those.

What one selection advertises from this node, for each Service whose labels its selector matches:

* Cluster IPs (``cluster_ip``): all of them; with ``internalTrafficPolicy: Local`` only when the
  node has a usable local endpoint.
* External IPs (``external_ips``) and load-balancer ingress IPs (``lb_ingress``; type LoadBalancer
  only): with ``externalTrafficPolicy: Local`` only when the node has a usable local endpoint,
  otherwise always. Ingress IPs only when the Service's class is selected: no
  ``loadBalancerClass`` iff ``lb_classes`` is empty, class C iff C is in ``lb_classes``. The class
  filter touches the ingress IPs only.

The Service is read as kube-proxy reads it, so that the node attracts exactly the traffic its
kube-proxy serves (elsewhere that traffic would be dropped or black-holed):

* Headless Services are skipped whole (kube-proxy's ``ShouldSkipService``): no VIP at all.
* Per address family: kube-proxy programs a Service in family F only when it has a cluster IP of
  family F, so an external or ingress IP of a family the Service has no cluster IP in is not
  advertised; and the local endpoints checked for an IPv4 VIP are those of the Service's IPv4
  EndpointSlices (IPv6 likewise).
* Usable local endpoint: kube-proxy's per-node rule for Local policies (both internal and
  external): the node's ready endpoints, or, when it has none, its serving-and-terminating ones.
  A Service spread over several slices is usable when any of its slices says so.

Incremental: each Service's contribution to each selection is kept (``_SelState.contrib``), and
each selection counts references per VIP (two Services may share an IP: the VIP stays while one
still gives it). A Service or slice change recomputes that one Service against every selection:
O(size of the Service x number of selections), never O(all Services). Only `set_selections` with
a new or changed selection walks every Service (for that selection only); a selection whose
selector is a bound method of an equal object (``LabelSelector.matches`` of a rebuilt, equal
configuration) counts as unchanged. An update that equals
the stored object is a no-op, so a relist costs nothing downstream.

`all_vips` is every cluster, external and ingress IP of every Service, whatever the selections,
endpoints and skip rules: the import guard refuses to learn any of them. It is reference counted
the same way and the same frozenset object is returned for as long as it does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..core.model import Prefix, address_order
from .objects import ServiceInfo, SliceInfo, ip_family

_EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Selection:
    """Which Services (by labels) and which of their addresses one advertisement wants."""

    selector: Callable[[Mapping[str, str]], bool]  # Service labels -> selected
    cluster_ip: bool = True
    external_ips: bool = True
    lb_ingress: bool = True
    lb_classes: frozenset[str] = frozenset()

    def selects_class(self, lb_class: str | None) -> bool:
        return not self.lb_classes if lb_class is None else lb_class in self.lb_classes


def _same(a: Selection, b: Selection) -> bool:
    """Equal selections; a selector that is a bound method (``LabelSelector.matches``) counts as
    equal when its function is and its object compares equal (a rebuilt configuration makes new,
    equal selector objects: no need to walk every Service again)."""
    if a == b:
        return True
    fa, fb = a.selector, b.selector
    func = getattr(fa, "__func__", None)
    return (func is not None and func is getattr(fb, "__func__", None)
            and fa.__self__ == fb.__self__ and replace(b, selector=fa) == a)


def _address_key(text: str) -> int:
    return address_order(Prefix.parse(text))


def vip(ip: str) -> str:
    """Host prefix text for canonical address text: ``10.0.0.1/32``, ``2001:db8::1/128``."""
    return f"{ip}/128" if ":" in ip else f"{ip}/32"


class _Groups(NamedTuple):
    """One Service's advertisable VIPs by kind, after policy and family rules (selection-free)."""

    cluster: frozenset[str]
    external: frozenset[str]
    lb: frozenset[str]
    lb_class: str | None


class _SelState:
    __slots__ = ("selection", "contrib", "refs", "cache")

    def __init__(self, selection: Selection):
        self.selection = selection
        self.contrib: dict[str, frozenset[str]] = {}  # service key -> its VIPs (non-empty only)
        self.refs: dict[str, int] = {}  # VIP -> number of Services giving it
        self.cache: tuple[str, ...] | None = None

    def apply(self, old: frozenset[str], new: frozenset[str]) -> bool:
        """Move the reference counts from `old` to `new`; True when the VIP set changed."""
        changed = _move(self.refs, old, new)
        if changed:
            self.cache = None
        return changed


def _move(refs: dict[str, int], old: frozenset[str], new: frozenset[str]) -> bool:
    changed = False
    for v in old - new:
        n = refs[v] - 1
        if n:
            refs[v] = n
        else:
            del refs[v]
            changed = True
    for v in new - old:
        n = refs.get(v, 0)
        refs[v] = n + 1
        changed = changed or not n
    return changed


class ServiceVips:
    """Per-selection VIPs of this node, from Services and EndpointSlices fed one at a time.

    Service keys must be ``ns/name`` (`ServiceInfo.key`): slices find their Service by it.
    """

    def __init__(self, node_name: str):
        self.node_name = node_name
        self._sel: dict[str, _SelState] = {}
        self._services: dict[str, ServiceInfo] = {}
        self._slices: dict[str, SliceInfo] = {}
        self._slices_of: dict[str, dict[str, SliceInfo]] = {}  # service key -> slice key -> slice
        self._groups: dict[str, _Groups] = {}  # service key -> its advertisable VIPs
        self._all_contrib: dict[str, frozenset[str]] = {}
        self._all_refs: dict[str, int] = {}
        self._all_cache: frozenset[str] | None = _EMPTY

    # --- inputs ---------------------------------------------------------------------------------

    def set_selections(self, selections: Mapping[str, Selection]) -> set[str]:
        """Replace the selections; names whose VIPs changed (an unchanged selection costs O(1))."""
        changed: set[str] = set()
        for name in [n for n in self._sel if n not in selections]:
            if self._sel.pop(name).refs:
                changed.add(name)
        for name, selection in selections.items():
            old = self._sel.get(name)
            if old is not None and _same(old.selection, selection):
                continue
            state = _SelState(selection)
            for key, groups in self._groups.items():
                new = self._select(selection, self._services[key], groups)
                if new:
                    state.contrib[key] = new
                    _move(state.refs, _EMPTY, new)
            before = old.refs.keys() if old is not None else _EMPTY
            if before != state.refs.keys():
                changed.add(name)
            self._sel[name] = state
        return changed

    def update_service(self, key: str, svc: ServiceInfo | None) -> set[str]:
        """A Service was added, changed or (None) deleted; names of the selections that changed."""
        old = self._services.get(key)
        if svc == old:
            return set()
        if svc is None:
            del self._services[key]
        else:
            self._services[key] = svc
        self._set_all(key, _all_of(svc))
        return self._recompute(key)

    def update_slice(self, key: str, sl: SliceInfo | None) -> set[str]:
        """An EndpointSlice was added, changed or (None) deleted; names of the selections that changed.

        A slice may move from one Service to another (its label changed): both are recomputed.
        Slices of a Service not (yet) known are kept and used once it arrives.
        """
        old = self._slices.get(key)
        if sl == old:
            return set()
        touched: list[str] = []
        if old is not None:
            members = self._slices_of[old.service]
            del members[key]
            if not members:
                del self._slices_of[old.service]
            touched.append(old.service)
        if sl is None:
            del self._slices[key]
        else:
            self._slices[key] = sl
            self._slices_of.setdefault(sl.service, {})[key] = sl
            if sl.service not in touched:
                touched.append(sl.service)
        changed: set[str] = set()
        for service in touched:
            if service in self._services:
                changed |= self._recompute(service)
        return changed

    # --- outputs --------------------------------------------------------------------------------

    def vips(self, name: str) -> tuple[str, ...]:
        """The prefixes selection `name` advertises from this node: IPv4 first, then by address."""
        state = self._sel.get(name)
        if state is None:
            return ()
        if state.cache is None:
            state.cache = tuple(sorted(state.refs, key=_address_key))
        return state.cache

    def all_vips(self) -> frozenset[str]:
        """Every VIP of every Service in the cluster (for the import guard)."""
        if self._all_cache is None:
            self._all_cache = frozenset(self._all_refs)
        return self._all_cache

    # --- per-service work -----------------------------------------------------------------------

    def _recompute(self, key: str) -> set[str]:
        """Recompute one Service against every selection; names of the selections that changed."""
        svc = self._services.get(key)
        groups = None if svc is None else self._advertisable(key, svc)
        if groups is None:
            self._groups.pop(key, None)
        else:
            self._groups[key] = groups
        changed: set[str] = set()
        for name, state in self._sel.items():
            new = _EMPTY if groups is None else self._select(state.selection, svc, groups)
            old = state.contrib.get(key, _EMPTY)
            if new == old:
                continue
            if new:
                state.contrib[key] = new
            else:
                del state.contrib[key]
            if state.apply(old, new):
                changed.add(name)
        return changed

    def _local_families(self, key: str) -> set[int]:
        """Families in which this node has a usable local endpoint of Service `key`.

        kube-proxy's rule for Local policies, per node: the ready local endpoints, or, when there
        are none, the serving-and-terminating local ones. Either way the node has some exactly
        when it is in some slice's ``serving_nodes`` (ready or serving-and-terminating).
        """
        node = self.node_name
        return {sl.family for sl in self._slices_of.get(key, {}).values() if node in sl.serving_nodes}

    def _advertisable(self, key: str, svc: ServiceInfo) -> _Groups | None:
        if not svc.cluster_ips:  # headless: kube-proxy skips the Service
            return None
        families = {ip_family(ip) for ip in svc.cluster_ips}
        local = self._local_families(key) if svc.itp_local or svc.etp_local else None

        def keep(ips: tuple[str, ...], local_only: bool) -> frozenset[str]:
            return frozenset(vip(ip) for ip in ips if ip_family(ip) in families
                             and (not local_only or ip_family(ip) in local))

        return _Groups(keep(svc.cluster_ips, svc.itp_local), keep(svc.external_ips, svc.etp_local),
                       keep(svc.lb_ips, svc.etp_local) if svc.type == "LoadBalancer" else _EMPTY,
                       svc.lb_class)

    @staticmethod
    def _select(sel: Selection, svc: ServiceInfo, groups: _Groups) -> frozenset[str]:
        if not sel.selector(svc.labels):
            return _EMPTY
        out = _EMPTY
        if sel.cluster_ip:
            out = groups.cluster
        if sel.external_ips and groups.external:
            out = out | groups.external
        if sel.lb_ingress and groups.lb and sel.selects_class(groups.lb_class):
            out = out | groups.lb
        return out

    def _set_all(self, key: str, new: frozenset[str]) -> None:
        old = self._all_contrib.get(key, _EMPTY)
        if new == old:
            return
        if new:
            self._all_contrib[key] = new
        else:
            del self._all_contrib[key]
        if _move(self._all_refs, old, new):
            self._all_cache = None


def _all_of(svc: ServiceInfo | None) -> frozenset[str]:
    if svc is None:
        return _EMPTY
    return frozenset(vip(ip) for ip in svc.cluster_ips + svc.external_ips + svc.lb_ips)
