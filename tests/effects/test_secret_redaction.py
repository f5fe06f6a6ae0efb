"""Secrets inside `X | None`, defaults, forbidden keys: nowhere the registry hands them out.

Issue 20 item 2: a `Secret` inside an optional attrs class, TypedDict or list
of them is redacted in `recent()`, the tool event, the failed-tool notice and
the Discord thought log; a secret's default is not published in the schema;
a secret sent as a key the schema forbids shows neither in the ring nor in
the failure.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, NotRequired, TypedDict

import attrs
import discord
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.discord.conftest import channel, configured, embeds, run
from tests.effects.harness import ScriptProvider, calling, completed
from tests.effects.test_registry import CUSTOM, execute
from toolloop.effects.discord import DiscordChannel, EditWindow
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.observe import ToolStarted
from toolloop.effects.registry import ToolRegistry, ToolSchemaError
from toolloop.effects.registry.redaction import REDACTED, has_secrets, redact
from toolloop.effects.registry.schema import check_parameters, problems
from toolloop.effects.registry.signature import Secret
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import FunctionCall, JsonObject, LoopConfig, TurnSettings

SECRET = "CANARY-optional-5c1e"


@attrs.frozen
class Creds:
    user: str
    token: Annotated[str, Secret]


class Session(TypedDict):
    id: int
    cookie: NotRequired[Annotated[str, Secret]]


def vault_registry(received: list[Any]) -> ToolRegistry:
    """One typed tool whose secrets sit only inside optional parameters; it always fails."""
    registry = ToolRegistry()

    @registry.tool
    async def vault(
        creds: Creds | None = None,
        session: Session | None = None,
        backups: list[Creds] | None = None,
    ) -> None:
        received.append((creds, session, backups))
        raise RuntimeError("vault is locked")

    return registry


ARGS: JsonObject = {
    "creds": {"user": "ana", "token": SECRET},
    "session": {"id": 7, "cookie": SECRET},
    "backups": [{"user": "bo", "token": SECRET}],
}
SHOWN: JsonObject = {
    "creds": {"user": "ana", "token": REDACTED},
    "session": {"id": 7, "cookie": REDACTED},
    "backups": [{"user": "bo", "token": REDACTED}],
}


class TestOptionalSecrets:
    def test_the_schema_marks_secrets_under_any_of(self) -> None:
        """`X | None` keeps X's secret fields inside its `anyOf`, where the walk now looks."""
        (spec,) = vault_registry([]).specs(CUSTOM)
        creds = spec.parameters["properties"]["creds"]
        assert creds["anyOf"][0]["properties"]["token"]["writeOnly"] is True
        assert has_secrets(spec.parameters)

    @pytest.mark.anyio
    async def test_recent_shows_optional_secrets_redacted_and_the_tool_gets_them(self) -> None:
        """The ring holds the redacted arguments; the function receives the real values."""
        received: list[Any] = []
        registry = vault_registry(received)
        result = await execute(registry, "vault", ARGS)
        assert result.error == 'tool "vault" raised RuntimeError: vault is locked'
        assert registry.recent()[-1].args == SHOWN
        assert received == [
            (Creds("ana", SECRET), {"id": 7, "cookie": SECRET}, [Creds("bo", SECRET)])
        ]

    @pytest.mark.anyio
    async def test_the_tool_event_and_the_failed_tool_notice_show_no_secret(self) -> None:
        """Through the interpreter: `ToolStarted.args` and the hidden notice are redacted."""
        events: list[Any] = []
        channel_port = RecordingChannel()
        await run_tool_loop(
            turn=TurnSettings(),
            config=LoopConfig(),
            provider=ScriptProvider(calling("vault", ARGS), completed()),
            registry=vault_registry([]),
            channel=channel_port,
            control=MemoryTurnControl(),
            on_event=events.append,
        )
        (started,) = [event for event in events if isinstance(event, ToolStarted)]
        assert started.args == SHOWN
        (thought,) = channel_port.thoughts
        assert json.dumps(SHOWN["creds"], ensure_ascii=False) in thought.text
        assert SECRET not in repr(events) + repr(channel_port)

    def test_the_discord_thought_log_shows_no_secret(self) -> None:
        """The failed-tool notice posted to the thought-log channel is redacted."""

        async def main() -> list[discord.Embed]:
            await configured()
            async with DiscordChannel(
                channel(0), window=EditWindow(), thought_log=channel(1)
            ) as port:
                await run_generation_turn(
                    turn=TurnSettings(),
                    attempts=[
                        Attempt(provider=ScriptProvider(calling("vault", ARGS), completed()))
                    ],
                    registry=vault_registry([]),
                    channel=port,
                    control=MemoryTurnControl(),
                )
            return embeds(channel(1))

        (embed,) = run(main)
        assert embed.description is not None
        assert "vault is locked" in embed.description
        assert REDACTED in embed.description
        assert SECRET not in embed.description


