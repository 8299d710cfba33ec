"""Bad configurations for bench/chaos.py's bad-configs scenario: mutations of one valid config.

DOC: `valid_docs()` is the scenario's good configuration (AgentConfig, the BgpPeer of the lab's
ToR, StaticRoutes with a few blackholes, so some of our routes come from the config itself).
`generate(n, seed, huge_mb)` returns at least `n` (category, bytes) pairs:

* random mutations of the valid documents, each checked with the agent's own loader
  (`agent.config.loader.load_path`) and kept only when the loader rejects it (a mutation that
  happens to be valid, e.g. a changed metric, is not a bad config): wrong_type (a leaf replaced by a
  value of another type), unknown_field, invalid_prefix, duplicate_name (same kind and name twice,
  two AgentConfigs, two BgpPeers for one address), duplicate_key (a mapping key written twice),
  missing_field, bad_enum, bad_number (out of range), not_mapping (a document that is a list or a
  scalar), bad_yaml (syntax errors: tabs, unclosed brackets, truncated files);
* fixed specials: empty (empty file, blank, comments only, ``---``, ``null``: an empty
  configuration, reported separately by the scenario), binary (random bytes, NULs, invalid UTF-8,
  a UTF-16 file), unsafe_tag (``!!python/object/apply``), deep_nesting (lists/mappings nested
  100 ... 100,000 deep), huge (a StaticRoutes of many routes with one bad prefix, a multi-MiB string,
  thousands of documents; about `huge_mb` MiB each), alias_bomb ("billion laughs" of 10^4 ... 10^9
  references, and a recursive alias). The expensive specials come last, so a hang or a crash they
  cause happens after the cheap cases have been measured.
"""

from __future__ import annotations

import copy
import os
import random
import tempfile

import yaml

API = "routeagent.io/v1alpha1"


def valid_docs(peer_addr: str, peer_as: int, local_addr: str, local_as: int, hold: int) -> list[dict]:
    return [
        {"apiVersion": API, "kind": "AgentConfig", "metadata": {"name": "node"},
         "spec": {"fib": {"table": 254, "protocol": 201, "metric": 20, "fullScanSeconds": 60,
                          "staleSeconds": 60},
                  "adminDistance": {"connected": 0, "kernel": 0, "static": 1, "ebgp": 20, "ibgp": 200},
                  "maxPaths": 16, "api": {"address": "127.0.0.1", "port": 9180}}},
        {"apiVersion": API, "kind": "BgpPeer", "metadata": {"name": "tor"},
         "spec": {"peerAddress": peer_addr, "peerAS": peer_as, "localAS": local_as, "routerId": local_addr,
                  "localAddress": local_addr, "holdTime": hold, "importPolicy": "acceptAll"}},
        {"apiVersion": API, "kind": "StaticRoutes", "metadata": {"name": "chaos", "labels": {"app": "chaos"}},
         "spec": {"routes": [
             {"prefix": "10.200.1.0/24", "blackhole": True},
             {"prefix": "10.200.2.0/24", "nextHops": [{"gateway": "10.9.0.1", "device": "flap0"}]},
             {"prefix": "10.200.3.0/24", "distance": 5, "nextHops": [{"gateway": "10.9.0.1"}]},
             {"prefix": "10.200.4.0/24", "nextHops": [{"gateway": "10.9.0.1", "weight": 2},
                                                      {"gateway": "10.9.0.2", "weight": 1}]},
         ]}},
    ]


def dump(docs: list) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


# ------------------------------------------------------------------------------------------------
# random mutations

_VALUES = ["a string", 12345, -1, 3.5, True, False, None, [1, 2], {"x": 1}, "", "0x10", 2**70, "yes",
           "10.0.0.0/8", [], {}]
_BAD_PREFIXES = ["10.0.0.1/24", "300.0.0.0/8", "10.0.0.0/33", "::/129", "fd00::1/64", "10.0.0.0",
                 "not-a-prefix", "10.0.0.0/-1", "10.0.0.0/8/8", " 10.0.0.0/8", "10.0.0.0/08", "1.2.3.4.5/32",
                 "0x0a000000/8", "10.0.0.0/24\n", "fe80::/10%eth0", 167772160, ["10.0.0.0/8"], None]
