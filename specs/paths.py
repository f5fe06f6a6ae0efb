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

from toolloop.specs.machine import MACHINE, Declaration, DeclaredMove
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
    """Moves (their row names) taken between the source and this move, when the
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
        via=("decided", "call_settled"),
    )


#: The row name of each declared move -> its witness; every row has one.
WITNESSES: dict[str, Witness] = {
    "started": Witness(),
    "completed": _stream({"status": "completed", "text": "Done."}),
    "stream_failed:silent": _stream({"stall": True, "text": "half a sen"}),
    "stream_failed": _stream({"status": "error", "error": "HTTP 500"}),
    "empty_response": _stream({"status": "empty_response"}),
    "stopped_by_user": _stream({"status": "stopped_by_user", "text": "partial"}),
    "follow_up_interrupt": _stream({"status": "follow_up_interrupt"}),
    "call_malformed": _stream({"text": "", "call": {"name": "  "}}),
    "stopped_before_tool": _stream({**CALL, "stop_before_tool": True}),
    "impersonation_aborted:refused": _stream(TRUNCATED, env=ONE_ERROR, turn=IMPERSONATION),
    "tool_error_loop:refused": _stream(TRUNCATED, env=ONE_ERROR),
    "novelai_retries_exhausted:refused": _stream(
        TRUNCATED_AFTER_TEXT, env=ONE_NAI_RETRY, turn=NOVELAI
    ),
    "ceiling_reached:refused_novelai": _stream(
        TRUNCATED_AFTER_TEXT, env=ONE_ITERATION, turn=NOVELAI
    ),
    "ceiling_reached:refused": _stream(TRUNCATED, env=ONE_ITERATION),
    "novelai_retry:refused": _stream(TRUNCATED_AFTER_TEXT, turn=NOVELAI),
    "tool_failed:refused": _stream(CALL, turn=BLOCKED_TURN),
    "dispatched": _stream(CALL),
    "call_settled:after_stop": _result({"hang": True, "kill": True}, calls=PAIR),
    "call_settled": _result({"success": True}, calls=PAIR),
    "stopped_during_tool": _result({"hang": True, "kill": True}),
    "restart_takes_stash": _result(STASHED_RESTART),
    "impersonation_aborted": _result(FAILURE, env=ONE_ERROR, turn=IMPERSONATION),
    "tool_error_loop": _result(FAILURE, env=ONE_ERROR),
    "end_turn": _result({"success": True, "end_turn": True}),
    "novelai_retries_exhausted": _result(FAILURE, env=ONE_NAI_RETRY, turn=NOVELAI),
    "exit_policy_ended": _result({"success": True}, turn=NOVELAI),
    "restart_takes_stash:batch": _result(STASHED_RESTART, calls=(TRUNCATED_ARGS, ARGS)),
    "ceiling_reached:restart": _result(RESTART, env=ONE_ITERATION),
    "ceiling_reached:novelai_failure": _result(FAILURE, env=ONE_ITERATION, turn=NOVELAI),
    "ceiling_reached:failure": _result(FAILURE, env=ONE_ITERATION),
    "ceiling_reached:success": _result({"success": True}, env=ONE_ITERATION),
    "restarted": _result(RESTART),
    "restarted:batch": _result(RESTART, calls=(TRUNCATED_ARGS, ARGS)),
    "novelai_retry": _result(FAILURE, turn=NOVELAI),
    "tool_failed": _result(FAILURE),
    "tool_succeeded": _result({"success": True, "data": {"hits": 3}}),
    # approval (SPEC 6c): a denial finishes the batch with the exits of a failure
    "withdrawn": Witness(approval=(KILL,), calls=PAIR, then=("stopped_while_waiting",)),
    "stopped_while_waiting": Witness(approval=(KILL,)),
    "decision_refused": Witness(
        approval=({"approve_for": {"query": "dogs"}}, APPROVE), then=("decided",)
    ),
    "decided": Witness(approval=(APPROVE,)),
    "denied_impersonation_aborted": Witness(approval=(DENY,), env=ONE_ERROR, turn=IMPERSONATION),
    "denied_tool_error_loop": Witness(approval=(DENY,), env=ONE_ERROR),
    "denied_end_turn": _after_approved({"success": True, "end_turn": True}),
    "denied_novelai_retries_exhausted": Witness(approval=(DENY,), env=ONE_NAI_RETRY, turn=NOVELAI),
    "denied_restart_takes_stash": _after_approved(STASHED_RESTART),
    "denied_ceiling_reached:novelai_failure": Witness(
        approval=(DENY,), env=ONE_ITERATION, turn=NOVELAI
    ),
    "denied_ceiling_reached:failure": Witness(approval=(DENY,), env=ONE_ITERATION),
    "denied_restarted": _after_approved(RESTART),
    "denied_novelai_retry": Witness(approval=(DENY,), turn=NOVELAI),
    "denied_tool_failed": Witness(approval=(DENY,)),
    "ceiling_reached:stash": Witness(env=ONE_ITERATION),
    "restarted_with_stash": Witness(),
}


class NoWitness(ToolloopError, LookupError):
    """A declared move has no witness, so no scenario can be built for it."""


class ConflictingWitnesses(ToolloopError, ValueError):
    """Two moves on one path need different values of the same setting."""


@attrs.frozen(kw_only=True)
class ModelPath:
    """The path the model predicts for one target move, and the scenario that takes it."""

    target: DeclaredMove
    moves: tuple[DeclaredMove, ...]
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


def shortest_paths(declaration: Declaration, start: Phase) -> dict[Phase, tuple[DeclaredMove, ...]]:
    """The shortest move sequence from `start` to each phase (breadth first, declared order)."""
    paths: dict[Phase, tuple[DeclaredMove, ...]] = {start: ()}
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


def _to_final(declaration: Declaration, phase: Phase) -> tuple[DeclaredMove, ...]:
    return shortest_paths(declaration, phase)[declaration.final]


def _model_path(
    declaration: Declaration, target: DeclaredMove, before: tuple[DeclaredMove, ...]
) -> ModelPath:
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


def _named(
    declaration: Declaration, start: Phase, names: Sequence[str]
) -> tuple[DeclaredMove, ...]:
    """The moves of the rows `names`, taken one after another from `start`."""
    moves: list[DeclaredMove] = []
    for name in names:
        move = next(m for m in declaration.moves_from(start) if m.name == name)
        moves.append(move)
        start = move.dest
    return tuple(moves)


def scenario_for(
    moves: Sequence[DeclaredMove], given: frozenset[int] | set[int] = frozenset()
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


def witness_of(move: DeclaredMove) -> Witness:
    """The witness of a declared move, or `NoWitness` naming it."""
    found = WITNESSES.get(move.name)
    if found is None:
        raise NoWitness(f"{move.where}: no witness in toolloop.specs.paths.WITNESSES")
    return found


def _merge(into: dict[str, Any], needs: Mapping[str, Any], move: DeclaredMove) -> None:
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
            row = path.target.name.replace(":", "-")
            name = f"{path.target.source.value}-{row}.json"
            (out_dir / name).write_text(json.dumps(path.scenario, indent=2) + "\n")
    return json.dumps([path.to_json() for path in paths], indent=2)