class TestDefaults:
    def test_a_secret_default_is_not_published(self) -> None:
        """A `Secret` parameter's default, or an attrs default holding one, stays out."""
        registry = ToolRegistry()

        @registry.tool
        async def call_api(
            key: Annotated[str, Secret] = SECRET,
            creds: Creds = Creds("ana", SECRET),
            backup: Annotated[str, Secret] | None = None,
            region: str = "eu",
        ) -> None: ...

        (spec,) = registry.specs(CUSTOM)
        properties = spec.parameters["properties"]
        assert SECRET not in json.dumps(spec.parameters)
        assert "default" not in properties["key"]
        assert "default" not in properties["creds"]
        assert "default" not in properties["backup"]  # a secret's default, even None
        assert properties["region"]["default"] == "eu"

    def test_an_explicit_write_only_default_is_refused_at_registration(self) -> None:
        """A hand-written schema with a secret's default would send it to the provider."""
        parameters = {
            "type": "object",
            "properties": {"key": {"type": "string", "writeOnly": True, "default": SECRET}},
        }

        async def call_api(args: JsonObject, call: Any) -> None: ...

        with pytest.raises(ToolSchemaError) as caught:
            ToolRegistry().register(call_api, parameters=parameters)
        assert str(caught.value) == (
            'tool "call_api": parameters.properties.key.default: '
            "a writeOnly (secret) value's default would be sent to the model provider"
        )
        assert SECRET not in str(caught.value)


class TestForbiddenKeys:
    @pytest.mark.anyio
    async def test_a_secret_sent_as_a_forbidden_key_shows_nowhere(self) -> None:
        """The failure lists the keys allowed; the ring hides the forbidden key and its value."""
        received: list[Any] = []
        registry = vault_registry(received)
        result = await execute(registry, "vault", {"creds": None, SECRET: "x", "other": 1})
        assert result.error == (
            'invalid arguments for tool "vault": $: has keys that are not allowed '
            '(allowed: "creds", "session", "backups") (rule: additionalProperties)'
        )
        assert registry.recent()[-1].args == {
            "creds": None,
            REDACTED: "2 keys the schema does not allow",
        }
        assert received == []

    @pytest.mark.parametrize(
        ("args", "shown"),
        [
            ({SECRET: 1, "a": 2}, "<2 arguments>"),
            ({SECRET: 1}, "<1 argument>"),
            ({}, "<no arguments>"),
        ],
    )
    def test_a_function_call_s_repr_counts_its_arguments_without_naming_them(
        self, args: JsonObject, shown: str
    ) -> None:
        """Reprs reach logs and the turn result's repr: a key may be a misplaced secret."""
        shown_repr = repr(FunctionCall(name="t", args=args))
        assert SECRET not in shown_repr
        assert shown_repr == (
            f"FunctionCall(name='t', args={shown}, passthrough={{}}, "
            "arguments_truncated=False, call_id='')"
        )

    def test_keys_of_an_open_object_are_data_and_stay(self) -> None:
        """`additionalProperties` as a schema allows any key: keys stay, secret values go."""
        schema = {"type": "object", "additionalProperties": {"type": "string", "writeOnly": True}}
        assert redact({"github": "t1", "gitlab": "t2"}, schema) == {
            "github": REDACTED,
            "gitlab": REDACTED,
        }


