"""`make test-temporal`: the `temporal` suite, with an exit that the SDK cannot crash.

Temporal's Python SDK can crash the interpreter while it shuts down, after every
test has passed (its Rust runtime's threads outlive Python's finalization:
temporalio/sdk-python#300), turning a green run into a signal exit. So the run
ends with `os._exit` and pytest's own code, flushed first: 0 when every test
passed, 1 when one failed, pytest's other codes as they are.

    python -m tests.temporal.run [pytest options]
"""

from __future__ import annotations

import os
import sys

import pytest


def main(argv: list[str]) -> int:
    return int(pytest.main(["-m", "temporal", "tests/temporal", *argv]))


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
