"""The text tables of `route-agent show ...`: pure functions from the API's decoded JSON to lines.

DOC: every `show` view is one table in the style of `birdc show protocols` and vtysh `show bgp
summary`: a header row, then one row per entry; columns are left-aligned, separated by two spaces,
each as wide as its widest cell (header included), and the last column is not padded (it holds the
free text: BGP attributes, reasons), so no line ends in blanks. Nothing here has a fixed width: a
long peer name or an IPv6 prefix widens its column instead of shifting the ones after it.

An entry that needs several rows (a RIB prefix with several candidates, a peer with two address
families, an advertised prefix sent to several peers) names itself on its first row only; its
continuation rows leave those cells blank. `*` in the first column of `show rib` marks a prefix whose
winner is in the kernel. An empty view prints its header and one line such as ``(no routes)``.

`show rib` streams: the CLI fetches the RIB in pages and hands each page to `rib_page`, which
sizes the columns from that page and the widths used so far (they only grow). When a page needs a
wider column than the rows above it, the header is printed again before that page, so every row
lines up with the nearest header above it, and a RIB of any size is never held in memory; a RIB
that fits in one page (RIB_PAGE rows) prints exactly one header. The module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SEP = "  "
Row = tuple[str, ...]

PEER_COLUMNS = ("Name", "Address", "AS", "Type", "State", "Up/Down", "Family", "Recv", "Accept", "Reject",
                "Inst", "Max-prefix", "Info")
RIB_COLUMNS = (" ", "Prefix", "Decided-by", "Status", "Origin", "Distance", "Route", "Info")
ADVERT_COLUMNS = ("Prefix", "Peer", "State", "Next-hop", "Policy", "Sources", "Attributes")
FIB_COLUMNS = ("Prefix", "State", "Route")
NEXTHOP_COLUMNS = ("Nexthop",)
WINNING = ("best", "multipath")  # candidate statuses of a RIB winner


# ---- the table itself ----------------------------------------------------------------------
def _cell(value) -> str:
    """A cell's text on one line (an error message with a newline must not break the table)."""
    return " ".join(str(value).split("\n")) if value is not None else "-"


def widths(header: Sequence[str], rows: Iterable[Row], start: Sequence[int] = ()) -> tuple[int, ...]:
    """Column widths for `rows` under `header`, never narrower than `start` (the last column is
    not padded, so its width is not counted)."""
    out = [max(len(h), *(start[i:i + 1] or [0])) for i, h in enumerate(header[:-1])]
    for row in rows:
        for i in range(len(out)):
            out[i] = max(out[i], len(row[i]))
    return tuple(out)


def line(cells: Row, w: Sequence[int]) -> str:
    """One row: every cell but the last padded to its column's width, trailing blanks removed."""
    return SEP.join([c.ljust(n) for c, n in zip(cells, w)] + [cells[-1]]).rstrip()


def table(header: Sequence[str], rows: Sequence[Row], empty: str) -> list[str]:
    """A whole table: the header, then the rows or, when there are none, `empty` (``(no peers)``)."""
    w = widths(header, rows)
    return [line(tuple(header), w)] + ([line(r, w) for r in rows] if rows else [empty])


# ---- show peers ------------------------------------------------------------------------------
def duration(seconds: float | None) -> str:
    """Time in the current state as vtysh's Up/Down column prints it: 00:01:23, 1d02h03m, 2w3d04h."""
    if seconds is None:
        return "-"
    s = int(seconds)
    d, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d == 0:
        return f"{h:02d}:{m:02d}:{s:02d}"
    if d < 7:
        return f"{d}d{h:02d}h{m:02d}m"
    return f"{d // 7}w{d % 7}d{h:02d}h"


def _max_prefix(mp: dict | None) -> str:
    return f"{mp['count']}/{mp['limit']} {mp['state']}" if mp else "-"


def _bfd_text(b: dict | None) -> str:
    """A peer's BFD session for the Info column (empty without BFD)."""
    if not b:
        return ""
    text = f"bfd {b['state']} ({b['minRx']}/{b['minTx']} ms x{b['multiplier']}"
    if b["detectionMs"] is not None:
        text += f", detection {b['detectionMs']:.0f} ms"
    text += ")"
    if b["state"] != "up":
        text += f", {b['routesHeld']} routes held until bfd is up"
    if b["error"]:
        text += f", {b['error']}"
    return text


def peer_rows(peers: Sequence[dict]) -> list[Row]:
    """One row per peer and address family; the peer's own cells on its first row only."""
    rows: list[Row] = []
    for p in peers:
        info = "; ".join(x for x in (p["reason"] and f"last: {p['reason']}",
                                     p["stale"] and f"{p['stale']} stale routes",
                                     p["held_down"] and "held down (max-prefix)", _bfd_text(p.get("bfd"))) if x)
        head = (p["name"], p["address"], str(p["peerAS"]), p["type"], p["state"], duration(p["for_seconds"]))
        fams = list(p["families"].items()) or [("-", None)]
        for i, (fam, f) in enumerate(fams):
            first = head if i == 0 else ("",) * len(head)
            if f is None:
                counts: Row = ("-",) * 5
            else:
                plus = "+" if f.get("rejectedNotKept") else ""  # received and rejected: at least
                counts = (f"{f['received']}{plus}", str(f["accepted"]), f"{f['rejected']}{plus}",
                          str(f["installed"]), _max_prefix(f["maxPrefix"]))
            rows.append(tuple(_cell(c) for c in (*first, fam, *counts, info if i == 0 else "")))
    return rows


