"""Running a bench module as a user does, for the tests of its command line."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.bench.versus import HERE


def run_bench(module: str, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m tests.bench.MODULE ARGS` from the checkout, with `PATH` replaced if given."""
    env = os.environ if path is None else {**os.environ, "PATH": path}
    command = [sys.executable, "-m", f"tests.bench.{module}", *args]
    return subprocess.run(command, cwd=HERE, capture_output=True, text=True, env=env)
