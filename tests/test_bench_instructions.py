"""`python -m tests.bench.instructions`: reading valgrind's report, sharing it out per iteration."""

from __future__ import annotations

import pytest

from tests.bench.instructions import instructions_of, per_iteration
from tests.bench.versus import HERE
from tests.bench_runs import run_bench

# The tail of a real `valgrind --tool=cachegrind --cache-sim=no` report.
REPORT = """\
==4242== Cachegrind, a cache and branch-prediction profiler
==4242== Command: python -c pass
==4242==
==4242==
==4242== I   refs:      1,234,567,890
"""


def test_the_total_is_read_from_the_i_refs_line_commas_dropped() -> None:
    """The one `I refs` figure of a report, as an integer."""
    assert instructions_of(REPORT) == 1_234_567_890


def test_a_report_without_a_total_is_an_error_quoting_the_report() -> None:
    """A crashed or foreign run gives no figure: the error says so and shows the report."""
    with pytest.raises(ValueError, match=r"no 'I refs' line in valgrind's report:\n==4242== Cach"):
        instructions_of(REPORT.replace("I   refs", "D   refs"))


def test_one_iteration_costs_what_the_extra_repetitions_added_shared_out() -> None:
    """Warm run subtracted, the rest divided by repetitions times iterations per repetition."""
    assert per_iteration(warm=1_000, measured=401_000, repeats=40, iterations=100) == 100.0


def test_without_valgrind_the_run_stops_saying_what_is_missing() -> None:
    """No valgrind on PATH: nothing is exported or run, and the message names valgrind."""
    result = run_bench("instructions", "HEAD", "step", path=str(HERE / "no-such-dir"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("instructions: valgrind is not installed")


def test_an_unknown_workload_is_refused_naming_it_and_the_choices() -> None:
    """A misspelt workload stops the run before valgrind starts."""
    result = run_bench("instructions", "HEAD", "stpe")
    assert result.returncode == 1
    assert result.stderr == (
        "instructions: unknown workload ['stpe']: choose from ['asyncio', 'trio', 'step']\n"
    )
