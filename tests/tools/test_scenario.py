"""The scenario reader: every malformed file is one ScenarioError with its path; defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolloop.states import (
    ApiFamily,
    DeliberateMode,
    Persona,
    ProviderDescriptor,
    Sticker,
    StreamStatus,
    Trigger,
    TurnSettings,
)
from toolloop.tools.scenario import (
    ScriptedCall,
    ScriptedResult,
    ScriptedStream,
    ScriptedTool,
    load_scenario,
    parse_scenario,
)
from toolloop.tools.scenario_json import ScenarioError

LIBRARY = Path(__file__).parents[1] / "scenarios"
MINIMAL: dict[str, Any] = {"streams": [{}]}
FULL_EXAMPLE = Path(__file__).with_name("full_scenario.json")


def error_of(document: Any) -> ScenarioError:
    """The error reading `document` (JSON-encoded unless it is already text) raises."""
    text = document if isinstance(document, str) else json.dumps(document)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, file="case.json")
    return caught.value


def with_stream(**stream: Any) -> dict[str, Any]:
    return {"streams": [{}, stream]}


def with_tool(**tool: Any) -> dict[str, Any]:
    return {"tools": [{"name": "web_search", **tool}], "streams": [{}]}


def with_turn(**turn: Any) -> dict[str, Any]:
    return {"turn": turn, "streams": [{}]}


class TestMalformed:
    def test_bad_json_names_line_and_column(self) -> None:
        """Text that is not JSON reports where the parser stopped."""
        error = error_of('{"streams": [}')
        assert str(error) == "case.json: line 1 column 14: expected valid JSON, got Expecting value"
        assert (error.file, error.path, error.expected) == (
            "case.json",
            "line 1 column 14",
            "valid JSON",
        )

    def test_nan_is_not_json(self) -> None:
        """Python's NaN extension is refused."""
        assert str(error_of('{"streams": [NaN]}')) == (
            "case.json: expected valid JSON, got NaN (not a JSON number)"
        )

    def test_top_level_must_be_an_object(self) -> None:
        """An array at the top level is named as such, with an empty path."""
        error = error_of([])
        assert (error.path, str(error)) == ("", "case.json: expected an object, got an array")

    def test_unknown_top_level_key(self) -> None:
        """An unknown key is named with the keys that are allowed."""
        error = error_of({"streams": [{}], "stream": []})
        assert error.path == "stream"
        assert str(error) == (
            "case.json: stream: expected one of the keys env, streams, tools, turn, "
            "got the unknown key 'stream'"
        )

    def test_unknown_stream_key(self) -> None:
        """Unknown keys are caught inside streams too, with the index."""
        assert error_of(with_stream(colour="red")).path == "streams[1].colour"

    def test_unknown_call_key(self) -> None:
        """A call accepts only name, args and arguments_truncated."""
        error = error_of(with_stream(call={"name": "x", "arguments": {}}))
        assert error.path == "streams[1].call.arguments"

    def test_unknown_result_key(self) -> None:
        """Scripted results are checked for unknown keys."""
        error = error_of(with_tool(results=[{"sucess": True}]))
        assert error.path == "tools[0].results[0].sucess"

    def test_unknown_turn_key(self) -> None:
        """Turn settings are checked for unknown keys, nested ones included."""
        assert error_of(with_turn(persona={"nick": "T"})).path == "turn.persona.nick"

    def test_repeated_key(self) -> None:
        """A key written twice is refused instead of keeping the last silently."""
        error = error_of('{"streams": [{"text": "a", "text": "b"}]}')
        assert str(error) == "case.json: streams[0].text: expected each key once, got 'text' twice"

    def test_call_name_of_wrong_type(self) -> None:
        """The path and the offending value are in the message."""
        error = error_of(with_stream(call={"name": 42}))
        assert str(error) == "case.json: streams[1].call.name: expected a string, got 42"
        assert error.expected == "a string"

    def test_call_without_name(self) -> None:
        """A call's name is required."""
        error = error_of(with_stream(call={"args": {}}))
        assert str(error) == (
            "case.json: streams[1].call.name: expected the required key 'name', got nothing"
        )

    def test_boolean_is_not_an_integer(self) -> None:
        """JSON true is refused where an integer is expected."""
        error = error_of(with_turn(persona={"id": True}))
        assert str(error) == "case.json: turn.persona.id: expected an integer, got true"

    def test_flag_of_wrong_type(self) -> None:
        """Flags must be JSON booleans, not strings."""
        error = error_of(with_tool(requires_follow_up="yes"))
        assert str(error) == (
            'case.json: tools[0].requires_follow_up: expected true or false, got "yes"'
        )

    def test_follow_up_of_wrong_type(self) -> None:
        """`follow_up` is a flag like the others."""
        error = error_of(with_stream(follow_up=1))
        assert str(error) == "case.json: streams[1].follow_up: expected true or false, got 1"

    def test_channel_fails_of_wrong_type(self) -> None:
        """`channel_fails` is the refusal's message, a string."""
        error = error_of(with_stream(channel_fails=True))
        assert str(error) == "case.json: streams[1].channel_fails: expected a string, got true"

    def test_model_parts_must_be_an_array(self) -> None:
        """`model_parts` is an array of part objects."""
        error = error_of(with_stream(model_parts={"type": "text"}))
        assert str(error) == "case.json: streams[1].model_parts: expected an array, got an object"

    def test_model_parts_items_must_be_objects(self) -> None:
        """Each part is an object; the path names the bad one."""
        error = error_of(with_stream(model_parts=[{"type": "text", "text": "a"}, "b"]))
        assert str(error) == 'case.json: streams[1].model_parts[1]: expected an object, got "b"'

    def test_unknown_status(self) -> None:
        """The message lists the statuses."""
        error = error_of(with_stream(status="done"))
        assert error.path == "streams[1].status"
        assert error.expected == (
            "one of completed, error, timeout, empty_response, stopped_by_user, "
            "follow_up_interrupt, function_call"
        )

    def test_unknown_api_family(self) -> None:
        """The API family must be one the policies know."""
        error = error_of(with_turn(provider={"name": "x", "api_family": "anthropic"}))
        assert str(error) == (
            "case.json: turn.provider.api_family: expected one of custom, openai, openrouter, "
            'google, novelai, got "anthropic"'
        )

    def test_duplicate_tool_name(self) -> None:
        """The second tool of a name is the one reported."""
        error = error_of({"tools": [{"name": "a"}, {"name": "a"}], "streams": [{}]})
        assert (
            str(error)
            == 'case.json: tools[1].name: expected a tool name not used before, got "a" again'
        )

    def test_tool_name_providers_refuse(self) -> None:
        """A name no OpenAI-style provider accepts is refused before anything runs."""
        error = error_of({"tools": [{"name": "web search"}], "streams": [{}]})
        assert str(error) == (
            "case.json: tools[0].name: expected a tool name of 1 to 64 letters, digits, "
            """'_' or '-', got "web search\""""
        )

    def test_tool_without_name(self) -> None:
        """Every tool needs a name."""
        assert error_of({"tools": [{}], "streams": [{}]}).path == "tools[0].name"

    def test_missing_streams(self) -> None:
        """A scenario without streams has nothing to run."""
        error = error_of({"tools": []})
        assert (
            str(error) == "case.json: streams: expected a non-empty array of streams, got nothing"
        )

    def test_empty_streams(self) -> None:
        """An empty streams array has nothing to repeat."""
        error = error_of({"streams": []})
        assert str(error) == (
            "case.json: streams: expected a non-empty array of streams, got an empty array"
        )

    def test_empty_results(self) -> None:
        """A tool with an empty results list has no last result to repeat."""
        assert error_of(with_tool(results=[])).path == "tools[0].results"

    def test_invalid_parameters_schema_points_into_it(self) -> None:
        """A schema that breaks the meta-schema is reported at the offending keyword."""
        error = error_of(
            with_tool(parameters={"type": "object", "properties": {"q": {"type": "strin"}}})
        )
        assert error.path == "tools[0].parameters.properties.q.type"
        assert error.expected == "a valid JSON schema of an object"

    def test_parameters_must_be_an_object_schema(self) -> None:
        """The tool's parameters are an object, as OpenAI-style providers require."""
        error = error_of(with_tool(parameters={"type": "array"}))
        assert error.path == "tools[0].parameters"
        assert '"type" is "array"' in error.got

    def test_env_value_of_wrong_type(self) -> None:
        """Configuration values are strings or integers, like the environment."""
        error = error_of({"env": {"BOT_MAX_FUNCTION_CALL_ITERATIONS": 7.5}, "streams": [{}]})
        assert str(error) == (
            "case.json: env.BOT_MAX_FUNCTION_CALL_ITERATIONS: "
            "expected a string or an integer, got 7.5"
        )

    def test_status_contradicting_the_call(self) -> None:
        """A call on a stream whose status is not function_call is a contradiction."""
        error = error_of(with_stream(status="completed", call={"name": "x"}))
        assert error.expected == "function_call, since the stream has a call"

    def test_function_call_status_without_call(self) -> None:
        """Status function_call needs the call it reports."""
        error = error_of(with_stream(status="function_call"))
        assert error.expected == "a status other than function_call, since there is no call"

    def test_error_on_a_completed_stream(self) -> None:
        """An error message belongs only to an error or timeout stream."""
        assert error_of(with_stream(status="completed", error="x")).path == "streams[1].error"

    def test_result_that_hangs_and_returns(self) -> None:
        """A hanging result cannot also carry what it returns."""
        error = error_of(with_tool(results=[{"hang": True, "data": {}}]))
        assert str(error) == (
            "case.json: tools[0].results[0].data: "
            "expected no 'data' in a result that hangs, got one"
        )

    def test_result_that_hangs_and_raises(self) -> None:
        """A result does one of hang and raise."""
        assert error_of(with_tool(results=[{"hang": True, "raise": "x"}])).path == (
            "tools[0].results[0].raise"
        )

    def test_trigger_without_source(self) -> None:
        """Deliberate-mode triggers need both their fields."""
        error = error_of(with_turn(deliberate_mode={"triggers": {"t": {"trigger": "!s"}}}))
        assert error.path == "turn.deliberate_mode.triggers.t.source"

    def test_unreadable_file(self, tmp_path: Path) -> None:
        """A missing file is a ScenarioError too, so the CLI has one error to report."""
        with pytest.raises(ScenarioError, match=r"expected a readable UTF-8 file"):
            load_scenario(tmp_path / "absent.json")


