"""Invariants of a batch of calls (SPEC 6b) in the pure core, over generated attempts.

Each attempt's streams carry batches of two to five calls (some truncated, some
of an exclusive tool or of the short-term memory tool), the tools settle in an
order the generator picks, and the parallel limit is one to three, so every
rule of 6b meets every other.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.drive import Run, drive
from toolloop.engine.commands import DispatchTool, StartTool
from toolloop.engine.events import StopRequest, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import initial_state, step
from toolloop.engine.tool_call import FAILED, RESTARTED
from toolloop.states import (
    FunctionCall,
    IterationState,
    LoopConfig,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
)

NAMES = ["web_search", "roll_dice", "read_file", "update_short_term_memory"]
EXCLUSIVE = frozenset({"read_file"})
ALONE = EXCLUSIVE | {"update_short_term_memory"}

batch_calls = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from([False, False, False, True])),
    min_size=2,
    max_size=5,
)


def _batch(number: int, calls: list[tuple[str, bool]], text: str) -> StreamResult:
    made = tuple(
        FunctionCall(
            name=name, args={"q": "x"}, arguments_truncated=cut, call_id=f"c{number}_{position}"
        )
        for position, (name, cut) in enumerate(calls)
    )
    return StreamResult(
        status=StreamStatus.FUNCTION_CALL,
        accumulated_text=text,
        data=made[0],
        calls=made,
        model_parts=({"type": "text", "text": text},) if text else (),
    )


streams = st.lists(
    st.tuples(batch_calls, st.sampled_from(["", "Let me look."])), min_size=1, max_size=4
).map(lambda drawn: [_batch(n, calls, text) for n, (calls, text) in enumerate(drawn)])
results = st.lists(
    st.builds(
        lambda success, end: ToolResult(
            success=success, error=None if success else "failed", end_turn=end
        ),
        st.booleans(),
        st.sampled_from([False, False, False, False, True]),
    ),
    min_size=1,
    max_size=8,
)
configs = st.builds(
    lambda limit, errors: LoopConfig(
        tool_parallel_limit=limit,
        max_consecutive_tool_errors=errors,
        max_function_call_iterations=6,
    ),
    st.integers(1, 3),
    st.integers(1, 4),
)
stops = st.lists(
    st.sampled_from([StopRequest.NONE] * 10 + [StopRequest.STOP, StopRequest.FOLLOW_UP]),
    min_size=1,
    max_size=12,
)
picks = st.lists(st.integers(0, 4), min_size=1, max_size=6)

attempts = st.builds(
    lambda s, r, c, p, o: drive(
        s, r, config=c, stops=p, picks=o, exclusive_tools=EXCLUSIVE, turn=TurnSettings()
    ),
    streams,
    results,
    configs,
    stops,
    picks,
)


@attrs.frozen
class Batch:
    """One batch of a run: the steps from its stream to the step that ended it."""

    before: IterationState
    """The state its stream arrived in."""
    stream: StreamResult
    steps: tuple[tuple[object, tuple[object, ...], IterationState], ...]
    """(event, effects, state after) of each of its steps, its stream's first."""

    @property
    def after(self) -> IterationState:
        return self.steps[-1][2]


def batches(run: Run) -> Iterator[Batch]:
    """Every batch the run handled (a stream whose calls all reached stage 02's gates)."""
    steps = list(
        zip(run.events, (effects for _, effects in run.steps), run.states[1:], strict=True)
    )
    for at, (event, _, _) in enumerate(steps):
        if not (isinstance(event, StreamEnded) and len(event.result.calls) > 1):
            continue
        end = at + 1
        while end < len(steps) and isinstance(steps[end][0], ToolSettled):
            end += 1
        yield Batch(before=run.states[at], stream=event.result, steps=tuple(steps[at:end]))


def started(batch: Batch) -> list[int]:
    """The positions of the batch's calls the core started, in the order it started them."""
    return [
        effect.index
        for _, effects, _ in batch.steps
        for effect in effects
        if isinstance(effect, DispatchTool | StartTool)
    ]


def running_sets(batch: Batch) -> Iterator[set[int]]:
    """The calls running after each step of the batch."""
    running: set[int] = set()
    for event, effects, _ in batch.steps:
        if isinstance(event, ToolSettled):
            running.discard(event.index)
        running |= {e.index for e in effects if isinstance(e, DispatchTool | StartTool)}
        yield set(running)


