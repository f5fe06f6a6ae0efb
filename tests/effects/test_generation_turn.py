"""The generation turn (SPEC 10) over real HTTP: loopback servers, the real adapter and registry.

Each attempt of a chain talks to its own loopback server, so the request bodies a
server recorded are exactly what that attempt sent.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import attrs
import pytest

from tests.openai_server import (
    OpenAIServer,
    Reply,
    error_reply,
    text_reply,
    tool_call_reply,
)
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.ports import Provider, StreamRequest, StreamSink
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.registry.stash import ContextStash
from toolloop.effects.turn import NUDGE, NUDGE_KIND, Attempt, RetryableError, run_generation_turn
from toolloop.states import (
    ApiFamily,
    ContextItem,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio

BASE = (
    ContextItem(kind="system", content="You are Tomo."),
    ContextItem(author="alice", content="Weather in Paris?"),
)
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
VERBATIM_CALL = '`get_weather({"city": "Paris"})`'
#: A short rolling timeout for the stalled-stream tests (the engine's minimum is an
#: environment rule; LoopConfig itself takes any value).
QUICK = LoopConfig(stream_sdk_call_timeout_ms=1_000, stream_abandoned_settle_timeout_ms=0)


@pytest.fixture
def primary() -> Iterator[OpenAIServer]:
    """The loopback server of the chain's first attempt."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def fallback() -> Iterator[OpenAIServer]:
    """The loopback server of the chain's second attempt."""
    with OpenAIServer() as server:
        yield server


@attrs.define
class Chain:
    """One generation turn under test: the registry, the channel and the attempts' providers."""

    tool_families: frozenset[ApiFamily] | None = None
    """The API families the weather tool is exposed to (None: all)."""
    channel: RecordingChannel = attrs.field(factory=RecordingChannel)
    calls: list[JsonObject] = attrs.field(factory=list)
    """The arguments of every weather call that ran."""
    providers: list[OpenAICompatProvider] = attrs.field(factory=list)

    def registry(self) -> ToolRegistry:
        registry = ToolRegistry()

        async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
            self.calls.append(args)
            return {"city": args["city"], "sky": "clear"}

        registry.register(get_weather, parameters=WEATHER, providers=self.tool_families)
        return registry

    def attempt(
        self,
        server: OpenAIServer,
        family: ApiFamily = ApiFamily.CUSTOM,
        *,
        verbatim: bool = False,
        config: LoopConfig | None = QUICK,
        raises: Exception | None = None,
    ) -> Attempt:
        """An attempt on `server`; with `raises`, its provider raises that after each stream."""
        adapter = OpenAICompatProvider(base_url=server.base_url, model="m", api_family=family)
        self.providers.append(adapter)
        provider: Provider = adapter if raises is None else RaisingAfterStream(adapter, raises)
        return Attempt(provider=provider, config=config, verbatim_enabled=verbatim)

    async def run(
        self,
        *attempts: Attempt,
        context: tuple[ContextItem, ...] = BASE,
        registry: ToolRegistry | None = None,
        **options: Any,
    ) -> GenerationTurnResult:
        """Run the turn; `options` (catalog, stash, reply_to, observer) go to the turn as given."""
        try:
            return await run_generation_turn(
                turn=TurnSettings(context=context),
                attempts=attempts,
                registry=registry or self.registry(),
                channel=self.channel,
                control=MemoryTurnControl(),
                **options,
            )
        finally:
            for provider in self.providers:
                await provider.aclose()


@attrs.frozen
class RaisingAfterStream:
    """A provider that streams through the real adapter, then raises: an unmapped failure."""

    inner: Provider
    error: Exception

    @property
    def descriptor(self) -> ProviderDescriptor:
        return self.inner.descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        await self.inner.stream(request, sink)
        raise self.error


def messages(server: OpenAIServer, number: int = 0) -> list[dict[str, Any]]:
    """The messages of the server's request `number`."""
    body = server.requests[number].body
    assert isinstance(body, dict)
    found: list[dict[str, Any]] = body["messages"]
    return found


def nudged(server: OpenAIServer) -> bool:
    """Whether every request the server got carried the nudge (and the first one did)."""
    carried = [
        any(NUDGE in str(m["content"]) for m in messages(server, n))
        for n in range(len(server.requests))
    ]
    assert carried and len(set(carried)) == 1, carried
    return carried[0]


def disconnected(*pieces: str) -> Reply:
    """A text stream that delivers `pieces`, then drops the connection: an `error` result."""
    return text_reply(*pieces).disconnected_after(1 + len(pieces))


def stalled(*pieces: str) -> Reply:
    """A text stream that delivers `pieces`, then goes silent: a `timeout` result."""
    return text_reply(*pieces).stalled_after(1 + len(pieces))