class TestFreeForm:
    def test_free_form_values_keep_unknown_keys(self) -> None:
        """args, data, thought_log and env names are not checked for keys."""
        scenario = parse_scenario(
            json.dumps(
                {
                    "env": {"ANYTHING_AT_ALL": "1"},
                    "tools": [{"name": "t", "results": [{"data": {"whatever": [1]}}]}],
                    "streams": [
                        {"call": {"name": "t", "args": {"odd": 1}}, "thought_log": {"x": 1}}
                    ],
                }
            )
        )
        assert scenario.env == {"ANYTHING_AT_ALL": "1"}
        assert scenario.tools[0].results[0].data == {"whatever": [1]}
        assert scenario.streams[0].call == ScriptedCall(name="t", args={"odd": 1})
        assert scenario.streams[0].thought_log == {"x": 1}


class TestDefaults:
    def test_minimal_scenario_defaults(self) -> None:
        """Only streams given: default env, turn, no tools, a completed empty stream."""
        scenario = parse_scenario(json.dumps(MINIMAL), file="min.json")
        assert scenario.file == "min.json"
        assert scenario.env == {}
        assert scenario.turn == TurnSettings()
        assert scenario.tools == ()
        assert scenario.streams == (ScriptedStream(status=StreamStatus.COMPLETED),)

    def test_turn_defaults_match_the_format(self) -> None:
        """The defaults SCENARIOS.md shows are the turn's defaults."""
        turn = parse_scenario(json.dumps(with_turn())).turn
        assert turn.provider == ProviderDescriptor(name="custom", api_family=ApiFamily.CUSTOM)
        assert (turn.surface_user_errors, turn.suppress_user_errors) == (True, False)
        assert (turn.user_impersonation, turn.impersonated_username) == (False, None)
        assert (turn.direct_message, turn.locale, turn.stop_context_queued) == (False, "en", False)
        assert turn.persona == Persona(name="Tomo", id=1, lineage_id=1, is_alter=False)
        assert turn.deliberate_mode == DeliberateMode(active=False, allowed=(), triggers={})
        assert turn.guild_stickers == ()

    def test_tool_defaults(self) -> None:
        """A tool given by name only: object schema, no follow-up, available, one success."""
        tool = parse_scenario(json.dumps(with_tool())).tools[0]
        assert tool == ScriptedTool(
            name="web_search",
            parameters={"type": "object", "properties": {}},
            requires_follow_up=False,
            available_for_provider=True,
            available_for_turn=True,
            results=(ScriptedResult(success=True),),
        )

    def test_success_defaults_to_false_with_an_error(self) -> None:
        """`success` defaults to true unless `error` is given."""
        results = (
            parse_scenario(json.dumps(with_tool(results=[{"error": "503"}, {}]))).tools[0].results
        )
        assert [result.success for result in results] == [False, True]

    def test_stream_with_call_is_a_function_call(self) -> None:
        """Without status, a call makes the stream function_call."""
        stream = parse_scenario(json.dumps({"streams": [{"call": {"name": "t"}}]})).streams[0]
        assert stream.status is StreamStatus.FUNCTION_CALL
        assert stream.call == ScriptedCall(name="t", args=None, arguments_truncated=False)

    def test_kill_without_stall_is_stopped_by_user(self) -> None:
        """`kill` without `stall` ends the stream as stopped_by_user with its text."""
        stream = parse_scenario(json.dumps({"streams": [{"kill": True, "text": "hal"}]})).streams[0]
        assert (stream.status, stream.text, stream.kill) == (
            StreamStatus.STOPPED_BY_USER,
            "hal",
            True,
        )

    def test_stall_wins_over_status_and_call(self) -> None:
        """A stalled stream may carry a status and a call without contradiction."""
        raw = {"stall": True, "status": "completed", "call": {"name": "t"}}
        assert parse_scenario(json.dumps({"streams": [raw]})).streams[0].stall

    def test_new_stream_keys_default_to_off(self) -> None:
        """No follow-up, no channel refusal, and model parts left to the scripted provider."""
        stream = parse_scenario(json.dumps({"streams": [{"text": "hi"}]})).streams[0]
        assert (stream.follow_up, stream.channel_fails, stream.model_parts) == (False, None, None)

    def test_raise_key_is_read_as_raises(self) -> None:
        """`raise` is a Python keyword, so the attribute is `raises`."""
        stream = parse_scenario(json.dumps({"streams": [{"raise": "boom"}]})).streams[0]
        assert stream.raises == "boom"


