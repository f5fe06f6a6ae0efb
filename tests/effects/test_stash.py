"""The context stash's bounds: item count, expiry on the anyio clock, one take per key."""

from __future__ import annotations

import anyio
import pytest
import trio.testing

from toolloop.effects.registry.stash import MAX_ITEMS, TTL_S, ContextStash
from toolloop.states import ContextItem

pytestmark = pytest.mark.anyio


#: Expiry is measured on trio's virtual clock, which jumps over sleeps.
VIRTUAL = pytest.mark.parametrize(
    "anyio_backend", [("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})]
)


def item(n: int) -> ContextItem:
    return ContextItem(kind="enrichment", content=f"item {n}")


async def test_defaults_are_the_documented_bounds() -> None:
    """64 items for 600 seconds, as docs/reliability.md says."""
    assert (MAX_ITEMS, TTL_S) == (64, 600.0)


async def test_oldest_item_goes_past_the_size() -> None:
    """The stash never holds more than max_items; the oldest is dropped first."""
    stash = ContextStash(max_items=3)
    keys = [stash.put(item(n)) for n in range(5)]
    assert len(stash) == 3
    assert [stash.take(key) for key in keys] == [None, None, item(2), item(3), item(4)]


async def test_a_key_is_taken_once() -> None:
    """A second take of the same key finds nothing."""
    stash = ContextStash()
    key = stash.put(item(1))
    assert (stash.take(key), stash.take(key)) == (item(1), None)


@VIRTUAL
async def test_item_expires_after_ttl() -> None:
    """An item is takeable until its ttl has passed, then not."""
    stash = ContextStash(ttl_s=10)
    early, late = stash.put(item(1)), stash.put(item(2))
    await anyio.sleep(9)
    assert stash.take(early) == item(1)
    await anyio.sleep(2)
    assert stash.take(late) is None


@VIRTUAL
async def test_put_drops_expired_items() -> None:
    """Putting an item drops every expired one, so stale items are not held."""
    stash = ContextStash(ttl_s=10)
    for n in range(5):
        stash.put(item(n))
    await anyio.sleep(11)
    stash.put(item(9))
    assert len(stash) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_items": 0}, "max_items must be at least 1, got 0"),
        ({"ttl_s": 0}, "ttl_s must be a positive number, got 0"),
        ({"ttl_s": float("nan")}, "ttl_s must be a positive number, got nan"),
    ],
)
async def test_bad_bounds_are_refused_by_name(options: dict[str, float], message: str) -> None:
    """A stash that could hold nothing, or forever, is refused when made."""
    with pytest.raises(ValueError, match=message):
        ContextStash(**options)  # type: ignore[arg-type]
