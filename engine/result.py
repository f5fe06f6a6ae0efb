"""Stage 04: build result. Pure assembly of the attempt's result from its state."""

import attrs

from toolloop.engine.commands import Effect, Finish
from toolloop.states import (
    GenerationTurnResult,
    IterationState,
    PersonaResponse,
    Sticker,
    ThoughtLogOwner,
    TurnSettings,
    TurnStatus,
)


def build_result(
    state: IterationState, status: TurnStatus, *, text: str, sticker: Sticker | None = None
) -> GenerationTurnResult:
    """The result of an exit; a sticker survives only a `completed` one."""
    memory_text = memory_payload(text, state.details_text)
    persona = state.turn.persona
    responses = (
        (
            PersonaResponse(
                persona_name=persona.name,
                text=memory_text,
                persona_id=persona.id,
                persona_lineage_id=persona.lineage_id,
            ),
        )
        if memory_text
        else ()
    )
    return GenerationTurnResult(
        status=status,
        stream_results=state.stream_results,
        persona_responses=responses,
        tool_response_delivered=True if state.tool_response_delivered else None,
        thought_log=state.thought_log,
        thought_log_owner=None if state.thought_log is None else thought_log_owner(state.turn),
        selected_sticker=sticker if status is TurnStatus.COMPLETED else None,
    )


def ended(effects: list[Effect], move: str) -> None:
    """Name the move that ends the attempt in its result (`ended_by`), when the row finishes it.

    Called by `step` for a row whose destination is `finished` (`step.Group.take`):
    the row knows its move, the actions that built the result do not.
    """
    if effects and isinstance(last := effects[-1], Finish):
        effects[-1] = Finish(result=attrs.evolve(last.result, ended_by=str(move)))


def memory_payload(text: str, details: str) -> str:
    """The short-term-memory text: the reply, then the scene metadata when there is any."""
    text, details = text.strip(), details.strip()
    return f"{text}\n\n[Scene Metadata]\n{details}" if details else text


def thought_log_owner(turn: TurnSettings) -> ThoughtLogOwner:
    """Whose identity shows the thought log: the impersonated user, an alter, or the bot."""
    if turn.user_impersonation:
        return ThoughtLogOwner(
            type="user_impersonation",
            username=turn.impersonated_username or "User",
            avatar_url=turn.impersonated_avatar_url,
        )
    if turn.persona.is_alter:
        return ThoughtLogOwner(type="persona", persona=turn.persona)
    return ThoughtLogOwner(type="default")
