"""Instructions per tool iteration of another revision beside this tree's, from valgrind.

    python -m tests.bench.instructions REV [asyncio trio step]

A timing on a shared machine moves with its neighbours; the instructions a
run executes hardly move at all, so two revisions compare even when measured
apart. Each workload runs in its own process under valgrind's cachegrind,
importing only its tree's code (REV exported and farmed as `versus` does),
with a fixed hash seed: once warmed with one repetition alone, once with
`REPEATS` more; the difference over their tool iterations is the cost of one
iteration, imports and first-call caches left out. Workloads: the whole loop
(`bench_loop`'s 100-call turn through `run_tool_loop`) on asyncio and on trio,
and `step` alone (`bench_step`'s 100-iteration chain). It needs valgrind.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.versus import FROM_FARM, HERE, export, farm

# Repetitions measured beyond the warm one, per workload; and what each one is.
REPEATS = {"asyncio": 20, "trio": 20, "step": 40}
LABELS = {"asyncio": "whole loop, asyncio", "trio": "whole loop, trio", "step": "`step` alone"}

# Run in the child under valgrind, argv FARM TREE WORKLOAD REPEATS: print the tool
# iterations one repetition makes, then run 1 + REPEATS repetitions of the workload.
MEASURE = (
    FROM_FARM
    + """
workload, repeats = sys.argv[3], int(sys.argv[4])
if workload == "step":
    from tests.bench.bench_step import ITERATIONS, through_step
    print(ITERATIONS, flush=True)
    for _ in range(1 + repeats):
        through_step()
else:
    import anyio
    from tests.bench.bench_loop import CALLS, through_library
    print(CALLS, flush=True)

    async def turns() -> None:
        for _ in range(1 + repeats):
            await through_library()

    anyio.run(turns, backend=workload)
"""
)

_REFS = re.compile(r"^==\d+== I\s+refs:\s+([\d,]+)\s*$", re.MULTILINE)


def instructions_of(report: str) -> int:
    """The `I refs` total of a cachegrind report (its stderr); none there is an error."""
    found = _REFS.search(report)
    if found is None:
        raise ValueError(f"no 'I refs' line in valgrind's report:\n{report[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_iteration(warm: int, measured: int, repeats: int, iterations: int) -> float:
    """Instructions of one tool iteration: what `repeats` more repetitions added, shared out."""
    return (measured - warm) / (repeats * iterations)


def count(farmed: Path, tree: Path, workload: str, repeats: int) -> tuple[int, int]:
    """Instructions of one child run of `workload`, and the tool iterations per repetition."""
    child = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            MEASURE,
            str(farmed),
            str(tree),
            workload,
            str(repeats),
        ],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if child.returncode:
        sys.exit(f"instructions: {workload} in {tree} failed:\n{child.stderr[-3000:]}")
    return instructions_of(child.stderr), int(child.stdout.split()[0])


def figure(farmed: Path, tree: Path, workload: str) -> float:
    """Instructions per tool iteration of `workload` in `tree`."""
    warm, iterations = count(farmed, tree, workload, 0)
    measured, _ = count(farmed, tree, workload, REPEATS[workload])
    return per_iteration(warm, measured, REPEATS[workload], iterations)


def have_valgrind() -> bool:
    """Whether valgrind is on PATH: every instruction-count bench needs it."""
    return shutil.which("valgrind") is not None


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rev, wanted = sys.argv[1], sys.argv[2:] or list(REPEATS)
    unknown = [name for name in wanted if name not in REPEATS]
    if unknown:
        sys.exit(f"instructions: unknown workload {unknown}: choose from {list(REPEATS)}")
    if not have_valgrind():
        sys.exit(
            "instructions: valgrind is not installed (apt-get install valgrind); "
            "`python -m tests.bench.versus` gives timings without it"
        )
    with tempfile.TemporaryDirectory(prefix="toolloop-instructions-") as scratch:
        other = export(rev, Path(scratch) / "tree")
        trees = (
            (other, farm(other, Path(scratch) / "farm-rev")),
            (HERE, farm(HERE, Path(scratch) / "farm-here")),
        )
        print(f"instructions per tool iteration (valgrind), {rev} / this tree:", flush=True)
        for workload in wanted:
            there, here = (figure(farmed, tree, workload) for tree, farmed in trees)
            change = 100 * (here - there) / there
            print(
                f"{LABELS[workload]}: {there / 1000:.1f}k / {here / 1000:.1f}k ({change:+.1f}%)",
                flush=True,
            )


if __name__ == "__main__":
    main()
