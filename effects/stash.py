"""The context stash: enrichment items a tool put aside for the restart that follows.

Bounded and expiring, and each key can be taken once, so an item cannot be
replayed into a later turn. Time is anyio's clock, so tests run it virtually.
"""

from __future__ import annotations

import collections
import itertools

import anyio

from toolloop.states import ContextItem


class ContextStash:
    """At most `max_items` items, each for `ttl_s` seconds, each taken at most once."""

    def __init__(self, *, max_items: int = 64, ttl_s: float = 600.0) -> None:
        self._items: collections.OrderedDict[str, tuple[float, ContextItem]] = (
            collections.OrderedDict()
        )
        self._max_items, self._ttl = max_items, ttl_s
        self._keys = itertools.count(1)

    def put(self, item: ContextItem) -> str:
        """Stash `item`; the oldest item goes when the stash is full."""
        key = f"ctx-{next(self._keys)}"
        self._items[key] = (anyio.current_time() + self._ttl, item)
        while len(self._items) > self._max_items:
            self._items.popitem(last=False)
        return key

    def take(self, key: str) -> ContextItem | None:
        """The item under `key`, removed; None when it is missing or expired."""
        entry = self._items.pop(key, None)
        if entry is None or entry[0] < anyio.current_time():
            return None
        return entry[1]
