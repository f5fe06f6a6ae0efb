"""`toolloop demo`: one whole tool-calling conversation through the real adapter, over HTTP.

Without `--base-url` the model is the embedded scripted one (`demo_model`),
served on loopback by `ModelServer`, so no key is needed; with `--base-url URL
--model NAME` it is any OpenAI-compatible endpoint (key from `OPENAI_API_KEY`,
none for local servers). Either way the real `OpenAICompatProvider`, the real
`ToolRegistry` with two real tools and `run_generation_turn` do the work. With
`--provider gemini` the same conversation speaks Gemini's native protocol
through `GeminiProvider`: against the embedded model served by the loopback
`GeminiServer` (signatures checked as Gemini 3 checks them), or, with
`--base-url`, Gemini's API root (key from `GEMINI_API_KEY`).

`Display` is the turn's channel and its step observer at once: text is shown as
it arrives, each tool call with its arguments and result, and, on a terminal, a
live status line says whether the model or a tool is working. When stdout is
not a terminal (CI, a pipe) the same run is printed as plain text, no live
region and no colour.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.ports import Notice, StreamSpan
from toolloop.effects.providers.gemini import GeminiProvider
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, ToolSettled
from toolloop.engine.step import Step
from toolloop.states import (
    ContextItem,
    GenerationTurnResult,
    IterationState,
    JsonObject,
    StreamError,
    ToolResult,
    TurnSettings,
    TurnStatus,
)
from toolloop.tools import demo_gemini_model, demo_model, demo_tools
from toolloop.tools.console_approvals import ConsoleApprovals
from toolloop.tools.observed import traced

QUESTION = "What is 17 * 23 + 4, and what time is it in Tokyo?"
USER = "you"
SYSTEM = (
    "You are Tomo, a concise assistant. Use the calculate tool for arithmetic and the "
    "get_time tool for the time of day; never guess either. Say in a few words what you "
    "are about to do before each tool call, then answer in one sentence."
)
GEMINI_KEY_VARIABLE = "GEMINI_API_KEY"
PROVIDERS = ("openai", "gemini")


def demo(
    *,
    base_url: str | None = None,
    model: str | None = None,
    verbatim: bool = False,
    approve: bool = False,
    provider: str = "openai",
) -> int:
    """Run the conversation and print it; 0 when the turn completed, 1 otherwise, 2 on misuse."""
    console = Console(highlight=False)
    if base_url is not None and model is None:
        console.print("toolloop demo: --base-url needs --model NAME", markup=False)
        return 2
    if provider not in PROVIDERS:
        console.print(f"toolloop demo: --provider is one of {', '.join(PROVIDERS)}", markup=False)
        return 2
    status = 130
    try:
        status = anyio.run(
            _converse, console, base_url, model, verbatim, approve, provider, backend="trio"
        )
    except* KeyboardInterrupt:  # bare, or from inside the loop's task groups
        console.print("\ninterrupted", markup=False)
    except* demo_model.BadKey as bad:
        print(f"toolloop demo: {bad.exceptions[0]}", file=sys.stderr)
        status = 2
    return status


async def _converse(
    console: Console,
    base_url: str | None,
    model: str | None,
    v: bool,
    approve: bool,
    kind: str,
) -> int:
    embedded = demo_gemini_model if kind == "gemini" else demo_model
    with embedded.endpoint(base_url) as url:
        provider: GeminiProvider | OpenAICompatProvider
        if kind == "gemini":
            gemini_key = "" if base_url is None else os.environ.get(GEMINI_KEY_VARIABLE, "")
            name = "demo" if base_url is None else "endpoint"
            provider = GeminiProvider(
                base_url=url, model=model or embedded.MODEL, api_key=gemini_key, name=name
            )
        else:
            key = os.environ.get(demo_model.KEY_VARIABLE)
            provider = demo_model.provider(url, base_url=base_url, model=model, key=key)
        display = Display(console)
        display.header(url, provider.model, verbatim=v)
        async with provider:
            started = anyio.current_time()
            turn, attempts = demo_turn(), [Attempt(provider=provider, verbatim_enabled=v)]
            with display, traced(turn, attempts, display.observe) as hooks:
                result = await run_generation_turn(
                    turn=turn,
                    attempts=attempts,
                    registry=demo_registry(approve=approve),
                    channel=display,
                    control=MemoryTurnControl(),
                    observer=hooks.observer,
                    on_event=hooks.on_event,
                    approvals=ConsoleApprovals(console) if approve else None,
                )
            display.report(result, anyio.current_time() - started)
    return 0 if result.status is TurnStatus.COMPLETED else 1


def demo_turn() -> TurnSettings:
    """The turn: the instructions and the user's question."""
    return TurnSettings(
        context=(
            ContextItem(kind="system", content=SYSTEM),
            ContextItem(author=USER, content=QUESTION),
        )
    )


def demo_registry(*, approve: bool = False) -> ToolRegistry:
    """The two demo tools, registered with their JSON schemas; with `approve`, each call
    waits for a yes at the terminal (SPEC 6c)."""
    registry = ToolRegistry()
    registry.register(
        _calculate,
        name="calculate",
        description="Evaluate an arithmetic expression exactly (+ - * / // % **).",
        parameters=demo_tools.CALCULATE,
        requires_approval=approve,
    )
    registry.register(
        _get_time,
        name="get_time",
        description="The current time and weekday in an IANA time zone.",
        parameters=demo_tools.GET_TIME,
        requires_approval=approve,
    )
    return registry