def peers_lines(peers: Sequence[dict]) -> list[str]:
    return table(PEER_COLUMNS, peer_rows(peers), "(no peers)")


# ---- show rib --------------------------------------------------------------------------------
def bgp_parts(b: dict | None) -> list[str]:
    """The BGP attributes of a candidate, as words: as-path, local-pref, med, origin, communities."""
    if not b:
        return []
    parts = [f"as-path {' '.join(map(str, b['asPath'])) or '(empty)'}", f"local-pref {b['localPref']}",
             f"med {b['med']}", f"origin {b['origin']}"]
    if b["communities"]:
        parts.append("communities " + " ".join(b["communities"]))
    if b["largeCommunities"]:
        parts.append("large " + " ".join(b["largeCommunities"]))
    return parts


def origin_text(c: dict) -> str:
    """A candidate's origin; an ADD-PATH path with its path id (``ibgp/127.0.0.1 path 2``)."""
    return c["origin"] if c.get("pathId") is None else f"{c['origin']} path {c['pathId']}"


def rib_rows(routes: Sequence[dict]) -> list[Row]:
    """One row per candidate, the winners first (as birdc lists the best route first); prefix, `*`
    (installed) and the deciding step on the first row; the decision's note (a foreign winner,
    nothing usable) in the first row's Info when that is empty, else on a row of its own."""
    rows: list[Row] = []
    for r in routes:
        start = len(rows)
        head = ("*" if r["installed"] else "", r["prefix"], r["reason"])
        cands = sorted(r["candidates"], key=lambda c: c["status"] not in WINNING) or [None]  # winners first
        for i, c in enumerate(cands):
            first = head if i == 0 else ("", "", "")
            if c is None:
                rows.append(tuple(_cell(x) for x in (*first, "-", "-", "-", "-", "")))
                continue
            info = ", ".join(bgp_parts(c.get("bgp")))
            if c["detail"]:
                info = f"{info}; {c['detail']}" if info else c["detail"]
            rows.append(tuple(_cell(x) for x in (*first, c["status"], c["origin"], c["distance"], c["route"], info)))
        if r["note"] and not rows[start][-1]:  # the first row has room for it
            rows[start] = rows[start][:-1] + (_cell(r["note"]),)
        elif r["note"]:
            rows.append(("",) * 7 + (_cell(r["note"]),))
    return rows


def rib_page(routes: Sequence[dict], w: tuple[int, ...] | None, last: bool) -> tuple[list[str], tuple[int, ...]]:
    """The lines of one page of `show rib` and the widths for the next page. `w` is None before
    the first page; the header comes first and again whenever a column has to grow. `last`: this
    page ends the RIB (an empty RIB then prints the header and ``(no routes)``)."""
    rows = rib_rows(routes)
    grown = widths(RIB_COLUMNS, rows, w or ())
    out = [line(RIB_COLUMNS, grown)] if grown != w else []
    if w is None and not rows and last:
        out.append("(no routes)")
    return out + [line(r, grown) for r in rows], grown


def rib_lines(routes: Sequence[dict]) -> list[str]:
    """`show rib` of one page only (what `rib_page` prints for a RIB that fits in one page)."""
    return rib_page(routes, None, True)[0]


# ---- show adverts ----------------------------------------------------------------------------
def advert_rows(adverts: Sequence[dict]) -> list[Row]:
    """One row per advertised prefix and peer; the prefix on its first row only."""
    rows: list[Row] = []
    for row in adverts:
        for i, (peer, a) in enumerate(row["peers"].items()):
            attrs = [f"{k} {a[v]}" for k, v in (("local-pref", "localPref"), ("med", "med")) if a[v] is not None]
            if a["prepend"]:
                attrs.append(f"prepend {a['prepend']}")
            if a["communities"]:
                attrs.append("communities " + " ".join(a["communities"]))
            if a["largeCommunities"]:
                attrs.append("large " + " ".join(a["largeCommunities"]))
            rows.append(tuple(_cell(x) for x in (
                row["prefix"] if i == 0 else "", peer, "announced" if a["announced"] else "pending",
                a["nextHop"], a["policy"], ", ".join(a["sources"]), ", ".join(attrs))))
    return rows


def adverts_lines(adverts: Sequence[dict]) -> list[str]:
    return table(ADVERT_COLUMNS, advert_rows(adverts), "(no advertisements)")


# ---- show fib --------------------------------------------------------------------------------
def fib_rows(fib: dict) -> list[Row]:
    """Our routes in the kernel (installed, or stale: adopted at start and not yet confirmed), then
    the writes still pending and the ones that failed (with the kernel's error)."""
    rows = [(r["prefix"], "stale" if r["stale"] else "installed", r["route"]) for r in fib["routes"]]
    rows += [(r["prefix"], "pending", r["route"]) for r in fib["pending"]]
    rows += [(r["prefix"], "failed", f"{r['op']}: {r['error']}") for r in fib["failed"]]
    return [tuple(_cell(c) for c in r) for r in rows]


def fib_lines(fib: dict) -> list[str]:
    """The table and protocol first (as `ip route show table T proto P` would be asked), then the
    routes; our nexthop objects (`ip nexthop`) in a second table when the agent uses them."""
    gate = "" if fib["gate_open"] else " (sync gate closed: adopted routes held)"
    out = [f"table {fib['table']}, protocol {fib['protocol']}{gate}"]
    out += table(FIB_COLUMNS, fib_rows(fib), "(no routes)")
    if fib.get("nexthops"):
        out += [""] + table(NEXTHOP_COLUMNS, [(_cell(n),) for n in fib["nexthops"]], "")
    return out