class TestReferencesPatternsAndPrefixes:
    def test_a_secret_behind_a_ref_is_redacted_and_a_cycle_of_refs_ends(self) -> None:
        """A recursive tree through `$defs`: every level's secret goes, and the walk ends."""
        node = {
            "type": "object",
            "properties": {
                "token": {"type": "string", "writeOnly": True},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
        }
        schema = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
        tree = {"token": SECRET, "children": [{"token": SECRET, "children": []}]}
        assert has_secrets(schema)
        assert redact(tree, schema) == {
            "token": REDACTED,
            "children": [{"token": REDACTED, "children": []}],
        }
        assert redact({"a": 1}, {"$ref": "#", "anyOf": [{"$ref": "#"}]}) == {"a": 1}

    def test_a_ref_to_the_meta_schema_is_followed_without_a_secret_in_it(self) -> None:
        """The meta-schema has no writeOnly: nothing redacted, and nothing fetched."""
        schema = {"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}
        assert not has_secrets(schema)
        assert redact({"s": {"type": "string"}}, schema) == {"s": {"type": "string"}}

    def test_pattern_properties_and_prefix_items_apply_their_schemas(self) -> None:
        """A key matching a pattern, and a positional item, get their own schema's redaction."""
        schema = {
            "patternProperties": {"^tok_": {"writeOnly": True}},
            "properties": {"pair": {"prefixItems": [{"writeOnly": True}], "items": {}}},
            "additionalProperties": False,
        }
        args = {"tok_a": SECRET, "pair": [SECRET, "shown"], "other": SECRET}
        assert redact(args, schema) == {
            "tok_a": REDACTED,
            "pair": [REDACTED, "shown"],
            REDACTED: "1 key the schema does not allow",
        }

    @pytest.mark.anyio
    async def test_the_registry_redacts_through_a_ref(self) -> None:
        """A hand-written schema with its secret in `$defs`: `recent()` shows it redacted."""
        parameters = {
            "type": "object",
            "$defs": {"login": {"type": "object", "properties": {"key": {"writeOnly": True}}}},
            "properties": {"login": {"$ref": "#/$defs/login"}},
        }
        registry = ToolRegistry()

        async def connect(args: JsonObject, call: Any) -> None: ...

        registry.register(connect, parameters=parameters)
        await execute(registry, "connect", {"login": {"key": SECRET}})
        assert registry.recent()[-1].args == {"login": {"key": REDACTED}}


class TestCombinators:
    @pytest.mark.parametrize("keyword", ["anyOf", "oneOf", "allOf"])
    def test_a_secret_under_any_combinator_is_redacted(self, keyword: str) -> None:
        """Every branch is applied: a part any branch marks `writeOnly` is redacted."""
        schema = {
            keyword: [
                {"type": "object", "properties": {"a": {"writeOnly": True}}},
                {"type": "object", "properties": {"b": {"items": {"writeOnly": True}}}},
            ]
        }
        assert has_secrets(schema)
        assert redact({"a": SECRET, "b": [SECRET], "c": 1}, schema) == {
            "a": REDACTED,
            "b": [REDACTED],
            "c": 1,
        }

    def test_a_schema_without_write_only_anywhere_has_no_secrets(self) -> None:
        """`has_secrets` is what lets the registry skip the walk: false means nothing to hide."""
        schema = {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}
        assert not has_secrets(schema)
        assert redact({"a": "x"}, schema) == {"a": "x"}


# The property: no value a writeOnly schema applies to survives, whatever the nesting.

_LEAF = st.sampled_from([{"type": "string"}, {"type": "string", "writeOnly": True}])
_SCHEMAS = st.recursive(
    _LEAF,
    lambda children: st.one_of(
        st.builds(
            lambda properties, extra: {
                "type": "object",
                "properties": properties,
                "additionalProperties": extra,
            },
            st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
            st.booleans() | children,
        ),
        st.builds(lambda items: {"type": "array", "items": items}, children),
        st.builds(lambda inner: {"anyOf": [inner, {"type": "null"}]}, children),
        st.builds(lambda a, b: {"allOf": [a, b]}, children, children),
        st.builds(
            lambda first, rest: {"type": "array", "prefixItems": [first], "items": rest},
            children,
            children,
        ),
        st.builds(
            lambda child: {
                "type": "object",
                "properties": {},
                "patternProperties": {"^p": child},
                "additionalProperties": False,
            },
            children,
        ),
        st.builds(  # a reference into the node's own resource, named by a unique `$id`
            lambda child, name: {"$id": f"urn:{name}", "$defs": {"d": child}, "$ref": "#/$defs/d"},
            children,
            st.uuids(),
        ),
    ),
    max_leaves=8,
)


def _value(draw: Any, schema: dict[str, Any], secret: bool = False) -> Any:
    """A value fitting `schema`; every string under a writeOnly schema is the canary."""
    secret = secret or schema.get("writeOnly") is True
    if "$ref" in schema:
        return _value(draw, schema["$defs"]["d"], secret)
    if "allOf" in schema:
        return _value(draw, schema["allOf"][draw(st.integers(0, 1))], secret)
    if "anyOf" in schema:
        return None if draw(st.booleans()) else _value(draw, schema["anyOf"][0], secret)
    if schema["type"] == "array":
        first = [_value(draw, schema["prefixItems"][0], secret)] if "prefixItems" in schema else []
        return first + [
            _value(draw, schema["items"], secret) for _ in range(draw(st.integers(0, 2)))
        ]
    if "patternProperties" in schema:
        return {"p1": _value(draw, schema["patternProperties"]["^p"], secret)}
    if schema["type"] == "object":
        value = {key: _value(draw, child, secret) for key, child in schema["properties"].items()}
        extra = schema["additionalProperties"]
        if extra is not False and draw(st.booleans()):
            value["zz"] = _value(draw, {"type": "string"} if extra is True else extra, secret)
        return value
    return SECRET if secret else "plain"


@settings(max_examples=300, deadline=None)
@given(schema=_SCHEMAS, data=st.data())
def test_no_value_under_a_write_only_schema_survives_redaction(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """For any nesting of properties, patternProperties, additionalProperties, prefixItems,
    items, anyOf, allOf and `$ref`, a string
    a writeOnly schema applies to is gone after `redact`, and `has_secrets` saw the schema."""
    value = _value(data.draw, schema)
    assert SECRET not in json.dumps(redact(value, schema))
    if SECRET in json.dumps(value):
        assert has_secrets(schema)


def test_a_long_list_of_allowed_keys_is_cut_with_a_marker() -> None:
    """Past 20 property names the failure lists the first 20 and `…`, never the extra key."""
    names = [f"k{index}" for index in range(25)]
    parameters = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "additionalProperties": False,
    }
    validator = check_parameters("t", parameters)
    (problem,) = problems(validator, {SECRET: 1})
    shown = ", ".join(f'"{name}"' for name in names[:20])
    assert problem == (
        f"$: has keys that are not allowed (allowed: {shown}, …) (rule: additionalProperties)"
    )
