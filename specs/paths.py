"""Model-based paths: the shortest run to every declared move, as a scenario.

For each declared move the model predicts a path: the shortest sequence of
declared moves from the start to the move's source, the move itself, then the
shortest sequence from its destination to the final phase (ties go to the move
declared first). A *witness* says what one move needs from a scenario (the
stream or tool result it consumes, the settings its guards read); the witnesses
along a path, merged, are a scenario in the SCENARIOS.md format that takes
exactly that path. `toolloop specs paths` prints them, and the tests run each
through the pure core (and through `toolloop simulate`) to check the prediction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from toolloop.engine.table import DISPATCHING, IDLE, STREAMING, TAKING_STASH
from toolloop.specs.machine import MACHINE, Declaration, Move
from toolloop.states import JsonObject, Phase
from toolloop.states.errors import ToolloopError

TOOL = "web_search"
TOOL_SPEC: JsonObject = {
    "name": TOOL,
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}
NOVELAI: JsonObject = {"provider": {"name": "novelai", "api_family": "novelai"}}
CALL: JsonObject = {"text": "Let me look.", "call": {"name": TOOL, "args": {"query": "cats"}}}
TRUNCATED: JsonObject = {
    "text": "",
    "call": {"name": TOOL, "args": {"query": "ca"}, "arguments_truncated": True},
}
TRUNCATED_AFTER_TEXT: JsonObject = {**TRUNCATED, "text": "Let me look."}
BLOCKED_TURN: JsonObject = {"deliberate_mode": {"active": True, "allowed": ["roll_dice"]}}
FAILURE: JsonObject = {"success": False, "error": "upstream 503"}
ONE_ITERATION = {"BOT_MAX_FUNCTION_CALL_ITERATIONS": "1"}
ONE_ERROR = {"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": "1"}
ONE_NAI_RETRY = {"NAI_TOOL_FAILURE_RETRY_THRESHOLD": "1"}
IMPERSONATION: JsonObject = {"user_impersonation": True}
ARGS: JsonObject = {"name": TOOL, "args": {"query": "cats"}}
TRUNCATED_ARGS: JsonObject = {**ARGS, "arguments_truncated": True}
PAIR = (ARGS, {"name": TOOL, "args": {"query": "dogs"}})
RESTART: JsonObject = {
    "success": True,
    "data": {"type": "context_restart_youtube", "enhanced_context_item": {"text": "t"}},
}
STASHED_RESTART: JsonObject = {
    "success": True,
    "data": {"type": "context_restart_message_metadata", "pending_context_key": "k1"},
}


@attrs.frozen(kw_only=True)
class Witness:
    """What a scenario must hold for one move to be taken."""

    stream: JsonObject | None = None
    """The stream a STREAMING move consumes."""
    result: JsonObject | None = None
    """The tool result a DISPATCHING move consumes."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    turn: JsonObject = attrs.field(factory=dict)
    calls: tuple[JsonObject, ...] = ()
    """A batch (SPEC 6b): the calls the stream before this move carries instead of its
    one call; those that run take this move's result and the next ones, in order."""


def _stream(stream: JsonObject, **needs: Any) -> Witness:
    return Witness(stream=stream, **needs)


def _result(result: JsonObject, **needs: Any) -> Witness:
    return Witness(result=result, **needs)


#: (source, move label) -> its witness; every declared move has one. A label that names
#: several moves from one source (`Move.case`) has one witness per move, in declared order.
WITNESSES: dict[tuple[Phase, str], Witness | tuple[Witness, ...]] = {
    (IDLE, "started"): Witness(),
    (STREAMING, "completed"): _stream({"status": "completed", "text": "Done."}),
    (STREAMING, "stream_failed"): _stream({"status": "error", "error": "HTTP 500"}),
    (STREAMING, "empty_response"): _stream({"status": "empty_response"}),
    (STREAMING, "stopped_by_user"): _stream({"status": "stopped_by_user", "text": "partial"}),
    (STREAMING, "follow_up_interrupt"): _stream({"status": "follow_up_interrupt"}),
    (STREAMING, "call_malformed"): _stream({"text": "", "call": {"name": "  "}}),
    (STREAMING, "stopped_before_tool"): _stream({**CALL, "stop_before_tool": True}),
    (STREAMING, "impersonation_aborted"): _stream(TRUNCATED, env=ONE_ERROR, turn=IMPERSONATION),
    (STREAMING, "tool_error_loop"): _stream(TRUNCATED, env=ONE_ERROR),
    (STREAMING, "novelai_retries_exhausted"): _stream(
        TRUNCATED_AFTER_TEXT, env=ONE_NAI_RETRY, turn=NOVELAI
    ),
    (STREAMING, "ceiling_reached"): (
        _stream(TRUNCATED_AFTER_TEXT, env=ONE_ITERATION, turn=NOVELAI),
        _stream(TRUNCATED, env=ONE_ITERATION),
    ),
    (STREAMING, "novelai_retry"): _stream(TRUNCATED_AFTER_TEXT, turn=NOVELAI),
    (STREAMING, "tool_failed"): _stream(CALL, turn=BLOCKED_TURN),
    (STREAMING, "dispatched"): _stream(CALL),
    (DISPATCHING, "stopped_during_tool"): _result({"hang": True, "kill": True}),
    (DISPATCHING, "restart_takes_stash"): (
        _result(STASHED_RESTART),
        _result(STASHED_RESTART, calls=(TRUNCATED_ARGS, ARGS)),
    ),
    (DISPATCHING, "call_settled"): (
        _result({"hang": True, "kill": True}, calls=PAIR),
        _result({"success": True}, calls=PAIR),
    ),
    (DISPATCHING, "impersonation_aborted"): _result(FAILURE, env=ONE_ERROR, turn=IMPERSONATION),
    (DISPATCHING, "tool_error_loop"): _result(FAILURE, env=ONE_ERROR),
    (DISPATCHING, "end_turn"): _result({"success": True, "end_turn": True}),
    (DISPATCHING, "novelai_retries_exhausted"): _result(FAILURE, env=ONE_NAI_RETRY, turn=NOVELAI),
    (DISPATCHING, "exit_policy_ended"): _result({"success": True}, turn=NOVELAI),
    (DISPATCHING, "ceiling_reached"): (
        _result(RESTART, env=ONE_ITERATION),
        _result(FAILURE, env=ONE_ITERATION, turn=NOVELAI),
        _result(FAILURE, env=ONE_ITERATION),
        _result({"success": True}, env=ONE_ITERATION),
    ),
    (DISPATCHING, "restarted"): (
        _result(RESTART),
        _result(RESTART, calls=(TRUNCATED_ARGS, ARGS)),
    ),
    (DISPATCHING, "novelai_retry"): _result(FAILURE, turn=NOVELAI),
    (DISPATCHING, "tool_failed"): _result(FAILURE),
    (DISPATCHING, "tool_succeeded"): _result({"success": True, "data": {"hits": 3}}),
    (TAKING_STASH, "ceiling_reached"): Witness(env=ONE_ITERATION),
    (TAKING_STASH, "restarted_with_stash"): Witness(),
}


