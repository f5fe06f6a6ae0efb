"""The trace of a long tool chain: its size on disk, the time to write and to read it back.

The scenario calls a tool until `BOT_MAX_FUNCTION_CALL_ITERATIONS` ends the
turn (`scenario(n)`), each call with a short pre-tool text, as a chatty model
does; `toolloop simulate --trace` writes its trace and `toolloop replay
--check` reads it. Reported per chain length: the file's bytes and bytes per
iteration (constant when the format is linear), and the seconds of each
command. Run: `.venv/bin/python -m tests.bench bench_trace`, or with lengths,
`.venv/bin/python -m tests.bench.bench_trace 1000 2000`.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolloop.tools.cli import main as cli

LENGTHS = (1_000, 2_000)


def scenario(iterations: int) -> dict[str, Any]:
    """A model that says a line and calls `web_search` until the iteration limit."""
    call = {"name": "web_search", "args": {"query": "cats and their habits"}}
    return {
        "env": {"BOT_MAX_FUNCTION_CALL_ITERATIONS": str(iterations)},
        "tools": [{"name": "web_search", "results": [{"data": {"hits": 3}}]}],
        "streams": [{"text": "Let me look that up.", "call": call}],
    }


def measure(iterations: int, folder: Path) -> dict[str, float]:
    """Write and replay the trace of `scenario(iterations)`; its size and the seconds taken."""
    source, trace = folder / f"s{iterations}.json", folder / f"t{iterations}.jsonl"
    source.write_text(json.dumps(scenario(iterations)))
    with contextlib.redirect_stdout(io.StringIO()):
        began = time.perf_counter()
        assert cli(["simulate", str(source), "--trace", str(trace)]) == 0
        written = time.perf_counter()
        assert cli(["replay", "--check", str(trace)]) == 0
        replayed = time.perf_counter()
    size = trace.stat().st_size
    return {
        "bytes": size,
        "bytes_per_iteration": size / iterations,
        "simulate_s": written - began,
        "replay_check_s": replayed - written,
    }


def main(lengths: tuple[int, ...] = LENGTHS) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for iterations in lengths:
            figures = measure(iterations, Path(folder))
            print(
                f"{iterations:>6} iterations: {figures['bytes'] / 1e6:8.2f} MB "
                f"({figures['bytes_per_iteration']:,.0f} B/iteration), "
                f"simulate --trace {figures['simulate_s']:.2f} s, "
                f"replay --check {figures['replay_check_s']:.2f} s",
                flush=True,
            )


if __name__ == "__main__":
    main(tuple(int(arg) for arg in sys.argv[1:]) or LENGTHS)
