"""The scenario library's files (tests/scenarios): each `NAME.json` beside its expectation.

One list for every suite that runs the library: simulate's expectations, the journal's
crash-and-resume sweep, the Temporal workflow's sweep, the payload converter's values.
"""

from __future__ import annotations

from pathlib import Path

LIBRARY = Path(__file__).resolve().parent / "scenarios"
#: Every scenario file, by name (the `.expected.json` files aside).
SCENARIOS = sorted(p for p in LIBRARY.glob("*.json") if not p.name.endswith(".expected.json"))
