"""Writing a running turn's trace to a file, step by step, without keeping the steps.

`TraceWriter.observe` is an observer for `run_tool_loop`: each step's lines go
to the file as the step is taken (`toolloop.engine.trace.TraceEncoder` keeps
only the last value of each type, which the next one's `reuse` refers to), so
the trace of a turn of 10,000 iterations is never held whole. `trace_file`
opens the file and writes the end line when the block is left; a file
without it was cut off, and readers refuse it.

A trace records one attempt: give a writer to one `run_tool_loop` call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from toolloop.engine.events import Event
from toolloop.engine.step import Step
from toolloop.engine.trace import Redact, TraceEncoder, TraceStep
from toolloop.states import IterationState


class TraceWriter:
    """Writes each observed step to `file`; the first step's state gives the start line.

    A failed write never disturbs the turn: the writer stops writing, keeps
    the error, and `close` raises it, so the end line of a trace with a gap is
    never written.
    """

    def __init__(self, file: TextIO, redact: Redact | None = None) -> None:
        self._file = file
        self._encoder = TraceEncoder(redact)
        self._started = False
        self._failed: OSError | None = None

    def observe(self, before: IterationState, event: Event, out: Step) -> None:
        """Write one step (an `Observer` of `run_tool_loop`)."""
        lines = [] if self._started else [self._encoder.start(before.config, before.turn)]
        self._started = True
        record = TraceStep(
            event=event,
            effects=out.effects,
            move=out.move,
            source=before.phase,
            dest=out.state.phase,
        )
        lines.extend(self._encoder.step(record))
        self._write(lines)

    def close(self) -> None:
        """Write the end line; raise the error of a write that failed instead."""
        if self._failed is not None:
            raise self._failed
        if self._started:
            self._write([self._encoder.end()])
            if self._failed is not None:
                raise self._failed

    def _write(self, lines: list[str]) -> None:
        if self._failed is None:
            try:
                self._file.write("".join(f"{line}\n" for line in lines))
            except OSError as error:
                self._failed = error


@contextlib.contextmanager
def trace_file(path: Path, redact: Redact | None = None) -> Iterator[TraceWriter]:
    """A writer to a new file at `path`, its end line written when the block is left.

    The end line is written however the block ends (a turn that raised was
    recorded to its last step); only a write that failed leaves it out.
    """
    with path.open("w", encoding="utf-8", newline="\n") as file:
        writer = TraceWriter(file, redact)
        try:
            yield writer
        finally:
            writer.close()
