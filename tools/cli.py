"""The `toolloop` command line: a thin dispatcher, each command's logic lives in its module.

Commands: `toolloop simulate` (`toolloop.tools.simulate`), `toolloop replay`
(`toolloop.engine.trace`), `toolloop demo` (`toolloop.tools.demo`), `toolloop
diagram` (`toolloop.specs.diagram`) and `toolloop specs paths`
(`toolloop.specs.paths`). Add a command with a `_add_<name>` function
that registers its parser and sets `run` to a function of the parsed arguments
returning the exit status.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from toolloop.engine.trace import TraceError, dump_lines, load_lines, redacted, replay
from toolloop.specs import diagram, invariants, paths
from toolloop.tools.scenario import ScenarioError, load_scenario

Command = Callable[[argparse.Namespace], int]


def _fail(command: str, message: str) -> int:
    print(f"toolloop {command}: {message}", file=sys.stderr)
    return 2


def _diagram(args: argparse.Namespace) -> int:
    try:
        drawn = diagram.diagram(args.format, args.trace, rules=args.rules)
    except (ValueError, OSError, RuntimeError) as error:
        where = f"{args.trace}: " if args.trace is not None else ""
        return _fail("diagram", f"{where}{error}")
    if args.output is None:
        sys.stdout.buffer.write(drawn)
    else:
        args.output.write_bytes(drawn)
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from toolloop.effects.in_memory import MemoryTurnControl
    from toolloop.tools.scripted import scripted_registry
    from toolloop.tools.simulate import simulate

    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as error:
        return _fail("simulate", str(error))
    document, trace, _ = simulate(scenario)
    redact = scripted_registry(scenario.tools, MemoryTurnControl()).redact
    if args.trace is not None:
        lines = dump_lines(trace, redact)
        try:
            args.trace.write_text("".join(f"{line}\n" for line in lines), "utf-8")
        except OSError as error:
            return _fail("simulate", f"{args.trace}: cannot write the trace: {error.strerror}")
    print(json.dumps(redacted(document, redact), indent=2, ensure_ascii=False))
    return 0


def _replay(args: argparse.Namespace) -> int:
    try:
        trace = load_lines(args.trace.read_text("utf-8").splitlines())
    except UnicodeDecodeError as error:
        return _fail("replay", f"{args.trace}: not UTF-8 text (byte {error.start}: {error.reason})")
    except (OSError, TraceError) as error:
        return _fail("replay", f"{args.trace}: {error}")
    problems = replay(trace)
    if args.check:
        problems += invariants.check(trace)
    for problem in problems:
        print(f"{args.trace}: {problem}", file=sys.stderr)
    if not problems:
        print(f"{args.trace}: {len(trace.steps)} steps replayed, same effects")
    return 1 if problems else 0


def _demo(args: argparse.Namespace) -> int:
    from toolloop.tools.demo import demo

    return demo(
        base_url=args.base_url, model=args.model, verbatim=args.verbatim, provider=args.provider
    )


def _discord(args: argparse.Namespace) -> int:
    from toolloop.tools.discord_bot import main

    return main()


def _specs_paths(args: argparse.Namespace) -> int:
    print(paths.print_paths(args.out))
    return 0


def _add_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("simulate", help="run a scenario file on a virtual clock")
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--trace", type=Path, help="also write the trace here as JSON lines")
    parser.set_defaults(run=_simulate)


def _add_replay(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("replay", help="run a trace again through the engine alone")
    parser.add_argument("trace", type=Path)
    parser.add_argument("--check", action="store_true", help="also check the loop invariants")
    parser.set_defaults(run=_replay)


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("demo", help="a whole tool-calling conversation over HTTP")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (key: OPENAI_API_KEY)")
    parser.add_argument("--model", default=None, help="the model name at --base-url")
    parser.add_argument("--verbatim", action="store_true", help="recover tool calls from text")
    parser.add_argument(
        "--provider",
        choices=("openai", "gemini"),
        default="openai",
        help="the protocol: OpenAI-compatible, or Gemini's native one (key: GEMINI_API_KEY)",
    )
    parser.set_defaults(run=_demo)


def _add_discord(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("discord", help="run a Discord bot (environment: docs/discord.md)")
    parser.set_defaults(run=_discord)


def _add_diagram(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("diagram", help="draw the declared machine")
    parser.add_argument("--format", choices=diagram.FORMATS, default="mermaid")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    parser.add_argument("--trace", type=Path, help="highlight the moves this trace file took")
    parser.add_argument("--rules", action="store_true", help="label each move with its SPEC rule")
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
    _add_simulate(commands)
    _add_replay(commands)
    _add_demo(commands)
    _add_discord(commands)
    _add_diagram(commands)
    _add_specs(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is its return value."""
    args = parser().parse_args(argv)
    run: Command = args.run
    try:
        return run(args)
    except BrokenPipeError:  # `toolloop simulate x.json | head`: the reader left, not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