class TestBaseContext:
    async def test_every_attempt_starts_from_the_same_base_context(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """A fallback's first request has the base context only, not the primary's tool history."""
        chain = Chain()
        primary.script(tool_call_reply("get_weather", {"city": "Paris"}), error_reply(500, "down"))
        fallback.script(text_reply("Sunny."))
        await chain.run(chain.attempt(primary), chain.attempt(fallback))
        assert [m["role"] for m in messages(primary, 1)][-2:] == ["assistant", "tool"]
        assert messages(fallback) == messages(primary, 0)

    async def test_base_context_messages_come_first_and_unchanged(
        self, primary: OpenAIServer
    ) -> None:
        """An attempt without verbatim sends exactly the base context."""
        chain = Chain()
        primary.script(text_reply("Sunny."))
        await chain.run(chain.attempt(primary))
        assert messages(primary) == [
            {"role": "system", "content": "You are Tomo."},
            {"role": "user", "content": "alice: Weather in Paris?"},
        ]


class TestNudge:
    async def test_a_custom_fallback_behind_a_native_primary_gets_the_nudge(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """The nudge is decided per attempt: the custom fallback gets it, the native primary not."""
        chain = Chain()
        primary.script(error_reply(500, "down"))
        fallback.script(text_reply("Sunny."))
        await chain.run(
            chain.attempt(primary, ApiFamily.OPENAI, verbatim=True),
            chain.attempt(fallback, ApiFamily.CUSTOM, verbatim=True),
        )
        assert (nudged(primary), nudged(fallback)) == (False, True)

    async def test_a_native_fallback_behind_a_custom_primary_does_not_get_the_nudge(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """The custom primary's nudge is removed for the native fallback."""
        chain = Chain()
        primary.script(error_reply(500, "down"))
        fallback.script(text_reply("Sunny."))
        await chain.run(
            chain.attempt(primary, ApiFamily.CUSTOM, verbatim=True),
            chain.attempt(fallback, ApiFamily.OPENROUTER, verbatim=True),
        )
        assert (nudged(primary), nudged(fallback)) == (True, False)

    async def test_the_nudge_is_one_system_message_after_the_base_context(
        self, primary: OpenAIServer
    ) -> None:
        """A qualifying attempt sends the base context, then the nudge as a system message."""
        chain = Chain()
        primary.script(text_reply("Sunny."))
        await chain.run(chain.attempt(primary, verbatim=True))
        assert messages(primary)[-1] == {"role": "system", "content": f"[{NUDGE_KIND}]\n{NUDGE}"}
        assert len(messages(primary)) == len(BASE) + 1

    async def test_a_nudge_already_in_the_base_context_is_removed_for_a_native_attempt(
        self, primary: OpenAIServer
    ) -> None:
        """A host that baked the nudge into the base context still gets it stripped."""
        chain = Chain()
        primary.script(text_reply("Sunny."))
        baked = (*BASE, ContextItem(kind=NUDGE_KIND, content=NUDGE))
        await chain.run(chain.attempt(primary, ApiFamily.OPENAI, verbatim=True), context=baked)
        assert not nudged(primary)

    async def test_a_custom_attempt_whose_model_has_no_tools_gets_no_nudge(
        self, primary: OpenAIServer
    ) -> None:
        """With its only tool exposed to OpenAI alone, a custom attempt has nothing to nudge for."""
        chain = Chain(tool_families=frozenset({ApiFamily.OPENAI}))
        primary.script(text_reply("Sunny."))
        await chain.run(chain.attempt(primary, ApiFamily.CUSTOM, verbatim=True))
        assert not nudged(primary)
        assert "tools" not in primary.requests[0].body


class TestParserAgreesWithNudge:
    @pytest.mark.parametrize(
        ("enabled", "has_tools", "family"),
        list(itertools.product([True, False], [True, False], list(ApiFamily))),
    )
    async def test_a_verbatim_call_is_parsed_exactly_when_the_attempt_is_nudged(
        self, primary: OpenAIServer, enabled: bool, has_tools: bool, family: ApiFamily
    ) -> None:
        """For every kind of attempt, a call written as text runs iff the request had the nudge."""
        chain = Chain(tool_families=None if has_tools else frozenset())
        primary.script(text_reply(VERBATIM_CALL), text_reply("Sunny."))
        result = await chain.run(chain.attempt(primary, family, verbatim=enabled))
        parsed = bool(chain.calls)
        assert nudged(primary) is parsed is (enabled and has_tools and family is ApiFamily.CUSTOM)
        assert result.status is TurnStatus.COMPLETED

    async def test_a_parsed_verbatim_call_never_reaches_the_channel(
        self, primary: OpenAIServer
    ) -> None:
        """The custom, nudged attempt runs the call and shows only the text around it."""
        chain = Chain()
        primary.script(text_reply("Checking. ", VERBATIM_CALL), text_reply("Sunny."))
        await chain.run(chain.attempt(primary, verbatim=True))
        assert chain.calls == [{"city": "Paris"}]
        assert chain.channel.text == "Checking. Sunny."

    async def test_an_unnudged_attempt_shows_a_verbatim_call_as_text(
        self, primary: OpenAIServer
    ) -> None:
        """Without the parser the call text is plain reply text, and no tool runs."""
        chain = Chain()
        primary.script(text_reply(VERBATIM_CALL))
        await chain.run(chain.attempt(primary, ApiFamily.OPENAI, verbatim=True))
        assert (chain.calls, chain.channel.text) == ([], VERBATIM_CALL)


class TestHandover:
    async def test_an_error_hands_over_after_its_messages_are_deleted(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """A stream cut mid-body is `error`: its two messages are deleted, the fallback speaks."""
        chain = Chain()
        primary.script(disconnected("Hel", "lo"))
        fallback.script(text_reply("Sunny."))
        result = await chain.run(chain.attempt(primary), chain.attempt(fallback))
        assert chain.channel.texts == ["Hel", "lo", "Sunny."]
        assert chain.channel.deleted == ["m1", "m2"]
        assert (result.status, result.persona_responses[0].text) == (TurnStatus.COMPLETED, "Sunny.")

    async def test_a_timeout_hands_over_after_its_messages_are_deleted(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """A stream gone silent is `timeout`: its message is deleted, the fallback speaks."""
        chain = Chain()
        primary.script(stalled("Thinking"))
        fallback.script(text_reply("Sunny."))
        result = await chain.run(chain.attempt(primary), chain.attempt(fallback))
        assert chain.channel.texts == ["Thinking", "Sunny."]
        assert chain.channel.deleted == ["m1"]
        assert result.status is TurnStatus.COMPLETED

    async def test_each_superseded_attempt_of_a_longer_chain_is_cleaned_up(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """Three attempts: the first two fail, each one's messages are deleted, in order."""
        chain = Chain()
        primary.script(disconnected("a", "b"))
        fallback.script(disconnected("c"))
        with OpenAIServer() as third:
            third.script(text_reply("d"))
            attempts = [chain.attempt(s) for s in (primary, fallback, third)]
            result = await chain.run(*attempts)
        assert chain.channel.deleted == ["m1", "m2", "m3"]
        assert result.status is TurnStatus.COMPLETED

    async def test_a_completed_attempt_does_not_hand_over(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """A completed primary is the turn's result: the fallback is never called."""
        chain = Chain()
        primary.script(text_reply("Sunny."))
        result = await chain.run(chain.attempt(primary), chain.attempt(fallback))
        assert (result.status, fallback.requests, chain.channel.deleted) == (
            TurnStatus.COMPLETED,
            [],
            [],
        )

    async def test_an_empty_response_does_not_hand_over(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """Only `error` and `timeout` hand over; `empty_response` is the turn's result."""
        chain = Chain()
        primary.script(text_reply())
        result = await chain.run(chain.attempt(primary), chain.attempt(fallback))
        assert (result.status, fallback.requests) == (TurnStatus.EMPTY_RESPONSE, [])

    async def test_the_last_attempts_result_is_returned_even_when_it_failed(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """Both fail: the result is the fallback's error, and its own messages are kept."""
        chain = Chain()
        primary.script(disconnected("a"))
        fallback.script(disconnected("b"))
        result = await chain.run(chain.attempt(primary), chain.attempt(fallback))
        (last,) = result.stream_results
        assert (result.status, last.accumulated_text) == (TurnStatus.ERROR, "b")
        assert isinstance(last.data, StreamError)
        assert chain.channel.deleted == ["m1"]


class TestRetryableError:
    async def test_a_retryable_exception_hands_over_after_its_messages_are_deleted(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """A provider raising RetryableError is superseded like an `error` result."""
        chain = Chain()
        primary.script(text_reply("Hel", "lo"))
        fallback.script(text_reply("Sunny."))
        raising = chain.attempt(primary, raises=RetryableError("busy"))
        result = await chain.run(raising, chain.attempt(fallback))
        assert chain.channel.deleted == ["m1", "m2"]
        assert result.status is TurnStatus.COMPLETED

    async def test_a_retryable_exception_of_the_last_attempt_propagates(
        self, primary: OpenAIServer
    ) -> None:
        """With no attempt left, the RetryableError is the caller's, messages left as they are."""
        chain = Chain()
        primary.script(text_reply("Hel"))
        with pytest.raises(RetryableError, match=r"^busy$"):
            await chain.run(chain.attempt(primary, raises=RetryableError("busy")))
        assert chain.channel.deleted == []

    async def test_any_other_exception_propagates_without_handing_over(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """A non-retryable exception ends the turn at once: no fallback call, nothing deleted."""
        chain = Chain()
        primary.script(text_reply("Hel"))
        with pytest.raises(KeyError):
            await chain.run(chain.attempt(primary, raises=KeyError("bug")), chain.attempt(fallback))
        assert (fallback.requests, chain.channel.deleted) == ([], [])


@attrs.define
class ReplyChannel(RecordingChannel):
    """A recording channel that also keeps the reply target of every text."""

    reply_targets: list[str | None] = attrs.field(factory=list)

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        self.reply_targets.append(reply_to)
        await super().send_text(text, reply_to=reply_to)


def custom_catalog() -> NoticeCatalog:
    """The shipped catalog with the failed-tool notice reworded."""
    shipped = resources.files("toolloop.effects").joinpath("notices.json").read_text("utf-8")
    texts = json.loads(shipped)
    texts["en"]["tool_call_failed"] = "CUSTOM: {tool_name} failed"
    return NoticeCatalog(texts)


class TestPassedToEveryAttempt:
    """What the turn is given reaches each attempt's loop (SPEC 10, amended)."""

    async def test_the_stash_reaches_every_attempt(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """An item a tool stashes in either attempt is found by that attempt's restart."""
        stash = ContextStash()
        registry = ToolRegistry()

        async def fetch_video(args: JsonObject, call: ToolCall) -> JsonObject:
            key = stash.put(ContextItem(kind="enrichment", content=f"TRANSCRIPT-{len(stash)}"))
            return {"type": "context_restart_youtube", "pending_context_key": key}

        registry.register(fetch_video)
        primary.script(tool_call_reply("fetch_video", {}), disconnected("It"))
        fallback.script(tool_call_reply("fetch_video", {}), text_reply("It is about cats."))
        chain = Chain()
        attempts = (chain.attempt(primary), chain.attempt(fallback))
        result = await chain.run(*attempts, registry=registry, stash=stash)
        assert result.status is TurnStatus.COMPLETED
        assert "TRANSCRIPT-0" in json.dumps(primary.requests[1].body)
        assert "TRANSCRIPT-0" in json.dumps(fallback.requests[1].body)

    async def test_the_catalog_reaches_every_attempt(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """Each attempt's failed-tool notice is rendered from the catalog the turn was given."""
        primary.script(tool_call_reply("ghost_tool", {}), disconnected("Hm"))
        fallback.script(tool_call_reply("ghost_tool", {}), text_reply("Sorry."))
        chain = Chain()
        attempts = (chain.attempt(primary), chain.attempt(fallback))
        await chain.run(*attempts, catalog=custom_catalog())
        assert [n.text for n in chain.channel.thoughts] == ["CUSTOM: ghost_tool failed"] * 2

    async def test_the_reply_target_reaches_every_attempt(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """Both attempts' texts reply to the turn's trigger message."""
        chain = Chain(channel=ReplyChannel())
        primary.script(disconnected("Hel"))
        fallback.script(text_reply("Sunny."))
        await chain.run(chain.attempt(primary), chain.attempt(fallback), reply_to="trigger-7")
        channel = chain.channel
        assert isinstance(channel, ReplyChannel)
        assert (channel.texts, channel.reply_targets) == (["Hel", "Sunny."], ["trigger-7"] * 2)

    async def test_the_observer_sees_every_attempts_steps(
        self, primary: OpenAIServer, fallback: OpenAIServer
    ) -> None:
        """The observer is called for each attempt's steps, from its first to its last."""
        seen: list[str] = []
        chain = Chain()
        primary.script(disconnected("Hel"))
        fallback.script(text_reply("Sunny."))
        attempts = (chain.attempt(primary), chain.attempt(fallback))
        await chain.run(*attempts, observer=lambda before, event, out: seen.append(out.move))
        assert seen == ["started", "stream_failed", "started", "completed"]

    async def test_an_attempt_without_configuration_uses_the_environments(
        self, primary: OpenAIServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`BOT_MAX_FUNCTION_CALL_ITERATIONS=1` in the environment: one call, then the ceiling."""
        monkeypatch.setenv("BOT_MAX_FUNCTION_CALL_ITERATIONS", "1")
        primary.script(tool_call_reply("get_weather", {"city": "Paris"}), text_reply("Sunny."))
        chain = Chain()
        result = await chain.run(chain.attempt(primary, config=None))
        assert result.status is TurnStatus.TIMEOUT
        assert (len(primary.requests), chain.calls) == (1, [{"city": "Paris"}])


async def test_a_turn_without_attempts_is_refused() -> None:
    """An empty chain is a caller error, named as such."""
    with pytest.raises(ValueError, match=r"^run_generation_turn needs at least one attempt$"):
        await Chain().run()