class NoWitness(ToolloopError, LookupError):
    """A declared move has no witness, so no scenario can be built for it."""


class ConflictingWitnesses(ToolloopError, ValueError):
    """Two moves on one path need different values of the same setting."""


@attrs.frozen(kw_only=True)
class ModelPath:
    """The path the model predicts for one target move, and the scenario that takes it."""

    target: Move
    moves: tuple[Move, ...]
    """Every move of the run, from the start to the final phase."""
    scenario: JsonObject

    def to_json(self) -> JsonObject:
        """The path as `toolloop specs paths` prints it (steps shaped like trace step lines)."""
        steps = [
            {"move": m.label, "source": m.source.value, "dest": m.dest.value} for m in self.moves
        ]
        return {
            "move": self.target.label,
            "source": self.target.source.value,
            "path": steps,
            "scenario": self.scenario,
        }


def shortest_paths(declaration: Declaration, start: Phase) -> dict[Phase, tuple[Move, ...]]:
    """The shortest move sequence from `start` to each phase (breadth first, declared order)."""
    paths: dict[Phase, tuple[Move, ...]] = {start: ()}
    frontier = [start]
    while frontier:
        following: list[Phase] = []
        for here in frontier:
            for move in declaration.moves_from(here):
                if move.dest not in paths:
                    paths[move.dest] = (*paths[here], move)
                    following.append(move.dest)
        frontier = following
    return paths


def model_paths(declaration: Declaration = MACHINE) -> list[ModelPath]:
    """One predicted path per declared move, in declared order."""
    to_source = shortest_paths(declaration, declaration.initial)
    return [
        _model_path(move, (*to_source[move.source], move, *_to_final(declaration, move.dest)))
        for move in declaration.moves
    ]


def _to_final(declaration: Declaration, phase: Phase) -> tuple[Move, ...]:
    return shortest_paths(declaration, phase)[declaration.final]


def _model_path(target: Move, moves: tuple[Move, ...]) -> ModelPath:
    return ModelPath(target=target, moves=moves, scenario=scenario_for(moves))


def scenario_for(moves: Sequence[Move]) -> JsonObject:
    """The scenario that takes `moves`: the witnesses along them, merged."""
    streams: list[JsonObject] = []
    results: list[JsonObject] = []
    env: dict[str, str] = {}
    turn: JsonObject = {}
    for move in moves:
        witness = witness_of(move)
        if witness.calls:
            streams[-1] = {key: value for key, value in streams[-1].items() if key != "call"}
            streams[-1]["calls"] = list(witness.calls)
        streams.extend([witness.stream] if witness.stream is not None else [])
        results.extend([witness.result] if witness.result is not None else [])
        _merge(env, witness.env, move)
        _merge(turn, witness.turn, move)
    tool = {**TOOL_SPEC, "results": results or [{"success": True}]}
    return {"env": env, "turn": turn, "tools": [tool], "streams": streams}


def witness_of(move: Move) -> Witness:
    """The witness of a declared move, or `NoWitness` naming it."""
    found = WITNESSES.get((move.source, move.label))
    if isinstance(found, tuple):
        found = found[move.case] if move.case < len(found) else None
    elif move.case:
        found = None
    if found is None:
        raise NoWitness(f"{move.where}: no witness in toolloop.specs.paths.WITNESSES")
    return found


def _merge(into: dict[str, Any], needs: Mapping[str, Any], move: Move) -> None:
    for key, value in needs.items():
        if into.setdefault(key, value) != value:
            raise ConflictingWitnesses(
                f"{move.where}: needs {key}={value!r}, the path already has {into[key]!r}"
            )


def print_paths(out_dir: Path | None = None) -> str:
    """`toolloop specs paths`: every path as JSON; with `out_dir`, also one scenario file each."""
    paths = model_paths()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for path in paths:
            case = f"-{path.target.case}" if path.target.case else ""
            name = f"{path.target.source.value}-{path.target.label}{case}.json"
            (out_dir / name).write_text(json.dumps(path.scenario, indent=2) + "\n")
    return json.dumps([path.to_json() for path in paths], indent=2)
