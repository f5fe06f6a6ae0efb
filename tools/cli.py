"""The `toolloop` command line: a thin dispatcher, each command's logic lives in its module.

Commands: `toolloop simulate` (`toolloop.tools.simulate`), `toolloop replay`
(`toolloop.engine.trace`), `toolloop demo` (`toolloop.tools.demo`), `toolloop mcp`
(`toolloop.tools.mcp_cli`), `toolloop
inspect` (`toolloop.tools.inspect_demo`), `toolloop
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

from toolloop.effects.observe.trace_file import trace_file
from toolloop.engine.trace import TraceError, load_bytes, redacted, replay
from toolloop.specs import diagram, invariants, paths
from toolloop.tools.scenario import load_scenario
from toolloop.tools.scenario_json import ScenarioError

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
    redact = scripted_registry(scenario.tools, MemoryTurnControl()).redact
    if args.trace is None:
        document, _, _ = simulate(scenario)
    else:
        try:
            with trace_file(args.trace, redact) as writer:
                document, _, _ = simulate(scenario, writer.observe)
        except OSError as error:
            return _fail("simulate", f"{args.trace}: cannot write the trace: {error.strerror}")
    print(json.dumps(redacted(document, redact), indent=2, ensure_ascii=False))
    return 0


def _replay(args: argparse.Namespace) -> int:
    try:
        trace = load_bytes(args.trace.read_bytes())
    except OSError as error:
        return _fail("replay", f"{args.trace}: cannot read the trace: {error.strerror}")
    except TraceError as error:
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
        base_url=args.base_url,
        model=args.model,
        verbatim=args.verbatim,
        approve=args.approve,
        provider=args.provider,
    )


def _inspect(args: argparse.Namespace) -> int:
    from toolloop.tools.inspect_demo import inspect

    return inspect(
        demo=args.demo,
        host=args.host,
        port=args.port,
        token=args.token,
        turns=args.turns,
        rounds=args.rounds,
    )


def _discord(args: argparse.Namespace) -> int:
    from toolloop.tools.discord_bot import main

    return main(config=args.config)


def _mcp(args: argparse.Namespace) -> int:
    from toolloop.tools.mcp_cli import run

    return run(args)


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
        "--approve", action="store_true", help="each tool call waits for a yes on the terminal"
    )
    parser.add_argument(
        "--provider",
        choices=("openai", "gemini"),
        default="openai",
        help="the protocol: OpenAI-compatible, or Gemini's native one (key: GEMINI_API_KEY)",
    )
    parser.set_defaults(run=_demo)


def _add_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("inspect", help="a live web page of running turns (--demo)")
    parser.add_argument("--demo", action="store_true", help="watch a few concurrent demo turns")
    parser.add_argument("--host", default="127.0.0.1", help="other than loopback needs --token")
    parser.add_argument("--port", type=int, default=8765, help="0: any free port")
    parser.add_argument("--token", help="required on every request (or TOOLLOOP_INSPECT_TOKEN)")
    parser.add_argument("--turns", type=int, default=4, help="concurrent demo turns")
    parser.add_argument("--rounds", type=int, help="end after this many turns per worker")
    parser.set_defaults(run=_inspect)


def _add_discord(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("discord", help="run a Discord bot (environment: docs/discord.md)")
    parser.add_argument(
        "--config",
        type=Path,
        help="a TOML file of settings (docs/discord.md); environment variables override it",
    )
    parser.set_defaults(run=_discord)


def _add_mcp(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("mcp", help="list or call the tools of a stdio MCP server")
    verbs = parser.add_subparsers(dest="mcp_command", required=True)
    for verb, shape in (("list", "COMMAND ARGS..."), ("call", "COMMAND ARGS... TOOL JSON")):
        command = verbs.add_parser(verb, help=f"toolloop mcp {verb} -- {shape}")
        command.add_argument("server", nargs=argparse.REMAINDER, help=f"-- {shape}")
        command.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS")
        command.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS")
        command.set_defaults(run=_mcp)


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
    _add_mcp(commands)
    _add_inspect(commands)
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
