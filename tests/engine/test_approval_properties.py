"""Properties of approval (SPEC 6c), over generated runs of the pure core (hypothesis).

The runs are `tests.specs.strategies.approval_attempts`: tools that wait for a
person, batches, and every way a wait ends (approved, denied, unanswered,
answered for other arguments, a stop meanwhile), in any order.
"""

from __future__ import annotations

from hypothesis import given, settings

from tests.engine.drive import Run
from tests.specs.strategies import approval_attempts
from toolloop.engine.commands import DispatchTool, StartTool
from toolloop.engine.events import ApprovalDecided, StreamEnded
from toolloop.engine.tool_call import DENIED
from toolloop.states import Verdict, args_digest

Key = tuple[int, int]
"""A call of a run: (its iteration, its position in its batch)."""


def _dispatched(run: Run) -> list[tuple[Key, object]]:
    """Every call handed to the registry, with its arguments."""
    return [
        ((before.iteration, effect.index), effect.call.args)
        for before, (_, effects) in zip(run.states, run.steps, strict=False)
        for effect in effects
        if isinstance(effect, DispatchTool | StartTool)
    ]


def _waiting(run: Run) -> dict[Key, str]:
    """Every call that had to wait for approval, with the digest of its exact arguments."""
    found: dict[Key, str] = {}
    for before, event in zip(run.states, run.events, strict=False):
        if isinstance(event, StreamEnded) and event.approval:
            for index, (asks, call) in enumerate(
                zip(event.approval, event.result.batch, strict=True)
            ):
                if asks:
                    found[(before.iteration, index)] = args_digest(call.args)
    return found


def _decisions(run: Run) -> list[tuple[Key, ApprovalDecided]]:
    return [
        ((before.iteration, event.index), event)
        for before, event in zip(run.states, run.events, strict=False)
        if isinstance(event, ApprovalDecided)
    ]


@given(run=approval_attempts)
@settings(max_examples=300)
def test_a_call_that_needs_approval_never_runs_without_an_approval_of_its_exact_arguments(
    run: Run,
) -> None:
    """Every dispatch of a waiting call comes after an approving decision whose digest is
    the digest of the arguments dispatched."""
    waiting = _waiting(run)
    approved: set[tuple[Key, str]] = set()
    for before, event, (_, effects) in zip(run.states, run.events, run.steps, strict=False):
        decision = event.decision if isinstance(event, ApprovalDecided) else None
        if decision is not None and decision.verdict is Verdict.APPROVE:
            approved.add(((before.iteration, event.index), decision.digest))  # type: ignore[union-attr]
        for effect in effects:
            if isinstance(effect, DispatchTool | StartTool):
                key = (before.iteration, effect.index)
                if key in waiting:
                    assert waiting[key] == args_digest(effect.call.args)
                    assert (key, waiting[key]) in approved, f"call {key} ran unapproved"


@given(run=approval_attempts)
@settings(max_examples=300)
def test_a_denied_call_is_never_run_and_its_denial_is_all_the_model_sees_of_it(run: Run) -> None:
    """A call denied, unanswered or withdrawn never reaches the registry, and when its batch
    is kept its one history entry answers it with `tool_call_denied` and nothing of a run."""
    waiting, ran = _waiting(run), {key for key, _ in _dispatched(run)}
    refused = {
        key
        for key, event in _decisions(run)
        if event.decision is None
        or (event.decision.verdict is Verdict.DENY and event.decision.digest == waiting[key])
    }
    assert not refused & ran
    for before, after in zip(run.states, run.states[1:], strict=False):
        pending = before.pending
        kept = after.function_history[len(before.function_history) :]
        if pending is None or not pending.batch or len(kept) != len(pending.batch):
            continue
        for index, entry in enumerate(kept):
            if (before.iteration, index) in refused:
                result = entry.function_response["response"]["result"]
                assert result["status"] == DENIED
                assert set(result) == {"status", "tool_name", "reason"}
