"""The RIB's prefixes in address order, for `/api/rib`'s pages.

DOC: `route-agent show rib` follows the API's cursor a page (1,000 rows) at a time, so a full
table of 1.2M routes is 1,200 requests. Picking each page by a pass over the whole RIB cost
~0.3 s of the core's CPU per page (minutes for one listing). `RibOrder` keeps, for the
listing under way, the RIB's prefixes as it was when the listing started: cut into chunks of
`chunk` prefixes, each sorted in address order (built a chunk per turn of the loop, so the
core task runs between them). A page is then a binary search per chunk for the cursor and a
merge of the chunks from there: milliseconds, whatever the RIB's size. The snapshot holds
references to the RIB's own prefix objects (8 octets per route) and is let go when a page
ends the listing, or rebuilt when a listing starts (no cursor) or the last page was asked
more than `ttl` seconds ago. Rows are made at the time of each page (`ReadView.rib_rows`,
which skips prefixes gone since); a prefix added during a listing shows in the next one.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from bisect import bisect_right
from collections.abc import Callable
from itertools import islice

from ..core.model import Prefix, address_order


class RibOrder:
    """A snapshot of the RIB's prefixes in address order, page by page (see module doc)."""

    def __init__(self, chunk: int = 20_000, ttl: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.chunk, self.ttl, self.clock = chunk, ttl, clock
        self._chunks: list[list[Prefix]] | None = None
        self._used = 0.0

    async def page(self, prefixes: Callable[[], list[Prefix]], after: Prefix | None,
                   limit: int) -> tuple[list[Prefix], bool]:
        """The first `limit` prefixes after `after` in address order (all of them: None), and
        whether more follow. `prefixes` gives a copy of the RIB's (when a snapshot is made)."""
        now = self.clock()
        chunks = self._chunks
        if chunks is None or after is None or now - self._used > self.ttl:
            chunks = self._chunks = await self._build(prefixes())
        self._used = now
        after_key = -1 if after is None else address_order(after)
        tails = [islice(c, bisect_right(c, after_key, key=address_order), None) for c in chunks]
        best = list(islice(heapq.merge(*tails, key=address_order), limit + 1))
        more = len(best) > limit
        if not more and self._chunks is chunks:
            self._chunks = None  # the listing is over: let the snapshot go
        return best[:limit], more

    async def _build(self, keys: list[Prefix]) -> list[list[Prefix]]:
        chunks = []
        for i in range(0, len(keys), self.chunk):
            if i:
                await asyncio.sleep(0)  # let the core task run between chunks
            part = keys[i:i + self.chunk]
            part.sort(key=address_order)
            chunks.append(part)
        return chunks
