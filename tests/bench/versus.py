"""`make bench` figures of another revision beside this tree's, measured in one run.

    python -m tests.bench.versus REV [MODULE ...]     e.g. versus 4362524 bench_step

A figure compares only with one measured on the same host at the same time,
and two versions of toolloop cannot share a process. So this exports REV
(`git archive`) to a temporary directory and runs each bench module (all of
this tree's by default) there and here, alternating, `ROUNDS` times, each run
in its own process importing only its own tree's `toolloop` and `tests`. A
module REV does not have is said so, not run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import tests.bench as package
from tests.bench.__main__ import modules

ROUNDS = 2
HERE = Path(__file__).resolve().parents[2]

# The start of a child (`python -c`, argv FARM TREE ...): import `toolloop` from the farm
# of symlinks only, never from the editable install of this checkout, and `tests` from TREE.
FROM_FARM = """
import importlib, sys
farm, tree = sys.argv[1:3]
sys.meta_path[:] = [
    f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")
]
sys.path[:0] = [farm, tree]
import toolloop.engine
assert toolloop.engine.__file__.startswith(farm), toolloop.engine.__file__
"""

# Then run the named modules of the tree's own bench.
CHILD = (
    FROM_FARM
    + """
label, *names = sys.argv[3:]
print(f"{label}: toolloop from {farm}", flush=True)
for name in names:
    print(f"== {label}: {name}", flush=True)
    importlib.import_module(f"tests.bench.{name}").main()
"""
)


def farm(tree: Path, into: Path) -> Path:
    """A directory holding `toolloop/` as the package-dir mapping lays it out for `tree`."""
    root = into / "toolloop"
    root.mkdir(parents=True)
    for entry in (tree / "toolloop").iterdir():
        if entry.name.endswith(".py") or entry.name == "py.typed":
            (root / entry.name).symlink_to(entry)
    for folder in ("effects", "engine", "specs", "states", "testing", "tools"):
        if (tree / folder).is_dir():
            (root / folder).symlink_to(tree / folder)
    return into


def export(rev: str, into: Path) -> Path:
    """REV's files, as `git archive` gives them; a revision git cannot export ends the run."""
    into.mkdir()
    archived = subprocess.run(["git", "-C", str(HERE), "archive", rev], capture_output=True)
    if archived.returncode:
        sys.exit(f"versus: git cannot export {rev!r}: {archived.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archived.stdout, check=True)
    return into


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rev, wanted = sys.argv[1], sys.argv[2:] or modules(package.__path__)
    with tempfile.TemporaryDirectory(prefix="toolloop-versus-") as scratch:
        other = export(rev, Path(scratch) / "tree")
        missing = [name for name in wanted if not (other / "tests/bench" / f"{name}.py").exists()]
        for name in missing:
            print(f"{rev} has no tests/bench/{name}.py: not run there", flush=True)
        there = [name for name in wanted if name not in missing]
        runs = [
            side(tree, Path(scratch) / farmed, label, names)
            for tree, farmed, label, names in (
                (other, "farm-rev", rev, there),
                (HERE, "farm-here", "this tree", wanted),
            )
            if names
        ]
        for _ in range(ROUNDS):
            for command, tree in runs:
                subprocess.run(command, cwd=tree, check=True)


def side(tree: Path, into: Path, label: str, names: list[str]) -> tuple[list[str], Path]:
    """The command running `names` against `tree`'s own code, printed under `label`; its cwd."""
    return [sys.executable, "-c", CHILD, str(farm(tree, into)), str(tree), label, *names], tree


if __name__ == "__main__":
    main()
