"""`make mutation`: cosmic-ray over `engine/`, killed by the engine's own tests.

cosmic-ray mutates the source in place, one mutant at a time, and restores it;
the editable install then imports the mutant as `toolloop.engine`. Run it on a
tree nobody else is editing (a fresh clone with its own `make install`). Hypothesis
runs a small fixed budget per mutant (profile `mutation`). Prints the score and
the survivors.

`make mutation` runs every module; `make mutation ARGS="engine/actions.py"` runs
some. The whole of `engine/` is about 2,500 mutants, many hours on 2 cores
(the verbatim parser alone is 1,400); `ARGS="--sample 200 engine/verbatim.py"`
runs a uniform random sample of each module's mutants instead (for the
parser, an estimate of its score in a seventh of the time).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"
BIN = Path(sys.executable).parent
KILLERS = "tests/engine tests/states tests/specs/test_conformance.py"
"""The tests that judge a mutant: the engine's own, and the conformance test of the guards."""
CONFIG = """\
[cosmic-ray]
module-path = "{module}"
timeout = 60.0
excluded-modules = []
test-command = "{python} -m pytest -x -q -p no:randomly -p no:cacheprovider {tests}"

[cosmic-ray.distributor]
name = "local"
"""


def run(*args: str) -> str:
    return subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(prog="make mutation", description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: all of engine/)")
    parser.add_argument(
        "--sample", type=_positive, help="mutants to run per module, drawn at random"
    )
    args = parser.parse_args()
    modules = args.modules or sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "engine").glob("*.py") if p.name != "__init__.py"
    )
    WORK.mkdir(parents=True, exist_ok=True)
    killed = total = 0
    for module in modules:
        name = Path(module).stem
        config, session = WORK / f"{name}.toml", WORK / f"{name}.sqlite"
        config.write_text(CONFIG.format(module=module, python=sys.executable, tests=KILLERS))
        session.unlink(missing_ok=True)
        run(sys.executable, "-m", "cosmic_ray.cli", "init", str(config), str(session))
        if args.sample is not None:
            _keep_sample(session, args.sample)
        subprocess.run(
            [sys.executable, "-m", "cosmic_ray.cli", "exec", str(config), str(session)],
            cwd=ROOT,
            check=True,
            env={**os.environ, "HYPOTHESIS_PROFILE": "mutation"},
        )
        report = run(str(BIN / "cr-report"), str(session), "--show-pending")
        survivors = run(str(BIN / "cr-report"), str(session), "--surviving-only")
        (WORK / f"{name}.survivors.txt").write_text(survivors)
        done, alive = _counts(report)
        killed, total = killed + done - alive, total + done
        print(f"{module}: {done - alive}/{done} killed", flush=True)
    score = 100 * killed / total if total else 0.0
    print(f"mutation score, engine/: {score:.1f} % ({killed}/{total} mutants killed)")
    print(f"survivors listed in {WORK.relative_to(ROOT)}/*.survivors.txt")


def _positive(text: str) -> int:
    """argparse type: an integer of at least 1 (sqlite reads LIMIT -1 as no limit)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of mutants >= 1, got {text!r}")
    return int(text)


def _keep_sample(session: Path, size: int) -> None:
    """Drop all but `size` mutants, chosen uniformly at random, from a fresh session."""
    with closing(sqlite3.connect(session)) as db:
        db.executescript(
            f"""
            CREATE TEMP TABLE keep AS SELECT job_id FROM work_items ORDER BY random() LIMIT {size};
            DELETE FROM mutation_specs WHERE job_id NOT IN (SELECT job_id FROM keep);
            DELETE FROM work_items WHERE job_id NOT IN (SELECT job_id FROM keep);
            """
        )


def _counts(report: str) -> tuple[int, int]:
    """(mutants run, survivors) from cr-report's summary lines."""
    done = alive = 0
    for line in report.splitlines():
        if line.startswith("total jobs:"):
            done = int(line.split(":")[1])
        elif line.startswith("surviving mutants:"):
            alive = int(line.split(":")[1].split("(")[0])
    return done, alive


if __name__ == "__main__":
    main()
