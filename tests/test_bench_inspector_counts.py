"""`python -m tests.bench.inspector_counts`: the sides' order, callgrind's dumps shared out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.inspector_counts import (
    IDLE,
    NO_PAGE,
    ONE_PAGE,
    SIDES,
    UNWATCHED,
    dumped,
    lines,
    order,
    plan,
    segments,
    shared_out,
)
from tests.bench.versus import HERE
from tests.bench_runs import run_bench

# The head of a real callgrind dump (`--dump-before`), cut after its totals.
DUMP = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 22587
cmd:  python mark.py
part: 2

desc: I1 cache:
desc: Trigger: --dump-before=os_getppid

positions: line
events: Ir
summary: 45077640
totals: 45077640
"""


def test_every_side_runs_once_a_round_and_each_round_starts_with_another() -> None:
    """Each round holds all three sides; the first side of each round differs."""
    sides = order(3)
    rounds = [sides[at : at + 3] for at in range(0, 9, 3)]
    assert all(sorted(each) == sorted(SIDES) for each in rounds)
    assert [each[0] for each in rounds] == [UNWATCHED, NO_PAGE, ONE_PAGE]


def test_the_dumps_are_read_in_their_numbered_order_not_by_name(tmp_path: Path) -> None:
    """cg.10 comes after cg.9, and the file of the program's end (`cg`) is not a side's."""
    for number in range(1, 12):
        (tmp_path / f"cg.{number}").write_text(DUMP.replace("45077640", str(number)))
    (tmp_path / "cg").write_text(DUMP)
    assert dumped(tmp_path) == list(range(1, 12))


def test_a_dump_without_a_summary_is_an_error_quoting_it(tmp_path: Path) -> None:
    (tmp_path / "cg.1").write_text(DUMP.replace("summary:", "sum:"))
    with pytest.raises(ValueError, match="no 'summary:' line in callgrind's dump:\n# callgrind"):
        dumped(tmp_path)


def test_each_side_is_the_dump_after_it_the_first_being_what_ran_before() -> None:
    """The first dump (imports, warm-up) is no side's; the rest follow the sides' order."""
    assert segments([99, 1, 2, 3], [UNWATCHED, NO_PAGE, ONE_PAGE]) == [1, 2, 3]


def test_a_dump_too_many_or_too_few_is_an_error_naming_the_mark() -> None:
    """Another call of the mark, or a run cut short, would shift every figure: refused."""
    with pytest.raises(ValueError, match="dumped 3 times, not 4: something else called os_getp"):
        segments([99, 1, 2], [UNWATCHED, NO_PAGE, ONE_PAGE])


def test_a_watched_side_is_shown_against_the_unwatched_run_of_its_own_round() -> None:
    """Round by round: 110k against 100k is +10%, 104k against 80k +30%, never best to best."""
    measured = {
        "runs": {
            UNWATCHED: [(100_000.0, 0), (80_000.0, 1)],
            NO_PAGE: [(110_000.0, 0), (104_000.0, 0)],
            ONE_PAGE: [(101_000.0, 30), (88_000.0, 31)],
        },
        "slowdown": 60.0,
        "full speed": 1.5,
        "clock": 2e6,
    }
    shown = list(lines("asyncio", measured))
    assert "60 times slower" in shown[0] and "at most 15 pushes a run" in shown[0]
    assert "ticks) 2.0M instructions a second" in shown[0]
    assert shown[2].endswith(
        "110.0k, 104.0k instructions per iteration, round by round (+10.0%, +30.0% added)"
    )
    assert shown[3].endswith("(+1.0%, +10.0% added); the page's pushes a run: 30, 31")


def test_an_unknown_backend_is_refused_naming_it_and_the_choices() -> None:
    """A misspelt backend stops the run before anything is timed or counted."""
    result = run_bench("inspector_counts", "asyncoi")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "inspector_counts: unknown backend ['asyncoi']: choose from ['asyncio', 'trio']\n"
    )


def test_without_valgrind_the_run_stops_saying_what_is_missing() -> None:
    """No valgrind on PATH: nothing is timed or run, and the message names valgrind."""
    result = run_bench("inspector_counts", "trio", path=str(HERE / "no-such-dir"))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("inspector_counts: valgrind is not installed")


def test_the_clocks_work_is_kept_at_its_full_speed_share() -> None:
    """Idle: 2,000 instructions a second. A 10 s run at a slowdown of 10 made 20,000 by the
    clock and keeps a tenth: 1,010,000 - 18,000 = 992,000 over bench_observe's 10,000
    iterations."""
    sides = [IDLE, UNWATCHED, NO_PAGE, ONE_PAGE, IDLE]
    counts = [20_000, 1_010_000, 1_110_000, 1_010_000, 60_000]
    told = {"slowdown": 10.0, "walls": [10.0, 10.0, 10.0, 20.0, 30.0], "pushes": [0, 1, 0, 5, 0]}
    shared = shared_out(sides, counts, told, full_speed=1.0)
    assert shared["clock"] == 2_000
    assert shared["runs"] == {
        UNWATCHED: [(99.2, 1)],
        NO_PAGE: [(109.2, 0)],
        ONE_PAGE: [(97.4, 5)],
    }


def test_the_child_runs_the_sides_between_two_idle_runs() -> None:
    assert plan(1) == [IDLE, UNWATCHED, NO_PAGE, ONE_PAGE, IDLE]
