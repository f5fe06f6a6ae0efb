"""The `toolloop` command line: a thin dispatcher, each command's logic lives in its module.

Commands: `toolloop diagram` (`toolloop.specs.diagram`) and `toolloop specs
paths` (`toolloop.specs.paths`). Add a command with a `_add_<name>` function
that registers its parser and sets `run` to a function of the parsed arguments
returning the exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from toolloop.specs import diagram, paths

Command = Callable[[argparse.Namespace], int]


def _fail(command: str, message: str) -> int:
    print(f"toolloop {command}: {message}", file=sys.stderr)
    return 2


def _diagram(args: argparse.Namespace) -> int:
    try:
        drawn = diagram.diagram(args.format, args.trace)
    except (ValueError, OSError, RuntimeError) as error:
        where = f"{args.trace}: " if args.trace is not None else ""
        return _fail("diagram", f"{where}{error}")
    if args.output is None:
        sys.stdout.buffer.write(drawn)
    else:
        args.output.write_bytes(drawn)
    return 0


def _specs_paths(args: argparse.Namespace) -> int:
    print(paths.print_paths(args.out))
    return 0


def _add_diagram(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("diagram", help="draw the declared machine")
    parser.add_argument("--format", choices=diagram.FORMATS, default="mermaid")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    parser.add_argument("--trace", type=Path, help="highlight the moves this trace file took")
    parser.set_defaults(run=_diagram)


def _add_specs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("specs", help="the declared machine's model-based tests")
    specs = parser.add_subparsers(dest="specs_command", required=True)
    listing = specs.add_parser("paths", help="print the shortest path to every declared move")
    listing.add_argument("--out", type=Path, help="also write one scenario file per path here")
    listing.set_defaults(run=_specs_paths)


def parser() -> argparse.ArgumentParser:
    """The `toolloop` argument parser with every command."""
    root = argparse.ArgumentParser(prog="toolloop", description=__doc__.splitlines()[0])
    commands = root.add_subparsers(dest="command", required=True)
    _add_diagram(commands)
    _add_specs(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is its return value."""
    args = parser().parse_args(argv)
    run: Command = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