class TestValid:
    def test_full_example_parses(self) -> None:
        """The example of SCENARIOS.md, every key used, parses to the expected data."""
        scenario = load_scenario(FULL_EXAMPLE)
        turn = scenario.turn
        assert turn.provider == ProviderDescriptor(name="nai", api_family=ApiFamily.NOVELAI)
        assert turn.deliberate_mode == DeliberateMode(
            active=True,
            allowed=("web_search",),
            triggers={"web_search": Trigger(trigger="!search", source="keyword")},
        )
        assert turn.guild_stickers == (Sticker(id="s1", name="gong", sendable=True),)
        assert scenario.env == {
            "BOT_MAX_FUNCTION_CALL_ITERATIONS": "7",
            "TOOL_EXECUTION_TIMEOUT_MS": 20000,
        }
        (tool,) = scenario.tools
        assert tool.requires_follow_up
        assert [r.hang for r in tool.results] == [
            False,
            False,
            False,
            True,
            False,
            True,
            False,
            False,
        ]
        assert tool.results[4].raises == "boom"
        assert [s.status.value for s in scenario.streams] == [
            "function_call", "function_call", "completed", "error", "empty_response",
            "stopped_by_user", "follow_up_interrupt", "completed", "completed",
            "function_call", "function_call", "completed", "completed", "function_call",
        ]  # fmt: skip
        follow_up, refused, with_parts = scenario.streams[-3:]
        assert (follow_up.follow_up, follow_up.text) == (True, "Let me th")
        assert refused.channel_fails == "403 Missing Permissions"
        assert with_parts.model_parts == ({"type": "text", "text": "Let me look."},)
        assert scenario.streams[1].call == ScriptedCall(
            name="web_search", args={"query": "x"}, arguments_truncated=True
        )
        assert scenario.streams[3].error == "HTTP 500"

    @pytest.mark.parametrize("path", sorted(LIBRARY.glob("*.json")), ids=lambda p: p.name)
    def test_library_scenarios_parse(self, path: Path) -> None:
        """Every scenario of the library is valid."""
        if not path.name.endswith(".expected.json"):
            assert load_scenario(path).streams


