"""A page of the inspector in a process of its own, as a browser tab is: it follows
`/api/events` and parses each push, and prints one line a push (`monotonic turns bytes`)
for `bench_observe.Page` to read. `CLOCK_MONOTONIC` is the machine's: the parent compares
the times with its own.

    python -m tests.bench.sse_page URL
"""

from __future__ import annotations

import json
import sys
import time

import httpx


def follow(url: str) -> None:
    """Print each `turns` push of `url`'s event stream until the server ends it."""
    try:
        with httpx.stream("GET", url + "api/events", timeout=None) as events:
            for line in events.iter_lines():
                if line.startswith("data: "):
                    pushed = len(json.loads(line[6:])["turns"])
                    print(time.monotonic(), pushed, len(line) - 6, flush=True)
    except httpx.HTTPError:
        return  # the server stopped while the page was still open


if __name__ == "__main__":
    follow(sys.argv[1])
