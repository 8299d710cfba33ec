"""Policy conditions: closures ``(prefix, nexthop, attrs) -> bool`` built once per statement.

DOC: prefix sets, community and large-community sets (any/all/none), AS-path contains and regex
(with a small result cache keyed by the path tuple: many routes share a path), origin AS, next
hop in a set of prefixes, and labels. Caches are bounded (`CACHE_LIMIT`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..core.model import Prefix
from .aspath import compile_as_path_regex
from .prefixes import PrefixIndex, PrefixSet, host_prefix
from .verdict import CACHE_LIMIT


# ---------------------------------------------------------------------------------------------
# Conditions: closures (prefix, nexthop, attrs) -> bool
# ---------------------------------------------------------------------------------------------

Condition = Callable[[Prefix, Any, Any], bool]


def _bounded(cache: dict) -> None:
    if len(cache) >= CACHE_LIMIT:
        cache.clear()


PREFIX_SET = "prefix_set"  # the name of the one condition that reads the prefix


def prefix_set_condition(pset: PrefixSet) -> Condition:
    match = pset.match

    def prefix_set(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        return match(prefix)

    return prefix_set


def set_condition(field: str, mode: str, values: Iterable[str]) -> Condition:
    wanted = frozenset(values)
    if mode == "any":
        if field == "communities":
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return not wanted.isdisjoint(attrs.communities)
        else:
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return not wanted.isdisjoint(attrs.large_communities)
    elif mode == "all":
        if field == "communities":
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.issubset(attrs.communities)
        else:
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.issubset(attrs.large_communities)
    else:  # none
        if field == "communities":
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.isdisjoint(attrs.communities)
        else:
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.isdisjoint(attrs.large_communities)
    cond.__name__ = f"{field}_{mode}"
    return cond


def as_path_contains(asns: Iterable[int]) -> Condition:
    wanted = frozenset(asns)

    def as_path_contains(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        return not wanted.isdisjoint(attrs.as_path)

    return as_path_contains


def as_path_regex(text: str) -> Condition:
    search = compile_as_path_regex(text).search
    cache: dict[tuple[int, ...], bool] = {}

    def as_path_regex(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        path = attrs.as_path
        hit = cache.get(path)
        if hit is None:
            hit = search(" ".join(map(str, path))) is not None
            _bounded(cache)
            cache[path] = hit
        return hit

    return as_path_regex


def origin_as(asns: frozenset[int], peer_as: int) -> Condition:
    def origin_as(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        path = attrs.as_path
        return (path[-1] if path else peer_as) in asns

    return origin_as


def next_hop_in(index: PrefixIndex) -> Condition:
    cache: dict[Any, bool] = {}

    def next_hop_in(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        hit = cache.get(nexthop)
        if hit is None:
            try:
                hit = index.covering(host_prefix(nexthop)) is not None
            except (OSError, TypeError, ValueError):
                hit = False  # no next hop, "self", or not an address
            _bounded(cache)
            cache[nexthop] = hit
        return hit

    return next_hop_in


def labels_condition(want: dict[str, str]) -> Condition:
    """Export: the advertisement carries all of `want` (routes without labels never match)."""
    items = tuple(want.items())

    def labels(prefix, nexthop, attrs) -> bool:
        have = getattr(attrs, "labels", None)
        return have is not None and all(have.get(k) == v for k, v in items)

    return labels