def kept(batch: Batch) -> bool:
    """The batch ended by keeping its entries (not an abort before or during it)."""
    return len(batch.after.function_history) > len(batch.before.function_history)


@given(run=attempts)
@settings(max_examples=300)
def test_every_call_of_a_kept_batch_gets_exactly_one_response_in_the_models_order(
    run: Run,
) -> None:
    """One response per call: the entries a batch adds are its calls, once each, in order."""
    for batch in batches(run):
        if not kept(batch):
            continue
        added = batch.after.function_history[len(batch.before.function_history) :]
        ids = [entry.function_call.call_id for entry in added]
        assert ids == [call.call_id for call in batch.stream.calls]


@given(run=attempts)
@settings(max_examples=300)
def test_no_call_of_a_batch_runs_twice_and_a_refused_call_never_runs(run: Run) -> None:
    """Each call is started at most once, and never when its arguments were truncated."""
    for batch in batches(run):
        positions = started(batch)
        assert len(positions) == len(set(positions))
        assert not any(batch.stream.calls[p].arguments_truncated for p in positions)


@given(run=attempts)
@settings(max_examples=300)
def test_at_most_the_parallel_limit_of_calls_run_at_once(run: Run) -> None:
    """Concurrency: after every step, no more calls run than TOOL_PARALLEL_LIMIT."""
    for batch in batches(run):
        limit = batch.before.config.tool_parallel_limit
        assert all(len(running) <= limit for running in running_sets(batch))


@given(run=attempts)
@settings(max_examples=300)
def test_an_exclusive_call_never_runs_beside_another(run: Run) -> None:
    """Exclusivity: whenever an exclusive (or memory) call runs, it runs alone."""
    for batch in batches(run):
        for running in running_sets(batch):
            names = {batch.stream.calls[p].name for p in running}
            if names & ALONE:
                assert len(running) == 1


@given(run=attempts)
@settings(max_examples=300)
def test_calls_start_in_the_models_order(run: Run) -> None:
    """Start order: the calls of a batch are started in the order the model made them."""
    for batch in batches(run):
        positions = started(batch)
        assert positions == sorted(positions)


@given(run=attempts)
@settings(max_examples=300)
def test_a_stop_during_a_batch_adds_nothing_and_starts_nothing_more(run: Run) -> None:
    """A kill: the batch adds no entry, and the step that saw it starts no call."""
    for batch in batches(run):
        last_event, last_effects, after = batch.steps[-1]
        if isinstance(last_event, ToolSettled) and last_event.stop is StopRequest.STOP:
            assert after.function_history == batch.before.function_history
            assert not any(isinstance(e, DispatchTool | StartTool) for e in last_effects)


@given(run=attempts)
@settings(max_examples=300)
def test_the_error_counter_after_a_batch_is_the_single_call_counter_over_its_entries(
    run: Run,
) -> None:
    """Counting: the count after a kept batch is one call's rule applied to its entries in order."""
    for batch in batches(run):
        if not kept(batch):
            continue
        count = batch.before.consecutive_tool_errors
        added = batch.after.function_history[len(batch.before.function_history) :]
        restarted = False
        for entry in added:
            count = count + 1 if entry.response.get("status") == FAILED else 0
            restarted = restarted or entry.response.get("status") == RESTARTED
        # A restart after the batch resets both counters, as a single call's restart does.
        assert batch.after.consecutive_tool_errors == (0 if restarted else count)


def test_a_batch_of_one_is_a_single_call() -> None:
    """A stream whose `calls` hold one call takes exactly the single call's step."""
    call = FunctionCall(name="web_search", args={"q": "x"}, call_id="c0")
    single = StreamResult(status=StreamStatus.FUNCTION_CALL, data=call)
    state = step(initial_state(LoopConfig(), TurnSettings()), TurnStarted()).state
    one = step(state, StreamEnded(result=single))
    listed = step(state, StreamEnded(result=attrs.evolve(single, calls=(call,))))
    assert (one.move, one.effects) == (listed.move, listed.effects)
    assert one.state.pending == attrs.evolve(listed.state.pending, stream=single)
