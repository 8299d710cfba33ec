"""`/api/rib`'s order of pages (`agent.api.riborder`): a listing is sorted once, in chunks, and
every page after the first is a binary search and a merge; the snapshot follows the listing.
(That building it yields to the loop between chunks: tests/test_api_server.py.)"""

from __future__ import annotations

import asyncio
import ipaddress
import random

from agent.api.riborder import RibOrder
from agent.core.model import Prefix, address_order


def net(text: str) -> Prefix:
    return Prefix.parse(str(ipaddress.ip_network(text, strict=False)))


def table(n: int, seed: int = 1) -> list[Prefix]:
    rnd = random.Random(seed)
    out = {net(f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.0/{rnd.choice((16, 20, 24))}") for _ in range(n)}
    out |= {net(f"fd00:{rnd.randrange(65536):x}:{rnd.randrange(65536):x}::/{rnd.choice((32, 48, 64))}")
            for _ in range(n // 4)}
    out |= {Prefix.parse("0.0.0.0/0"), Prefix.parse("::/0")}
    return list(out)


def listing(order: RibOrder, rib: list[Prefix], limit: int, between=lambda: None) -> tuple[list, int]:
    """Every page of one listing, as the CLI asks for them; and how many copies of the RIB it took."""
    copies = 0

    def prefixes():
        nonlocal copies
        copies += 1
        return list(rib)

    async def run():
        seen, after = [], None
        while True:
            page, more = await order.page(prefixes, after, limit)
            seen += page
            if not more:
                return seen
            after = page[-1]
            between()
    return asyncio.run(run()), copies


def test_the_pages_of_a_listing_are_the_rib_in_address_order_from_one_sorted_copy():
    rib = table(3000)
    order = RibOrder(chunk=97)
    seen, copies = listing(order, rib, 50)
    assert seen == sorted(rib, key=address_order) and copies == 1
    assert seen[0] == Prefix.parse("0.0.0.0/0") and seen[-1].family == 6
    assert order._chunks is None  # the last page let the snapshot go
    again, copies = listing(order, rib, 1000)  # a new listing: a new copy
    assert again == seen and copies == 1


def test_a_listing_shows_the_rib_as_it_started_and_a_stale_cursor_starts_a_new_copy():
    rib = table(500)
    now = [0.0]
    order = RibOrder(chunk=64, ttl=60.0, clock=lambda: now[0])
    added = Prefix.parse("10.0.0.0/8")  # (sorts first among the IPv4 prefixes of `table`)

    def change():
        if added not in rib:
            rib.append(added)
    seen, copies = listing(order, rib, 40, change)
    assert added not in seen and copies == 1 and seen == sorted(rib[:-1], key=address_order)

    async def late():
        first, more = await order.page(lambda: list(rib), None, 10)
        now[0] += 61  # the next page is asked after the snapshot's time
        rib.append(Prefix.parse("10.255.255.0/24"))
        second, _ = await order.page(lambda: list(rib), first[-1], 10_000)
        return first, second
    first, second = asyncio.run(late())
    assert Prefix.parse("10.255.255.0/24") in second  # a new copy, from the cursor on
    assert first + second == sorted(rib, key=address_order)

