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
APPROVE, TIMEOUT = "approve", "timeout"
DENY: JsonObject = {"deny": "not now"}
KILL: JsonObject = {"kill": True}
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
    approval: tuple[Any, ...] = ()
    """The decisions the tool's calls that wait for approval take, in order (SPEC 6c)."""
    via: tuple[str, ...] = ()
    """Moves (`label` or `label:case`) taken between the source and this move, when the
    shortest way there cannot reach it: a decision comes after others (SPEC 6c)."""
    then: tuple[str, ...] = ()
    """Moves taken right after this one, before the shortest way to the end. What the
    moves of `via` and `then` consume, this witness gives; theirs are not merged."""


def _stream(stream: JsonObject, **needs: Any) -> Witness:
    return Witness(stream=stream, **needs)


def _result(result: JsonObject, **needs: Any) -> Witness:
    return Witness(result=result, **needs)


def _after_approved(result: JsonObject) -> Witness:
    """A batch of two: the first call approved runs to `result`, the second is never
    answered, and its timeout is the last of the batch (SPEC 6c)."""
    return Witness(
        approval=(APPROVE, TIMEOUT),
        calls=PAIR,
        result=result,
        via=("decided", "call_settled:1"),
    )


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
    # approval (SPEC 6c): a denial finishes the batch with the exits of a failure
    (DISPATCHING, "withdrawn"): Witness(
        approval=(KILL,), calls=PAIR, then=("stopped_while_waiting",)
    ),
    (DISPATCHING, "stopped_while_waiting"): Witness(approval=(KILL,)),
    (DISPATCHING, "decision_refused"): Witness(
        approval=({"approve_for": {"query": "dogs"}}, APPROVE), then=("decided",)
    ),
    (DISPATCHING, "decided"): Witness(approval=(APPROVE,)),
    (DISPATCHING, "denied_impersonation_aborted"): Witness(
        approval=(DENY,), env=ONE_ERROR, turn=IMPERSONATION
    ),
    (DISPATCHING, "denied_tool_error_loop"): Witness(approval=(DENY,), env=ONE_ERROR),
    (DISPATCHING, "denied_end_turn"): _after_approved({"success": True, "end_turn": True}),
    (DISPATCHING, "denied_novelai_retries_exhausted"): Witness(
        approval=(DENY,), env=ONE_NAI_RETRY, turn=NOVELAI
    ),
    (DISPATCHING, "denied_restart_takes_stash"): _after_approved(STASHED_RESTART),
    (DISPATCHING, "denied_ceiling_reached"): (
        Witness(approval=(DENY,), env=ONE_ITERATION, turn=NOVELAI),
        Witness(approval=(DENY,), env=ONE_ITERATION),
    ),
    (DISPATCHING, "denied_restarted"): _after_approved(RESTART),
    (DISPATCHING, "denied_novelai_retry"): Witness(approval=(DENY,), turn=NOVELAI),
    (DISPATCHING, "denied_tool_failed"): Witness(approval=(DENY,)),
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
    return [_model_path(declaration, move, to_source[move.source]) for move in declaration.moves]


def _to_final(declaration: Declaration, phase: Phase) -> tuple[Move, ...]:
    return shortest_paths(declaration, phase)[declaration.final]


def _model_path(declaration: Declaration, target: Move, before: tuple[Move, ...]) -> ModelPath:
    """The way to the source, the witness's `via`, the target, its `then`, the way to the end."""
    witness = witness_of(target)
    via = _named(declaration, target.source, witness.via)
    after = target.dest if not via else via[-1].dest
    if via:
        assert after is target.source, f"{target.where}: `via` must lead back to its source"
    then = _named(declaration, target.dest, witness.then)
    end = then[-1].dest if then else target.dest
    moves = (*before, *via, target, *then, *_to_final(declaration, end))
    given = {id(move) for move in (*via, *then)}
    return ModelPath(target=target, moves=moves, scenario=scenario_for(moves, given))


def _named(declaration: Declaration, start: Phase, names: Sequence[str]) -> tuple[Move, ...]:
    """The moves named `label` or `label:case`, taken one after another from `start`."""
    moves: list[Move] = []
    for name in names:
        label, _, case = name.partition(":")
        move = next(
            m
            for m in declaration.moves_from(start)
            if m.label == label and m.case == int(case or 0)
        )
        moves.append(move)
        start = move.dest
    return tuple(moves)


def scenario_for(
    moves: Sequence[Move], given: frozenset[int] | set[int] = frozenset()
) -> JsonObject:
    """The scenario that takes `moves`: the witnesses along them, merged.

    `given`: the moves (by `id`) whose needs another move's witness gives (`Witness.via`).
    """
    streams: list[JsonObject] = []
    results: list[JsonObject] = []
    approval: list[Any] = []
    env: dict[str, str] = {}
    turn: JsonObject = {}
    for move in moves:
        if id(move) in given:
            continue
        witness = witness_of(move)
        if witness.calls:
            streams[-1] = {key: value for key, value in streams[-1].items() if key != "call"}
            streams[-1]["calls"] = list(witness.calls)
        streams.extend([witness.stream] if witness.stream is not None else [])
        results.extend([witness.result] if witness.result is not None else [])
        approval.extend(witness.approval)
        _merge(env, witness.env, move)
        _merge(turn, witness.turn, move)
    tool = {**TOOL_SPEC, "results": results or [{"success": True}]}
    if approval:
        tool["approval"] = approval
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