_UNKNOWN_KEYS = ["foo", "next_hops", "nexthops", "Spec", "prefixes", "routes2", "peer_address", "table ",
                 "metadata2", "status", "extra", "ÿ", "x" * 300]
_LONG_NAMES = ["", "UPPER", "under_score", "a" * 300, "-lead", "trail-", "dot..dot", "sp ace", "ünï"]


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))
    else:
        yield path


def _containers(obj, path=()):
    if isinstance(obj, dict):
        yield path
        for k, v in obj.items():
            yield from _containers(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _containers(v, path + (i,))


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _set(obj, path, value):
    _get(obj, path[:-1])[path[-1]] = value


def _mutate(rng: random.Random, base: list[dict]) -> tuple[str, str]:
    docs = copy.deepcopy(base)
    kind = rng.choice(["wrong_type", "wrong_type", "unknown_field", "invalid_prefix", "invalid_prefix",
                       "duplicate_name", "duplicate_key", "missing_field", "bad_enum", "bad_number",
                       "not_mapping", "bad_yaml", "bad_name"])
    d = rng.randrange(len(docs))
    if kind == "wrong_type":
        path = rng.choice(list(_leaves(docs[d])))
        old = _get(docs[d], path)
        new = rng.choice([v for v in _VALUES if type(v) is not type(old)])
        _set(docs[d], path, new)
    elif kind == "unknown_field":
        path = rng.choice(list(_containers(docs[d])))
        target = _get(docs[d], path)
        if isinstance(target, dict):
            target[rng.choice(_UNKNOWN_KEYS)] = rng.choice(_VALUES)
        else:
            target.append({rng.choice(_UNKNOWN_KEYS): 1})
    elif kind == "invalid_prefix":
        routes = docs[2]["spec"]["routes"]
        r = rng.randrange(len(routes))
        choice = rng.random()
        if choice < 0.6:
            routes[r]["prefix"] = rng.choice(_BAD_PREFIXES)
        elif choice < 0.8:
            routes[r].setdefault("nextHops", [{}])
            routes[r].pop("blackhole", None)
            routes[r]["nextHops"][0]["gateway"] = rng.choice(["fd00::1", "10.0.0.256", "10.9.0.1/24", "gw", 5])
        else:
            docs[0]["spec"]["protectedPrefixes"] = [rng.choice(_BAD_PREFIXES)]
    elif kind == "duplicate_name":
        which = rng.random()
        if which < 0.4:
            docs.append(copy.deepcopy(docs[d]))  # same kind and name (also: two AgentConfigs)
        elif which < 0.7:
            peer = copy.deepcopy(docs[1])
            peer["metadata"]["name"] = "tor-bis"  # another BgpPeer, same peerAddress
            docs.append(peer)
        else:
            routes = docs[2]["spec"]["routes"]
            routes.append(copy.deepcopy(routes[rng.randrange(len(routes))]))  # duplicate prefix
    elif kind == "duplicate_key":
        text = dump(docs)
        lines = text.splitlines()
        candidates = [i for i, l in enumerate(lines) if ":" in l and not l.strip().startswith("-")
                      and not l.rstrip().endswith(":")]
        i = rng.choice(candidates)
        lines.insert(i + 1, lines[i])
        return kind, "\n".join(lines) + "\n"
    elif kind == "missing_field":
        required = [("metadata",), ("metadata", "name"), ("spec", "peerAddress"), ("spec", "peerAS"),
                    ("spec", "localAS"), ("kind",), ("apiVersion",)]
        if d == 2:
            required += [("spec", "routes", 0, "prefix"), ("spec",)]
        path = rng.choice([p for p in required if _has(docs[d], p)])
        del _get(docs[d], path[:-1])[path[-1]]
    elif kind == "bad_enum":
        choice = rng.random()
        if choice < 0.3:
            docs[d]["kind"] = rng.choice(["agentconfig", "BGPPeer", "Route", "StaticRoute", ""])
        elif choice < 0.6:
            docs[d]["apiVersion"] = rng.choice(["routeagent.io/v1", "v1", "routeagent.io/v1alpha2", ""])
        else:
            docs[1]["spec"]["importPolicy"] = rng.choice(["acceptall", "nope", "", "rejectAll "])
    elif kind == "bad_number":
        path, value = rng.choice([
            (("spec", "fib", "table"), 0), (("spec", "fib", "table"), 2**32), (("spec", "fib", "protocol"), 256),
            (("spec", "fib", "protocol"), 2), (("spec", "fib", "metric"), -5), (("spec", "maxPaths"), 0),
            (("spec", "maxPaths"), 100000), (("spec", "fib", "fullScanSeconds"), 0),
            (("spec", "api", "port"), 70000), (("spec", "adminDistance", "ebgp"), 256)])
        _set(docs[0], path, value)
        if rng.random() < 0.3:
            d = 1
            _set(docs[1], ("spec", rng.choice(["peerAS", "localAS", "holdTime"])), rng.choice([-1, 2**32, 70000]))
    elif kind == "not_mapping":
        docs[d] = rng.choice([[docs[d]], "just a string", 42, [1, 2, 3], True])
    elif kind == "bad_name":
        docs[d]["metadata"]["name"] = rng.choice(_LONG_NAMES)
    else:  # bad_yaml
        text = dump(docs)
        choice = rng.random()
        if choice < 0.25:
            cut = rng.randrange(len(text) // 3, len(text) - 1)
            return kind, text[:cut] + "\n  - [unclosed, {\n"
        if choice < 0.5:
            return kind, text.replace("  ", "\t", 1)
        if choice < 0.75:
            return kind, text + "key: value: another\n"
        return kind, text.replace("spec:", "spec: &x\n  *y", 1)
    return kind, dump(docs)


def _has(obj, path) -> bool:
    try:
        _get(obj, path)
        return True
    except (KeyError, IndexError, TypeError):
        return False


# ------------------------------------------------------------------------------------------------
# specials

def _empty() -> list[tuple[str, bytes]]:
    return [("empty", t) for t in (b"", b"\n\n   \n", b"# only a comment\n", b"---\n", b"---\n...\n", b"null\n",
                                    b"--- \n---\n---\n", b"~\n")]


def _binary(rng: random.Random) -> list[tuple[str, bytes]]:
    out = [("binary", bytes(rng.randrange(256) for _ in range(n))) for n in (1, 16, 512, 4096, 65536)]
    out += [("binary", b"\0" * 1024), ("binary", b"apiVersion: routeagent.io/v1alpha1\0\nkind: AgentConfig\n"),
            ("binary", b"\xff\xfe" + "apiVersion: x\n".encode("utf-16-le")),
            ("binary", b"kind: \xc3\x28\n"),
            ("binary", "\ufeffapiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata: {name: a}\nspec: {maxPaths: x}\n".encode())]
    return out


def _unsafe() -> list[tuple[str, bytes]]:
    return [("unsafe_tag", t.encode()) for t in (
        "!!python/object/apply:os.system ['touch /tmp/route-agent-chaos-pwned']\n",
        "apiVersion: !!python/name:os.system\nkind: AgentConfig\n",
        "a: !!binary AAAA\nkind: !custom x\n",
        "apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata: {name: n}\nspec: !!set {a, b}\n")]


def _deep() -> list[tuple[str, bytes]]:
    out = []
    for depth in (100, 1000, 10000, 100000):
        out.append(("deep_nesting", ("apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata: {name: n}\n"
                                     "spec: " + "[" * depth + "]" * depth + "\n").encode()))
        out.append(("deep_nesting", ("apiVersion: routeagent.io/v1alpha1\nkind: StaticRoutes\nmetadata: {name: n}\n"
                                     "spec: " + "{a: " * depth + "1" + "}" * depth + "\n").encode()))
    # block style nesting (indentation), 2,000 levels
    lines = ["apiVersion: routeagent.io/v1alpha1", "kind: AgentConfig", "metadata: {name: n}", "spec:"]
    lines += [" " * (2 * i + 2) + f"k{i}:" for i in range(2000)]
    out.append(("deep_nesting", ("\n".join(lines) + " 1\n").encode()))
    return out


def _huge(mb: float, base: list[dict]) -> list[tuple[str, bytes]]:
    size = int(mb * (1 << 20))
    n_routes = max(1000, size // 48)
    routes = "".join(f"    - prefix: 10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}/32\n      blackhole: true\n"
                     for i in range(n_routes))
    many_routes = (f"apiVersion: {API}\nkind: StaticRoutes\nmetadata: {{name: huge}}\nspec:\n  routes:\n"
                   + routes + "    - prefix: 10.0.0.1/8\n      blackhole: true\n")
    big_string = dump(base[:2]) + f"---\napiVersion: {API}\nkind: StaticRoutes\nmetadata:\n  name: s\n  labels:\n    big: \"" + "x" * size + "\"\nspec: {routes: [{prefix: 1.2.3.4/8, blackhole: true}]}\n"
    n_docs = max(100, size // 120)
    many_docs = dump(base) + "".join(f"---\napiVersion: {API}\nkind: StaticRoutes\nmetadata: {{name: s{i}}}\nspec: {{routes: []}}\n"
                                     for i in range(n_docs)) + "---\nkind: Nope\n"
    return [("huge", many_routes.encode()), ("huge", big_string.encode()), ("huge", many_docs.encode())]


def _bombs() -> list[tuple[str, bytes]]:
    out = []
    for levels, width in ((4, 10), (6, 10), (9, 10)):
        lines = [f"apiVersion: {API}", "kind: StaticRoutes", "metadata: {name: bomb}", "x0: &a0 [lol, lol]"]
        for i in range(1, levels + 1):
            lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
        for where in ("spec: {routes: *a%d}" % levels, "spec: {routes: [{prefix: 10.0.0.0/8, nextHops: *a%d}]}" % levels):
            out.append(("alias_bomb", ("\n".join(lines) + "\n" + where + "\n").encode()))
    out.append(("alias_bomb", f"apiVersion: {API}\nkind: StaticRoutes\nmetadata: {{name: r}}\nspec: &s {{routes: [*s]}}\n".encode()))
    out.append(("alias_bomb", f"apiVersion: {API}\nkind: AgentConfig\nmetadata: &m {{name: r, labels: *m}}\nspec: {{}}\n".encode()))
    return out


def generate(n: int, seed: int, huge_mb: float, base: list[dict]) -> list[tuple[str, bytes]]:
    """At least `n` bad configurations (category, file bytes); see the module doc."""
    from agent.config.loader import ConfigError, load_path

    rng = random.Random(seed)
    cheap = _empty() + _binary(rng) + _unsafe()
    risky = _deep() + _huge(huge_mb, base) + _bombs()
    want = max(0, n - len(cheap) - len(risky))
    mutants: list[tuple[str, bytes]] = []
    seen: set[bytes] = set()
    with tempfile.TemporaryDirectory(prefix="chaos-cfg-") as tmp:
        path = os.path.join(tmp, "agent.yaml")
        tries = 0
        while len(mutants) < want and tries < want * 20:
            tries += 1
            kind, text = _mutate(rng, base)
            data = text.encode()
            if data in seen:
                continue
            with open(path, "wb") as f:
                f.write(data)
            try:
                load_path(tmp)
            except ConfigError:
                seen.add(data)
                mutants.append((kind, data))
            except Exception as exc:  # the loader itself blew up: certainly a bad config to try
                seen.add(data)
                mutants.append((f"{kind}!{type(exc).__name__}", data))
    first = mutants + cheap
    rng.shuffle(first)
    return first + risky