class TestBatchKeys:
    """The keys of SCENARIOS.md added 2026-12-04 for a batch (SPEC 6b), strictly read."""

    def test_calls_are_read_in_order_with_their_ids(self) -> None:
        """`calls` gives every call of the stream, in order; `call` is the first of them."""
        calls = [{"name": "a", "id": "c1"}, {"name": "b", "args": {"x": 1}}]
        stream = parse_scenario(json.dumps({"streams": [{"calls": calls}]})).streams[0]
        assert stream.calls == (
            ScriptedCall(name="a", id="c1"),
            ScriptedCall(name="b", args={"x": 1}),
        )
        assert (stream.call, stream.status.value) == (stream.calls[0], "function_call")

    def test_call_and_calls_together_are_refused(self) -> None:
        """A stream has one of `call` and `calls`."""
        error = error_of(with_stream(call={"name": "a"}, calls=[{"name": "b"}]))
        assert str(error) == (
            "case.json: streams[1].calls: expected one of 'call' and 'calls', not both, got both"
        )

    def test_empty_calls_are_refused(self) -> None:
        """`calls` holds at least one call."""
        error = error_of(with_stream(calls=[]))
        assert str(error) == (
            "case.json: streams[1].calls: expected a non-empty array of calls, got an empty array"
        )

    def test_a_repeated_call_id_is_refused(self) -> None:
        """Ids match responses to calls, so two calls of a stream may not share one."""
        error = error_of(with_stream(calls=[{"name": "a", "id": "x"}, {"name": "b", "id": "x"}]))
        assert str(error) == (
            "case.json: streams[1].calls[0].id: expected an id not used by another call, "
            'got "x" again'
        )

    def test_a_blank_id_is_refused(self) -> None:
        """An id is a non-blank string."""
        error = error_of(with_stream(calls=[{"name": "a", "id": " "}]))
        assert error.path == "streams[1].calls[0].id"

    def test_exclusive_is_a_flag(self) -> None:
        """`exclusive` on a tool is true or false."""
        error = error_of(with_tool(exclusive="yes"))
        assert str(error) == 'case.json: tools[0].exclusive: expected true or false, got "yes"'

    @pytest.mark.parametrize(
        ("delay", "expected"),
        [
            (-1, "a number of milliseconds, zero or more"),
            (1.5, "an integer"),
            (True, "an integer"),
        ],
    )
    def test_delay_ms_is_a_whole_number_of_milliseconds(self, delay: Any, expected: str) -> None:
        """`delay_ms` is an integer, zero or more."""
        error = error_of(with_tool(results=[{"delay_ms": delay}]))
        assert (error.path, error.expected) == ("tools[0].results[0].delay_ms", expected)

    def test_a_result_that_hangs_has_no_delay(self) -> None:
        """A hanging result never settles, so a delay would mean nothing."""
        error = error_of(with_tool(results=[{"hang": True, "delay_ms": 5}]))
        assert error.expected == "no 'delay_ms' in a result that hangs"