async def _calculate(args: JsonObject, call: ToolCall) -> JsonObject:
    return demo_tools.calculate(args["expression"])


async def _get_time(args: JsonObject, call: ToolCall) -> JsonObject:
    return demo_tools.get_time(args["timezone"])


class Display:
    """The demo's channel and step observer: prints the conversation as it happens."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.paragraph = Text()
        """The reply text of the current stream, not yet printed for good (terminal only)."""
        self.spinner = Spinner("dots", text="starting")
        self.live = (
            Live(self, console=console, transient=True, refresh_per_second=12.5)
            if console.is_terminal
            else None
        )
        self.ids: list[str] = []
        self.provider_calls = 0
        self.tools_run = 0
        self._line_open = False
        """Plain output: streamed text is on the current line, a newline is owed."""

    def __rich__(self) -> RenderableType:
        return Group(self.paragraph, self.spinner) if self.paragraph else self.spinner

    def __enter__(self) -> Display:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._end_paragraph()
        if self.live is not None:
            self.live.stop()

    # -- what the loop reports -------------------------------------------------------------

    def observe(self, state: IterationState, event: Event, step: Step) -> None:
        """Follow the engine: a provider call starts, a tool is dispatched or settles."""
        if isinstance(event, ToolSettled):
            self.tools_run += 1
            self._print(_outcome(event.result))
        for effect in step.effects:
            if isinstance(effect, fx.StreamOnce):
                self.provider_calls += 1
                self._status(f"waiting for the model (call {self.provider_calls})")
            elif isinstance(effect, fx.DispatchTool):
                self._end_paragraph()
                self._print(_call_line(effect.call.name, effect.call.args))
                self._status(f"running {effect.call.name}")

    # -- the Channel port ------------------------------------------------------------------

    def stream_started(self, stream: StreamSpan) -> None:
        """Each stream's text is shown as it arrives; nothing to open."""

    def stream_ended(self, stream: StreamSpan) -> None:
        """Nothing is buffered per stream; the paragraph ends at the next tool or notice."""

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        self.ids.append(f"m{len(self.ids) + 1}")
        opening = Text("Tomo: ", style="bold cyan") if not self._line_open else Text()
        self._line_open = True
        if self.live is None:
            self.console.print(opening + Text(text), end="", soft_wrap=True)
            return
        # Rebound, not appended to: the live region renders from another thread.
        self.paragraph = self.paragraph + opening + Text(text)
        self._status("the model is writing")

    async def send_notice(self, notice: Notice) -> None:
        self._end_paragraph()
        self._print(Text(f"[{notice.level}] {notice.text}", style="yellow"))

    async def send_hidden_notice(self, notice: Notice) -> None:
        self._end_paragraph()
        self._print(Text(f"(thought log, {notice.level}) {notice.text}", style="dim"))

    def delivered_message_ids(self) -> Sequence[str]:
        return tuple(self.ids)

    async def delete_messages(self, ids: Sequence[str]) -> None:
        self._end_paragraph()
        self._print(Text(f"(withdrew {len(ids)} messages of a superseded attempt)", style="dim"))

    # -- output ----------------------------------------------------------------------------

    def header(self, url: str, model: str, *, verbatim: bool) -> None:
        mode = ", verbatim tool calls on" if verbatim else ""
        self._print(Text(f"toolloop demo: model {model} at {url}{mode}", style="dim"))
        self._print(Text(f"{USER}: ", style="bold green") + Text(QUESTION))

    def report(self, result: GenerationTurnResult, seconds: float) -> None:
        """The turn's result, what the persona said, and the one-line summary."""
        style = "bold green" if result.status is TurnStatus.COMPLETED else "bold red"
        self._print(Text("turn: ") + Text(result.status.value, style=style))
        error = result.stream_results[-1].data if result.stream_results else None
        if isinstance(error, StreamError):
            self._print(Text(f"error: {error.type}: {error.message}", style="red"))
        for response in result.persona_responses:
            self._print(Text(f"persona response ({response.persona_name}): {response.text}"))
        self._print(
            Text(
                f"summary: {_count(self.provider_calls, 'provider call')}, "
                f"{_count(self.tools_run, 'tool')} run, {seconds:.2f} s",
                style="bold",
            )
        )

    def _end_paragraph(self) -> None:
        """Print the streamed text for good (terminal) or end its line (plain)."""
        if self.live is not None and self.paragraph:
            self.console.print(self.paragraph)
            self.paragraph = Text()
        elif self.live is None and self._line_open:
            self.console.print()
        self._line_open = False

    def _print(self, text: Text) -> None:
        self.console.print(text, soft_wrap=self.live is None)

    def _status(self, message: str) -> None:
        self.spinner.update(text=Text(f"{message}…", style="dim"))
        if self.live is not None:
            self.live.refresh()


def _call_line(name: str, args: JsonObject | None) -> Text:
    arguments = json.dumps(args or {}, ensure_ascii=False)
    return Text("⚙ ", style="magenta") + Text(name, style="bold magenta") + Text(f" {arguments}")


def _outcome(result: ToolResult) -> Text:
    if not result.success:
        return Text(f"  ↳ failed: {result.error}", style="red")
    return Text(f"  ↳ {_json(result.data)}", style="green")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)
