"""The context stash: enrichment items a tool put aside for the restart that follows.

Bounded and expiring, and each key can be taken once, so an item cannot be
replayed into a later turn: at most `max_items` items (the oldest goes first
when a new one arrives), each for `ttl_s` seconds; expired items are dropped
whenever an item is put, so a stash nobody takes from holds nothing stale for
long. Time is anyio's clock, so tests run it virtually.
"""

from __future__ import annotations

import collections
import itertools

import anyio

from toolloop.states import ContextItem
from toolloop.states.errors import InvalidOption

#: Items a stash holds by default.
MAX_ITEMS = 64
#: Seconds an item stays takeable by default.
TTL_S = 600.0


class ContextStash:
    """At most `max_items` items, each for `ttl_s` seconds, each taken at most once."""

    def __init__(self, *, max_items: int = MAX_ITEMS, ttl_s: float = TTL_S) -> None:
        if max_items < 1:
            raise InvalidOption(f"ContextStash: max_items must be at least 1, got {max_items}")
        if not ttl_s > 0:
            raise InvalidOption(f"ContextStash: ttl_s must be a positive number, got {ttl_s}")
        self._items: collections.OrderedDict[str, tuple[float, ContextItem]] = (
            collections.OrderedDict()
        )
        self._max_items, self._ttl = max_items, ttl_s
        self._keys = itertools.count(1)

    def __len__(self) -> int:
        """Items held, expired ones not yet dropped included."""
        return len(self._items)

    def put(self, item: ContextItem) -> str:
        """Stash `item`; expired items go, then the oldest while the stash is over its size."""
        now = anyio.current_time()
        for key in [key for key, (expires, _) in self._items.items() if expires < now]:
            del self._items[key]
        key = f"ctx-{next(self._keys)}"
        self._items[key] = (now + self._ttl, item)
        while len(self._items) > self._max_items:
            self._items.popitem(last=False)
        return key

    def take(self, key: str) -> ContextItem | None:
        """The item under `key`, removed; None when it is missing or expired."""
        entry = self._items.pop(key, None)
        if entry is None or entry[0] < anyio.current_time():
            return None
        return entry[1]
