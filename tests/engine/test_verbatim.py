"""The incremental verbatim tool-call parser (SPEC section 10)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolloop.engine import verbatim
from toolloop.engine.verbatim import Feed, Flush, VerbatimCall, VerbatimToolCallParser

TOOLS = {
    "search": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    "get_time": {"type": "object", "properties": {}},
    "send": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"],
    },
    "count": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "web-search": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}

Event = str | VerbatimCall


def parser(cap: int = 8192, tools: dict[str, dict[str, Any]] = TOOLS) -> VerbatimToolCallParser:
    return VerbatimToolCallParser(tools=tools, max_buffer_chars=cap)


def merge(events: Iterable[Event]) -> list[Event]:
    """Join adjacent texts, drop empty ones: the result as a bot author sees it."""
    merged: list[Event] = []
    for event in events:
        if isinstance(event, str) and merged and isinstance(merged[-1], str):
            merged[-1] += event
        elif event:
            merged.append(event)
    return merged


def drain(p: VerbatimToolCallParser) -> list[Event]:
    """Flush until nothing is left, as a caller that wants every result does."""
    events: list[Event] = []
    while (out := p.flush()) != Flush(pending_text="", function_call=None):
        events.append(out.function_call or out.pending_text)
    return events


def run(
    chunks: Sequence[str], cap: int = 8192, tools: dict[str, dict[str, Any]] = TOOLS
) -> list[Event]:
    """Feed the chunks, then flush; return every result in order, merged."""
    p = parser(cap, tools)
    events: list[Event] = []
    for chunk in chunks:
        out = p.feed(chunk)
        assert not (out.visible_text and out.function_call)
        events.append(out.function_call or out.visible_text)
    return merge(events + drain(p))


def call(name: str, args: dict[str, object], raw: str) -> VerbatimCall:
    return VerbatimCall(name=name, args=args, raw=raw)


def rebuilt(events: Iterable[Event]) -> str:
    return "".join(e if isinstance(e, str) else e.raw for e in events)


SEARCH_CATS = call("search", {"q": "cats"}, 'search({"q": "cats"})')


class TestAnchor:
    def test_bare_call_is_recovered(self) -> None:
        """A tool name followed by ``(`` and a JSON object is a call."""
        assert run(['Let me look. search({"q": "cats"})']) == ["Let me look. ", SEARCH_CATS]

    def test_every_name_anchors_whatever_its_length(self) -> None:
        """Names of odd and even length, the longest included, are recognised whole."""
        assert run(['count({"n": 1})']) == [call("count", {"n": 1}, 'count({"n": 1})')]
        assert run(['`web-search("q")`']) == [call("web-search", {"q": "q"}, '`web-search("q")`')]

    def test_mentioned_name_is_visible(self) -> None:
        """A tool name not followed by ``(`` is prose."""
        assert run(["I could search for it."]) == ["I could search for it."]

    def test_longer_identifier_starting_with_a_name_does_not_anchor(self) -> None:
        """``searching(`` is not ``search(``."""
        text = 'searching({"q": "cats"})'
        assert run([text]) == [text]

    def test_identifier_ending_with_a_name_does_not_anchor(self) -> None:
        """The name must start at a word boundary: ``research(`` is not ``search(``."""
        text = 'research({"q": "cats"})'
        assert run([text]) == [text]

    def test_unknown_tool_is_visible(self) -> None:
        """Only exposed tool names anchor a call."""
        text = 'lookup({"q": "cats"})'
        assert run([text]) == [text]

    def test_spaces_between_name_and_paren_are_allowed(self) -> None:
        """Spaces and tabs may separate the name from ``(``."""
        raw = 'search \t ({"q": "cats"})'
        assert run([raw]) == [call("search", {"q": "cats"}, raw)]

    @pytest.mark.parametrize("gap", ["\n", "\r\n", " \n\t\n  ", "\n\n"])
    def test_newlines_between_name_and_paren_are_allowed(self, gap: str) -> None:
        """Any run of spaces, tabs and newlines may separate the name from ``(`` (SPEC 10)."""
        raw = f'search{gap}({{"q": "cats"}})'
        assert run([f"ok {raw}"]) == ["ok ", call("search", {"q": "cats"}, raw)]

    def test_name_ending_a_line_without_a_paren_is_visible(self) -> None:
        """A name, a newline, then no ``(``: the name was only mentioned."""
        text = "I will search\n\nthe web"
        assert run([text]) == [text]

    @pytest.mark.parametrize("before", ["請調用", "日本語で", "é", "ß", "Ω"])
    def test_non_ascii_letter_before_a_name_is_a_boundary(self, before: str) -> None:
        """The boundary is ASCII: a non-ASCII letter straight before a name anchors it."""
        assert run([f'{before}search("m1")']) == [
            before,
            call("search", {"q": "m1"}, 'search("m1")'),
        ]

    @pytest.mark.parametrize("before", ["a", "Z", "0", "_"])
    def test_ascii_word_character_before_a_name_blocks_it(self, before: str) -> None:
        """An ASCII letter, digit or ``_`` straight before a name makes it part of a longer one."""
        text = f'{before}search("m1")'
        assert run([text]) == [text]

    def test_chinese_request_before_a_call_anchors_it_however_chunked(self) -> None:
        """The SPEC's example, ``請調用search("m1")``, split anywhere, is prose then the call."""
        text = '請調用search("m1")'
        whole = ["請調用", call("search", {"q": "m1"}, 'search("m1")')]
        assert run(list(text)) == whole
        for cut in range(len(text) + 1):
            assert run([text[:cut], text[cut:]]) == whole, cut

    def test_hyphen_before_a_name_is_a_boundary(self) -> None:
        """``-`` is no ASCII word character, even when an exposed name contains one."""
        assert run(['pre-web-search({"q": "a"}) x-search("b")']) == [
            "pre-",
            call("web-search", {"q": "a"}, 'web-search({"q": "a"})'),
            " x-",
            call("search", {"q": "b"}, 'search("b")'),
        ]

    def test_name_starting_inside_a_longer_hyphenated_word_anchors(self) -> None:
        """A held word that stops being a name releases only up to its last ``-``: the name
        after it (``web-sear-search(``) still anchors, fed whole or one character at a time."""
        assert run(['web-searchx("a")']) == ['web-searchx("a")']
        text = 'web-sear-search("b")'
        whole = ["web-sear-", call("search", {"q": "b"}, 'search("b")')]
        assert run([text]) == whole
        assert run(list(text)) == whole


class TestWrappers:
    def test_inline_code_span_is_dropped_with_the_call(self) -> None:
        """Both backticks of an inline span belong to the call's raw text."""
        assert run(['Sure: `search("cats")` done']) == [
            "Sure: ",
            call("search", {"q": "cats"}, '`search("cats")`'),
            " done",
        ]

    def test_double_backtick_span_is_a_wrapper(self) -> None:
        """A span opened with two backticks closes with two."""
        raw = '``search("cats")``'
        assert run([raw]) == [call("search", {"q": "cats"}, raw)]

    def test_fenced_call_with_language_tag_drops_the_fence(self) -> None:
        """A fenced block with any language tag wraps the call, fence lines included."""
        raw = '```tool_code\nsearch({"q": "cats"})\n```'
        assert run([f"Here:\n{raw}\nDone."]) == [
            "Here:\n",
            call("search", {"q": "cats"}, raw),
            "\nDone.",
        ]

    def test_fence_without_language_tag_is_a_wrapper(self) -> None:
        """The language tag is optional."""
        raw = "```\n  get_time()\n```"
        assert run([raw]) == [call("get_time", {}, raw)]

    @pytest.mark.parametrize(
        "raw",
        [
            "````\nget_time()\n````",  # four backticks open a fence as three do
            '````json\nsearch("a")\n````',
            '```web-search("q")```',  # the word after the backticks: the longest name
            '```search ("q")```',  # spaces before the parenthesis
        ],
    )
    def test_wrapped_call_is_recovered_with_its_wrapper(self, raw: str) -> None:
        """Fences of any length and one-line triple backticks wrap a call whole."""
        (found,) = run([raw])
        assert isinstance(found, VerbatimCall) and found.raw == raw

    def test_fence_tag_named_like_a_tool_is_a_tag(self) -> None:
        """A tag that spells a tool name, then a newline, is only a tag."""
        raw = '```search\nsearch("cats")\n```'
        assert run([raw]) == [call("search", {"q": "cats"}, raw)]

    @pytest.mark.parametrize(
        "raw", ['`search\n("cats")`', '```search\n("cats")\n```', '```\nsearch\n\n("cats")\n```']
    )
    def test_newline_before_the_paren_inside_a_wrapper_is_allowed(self, raw: str) -> None:
        """The gap before ``(`` may hold newlines in code too; a fence's tag may be the name."""
        assert run([raw]) == [call("search", {"q": "cats"}, raw)]

    @pytest.mark.parametrize("tag", ["c.", "x-", "c++", "請"])
    def test_name_inside_a_fence_tag_after_a_non_word_character_anchors_bare(
        self, tag: str
    ) -> None:
        """A tag like ``c.search`` followed by ``(`` is no wrapper, but ``search(`` anchors."""
        text = f'```{tag}search("cats")```'
        assert run([text]) == [f"```{tag}", call("search", {"q": "cats"}, 'search("cats")'), "```"]

    def test_triple_backticks_on_one_line_are_an_inline_wrapper(self) -> None:
        """Three backticks followed by the call on the same line wrap it too."""
        raw = '```search("cats")```'
        assert run([raw]) == [call("search", {"q": "cats"}, raw)]

    def test_fence_with_more_on_its_first_line_leaves_the_call_bare(self) -> None:
        """An info string beyond a tag is not a wrapper: the call is found bare."""
        text = '```python title="x"\nsearch("cats")\n```'
        assert run([text]) == [
            '```python title="x"\n',
            call("search", {"q": "cats"}, 'search("cats")'),
            "\n```",
        ]

    def test_missing_closer_keeps_the_call_and_shows_what_follows(self) -> None:
        """When the closer does not follow, the call stands and the text after it is visible."""
        assert run(['`search("cats") and more']) == [
            call("search", {"q": "cats"}, '`search("cats")'),
            " and more",
        ]

    def test_shorter_closer_is_visible_code_again(self) -> None:
        """Fewer backticks than the opener are not its closer: they may open code themselves."""
        assert run(['```\nget_time()\n`search("cats")`']) == [
            call("get_time", {}, "```\nget_time()"),
            "\n",
            call("search", {"q": "cats"}, '`search("cats")`'),
        ]

    def test_shorter_closer_right_after_the_call_opens_code_itself(self) -> None:
        """One backtick closing a two-backtick span is no closer: it opens the next span."""
        assert run(['``search({"q": 1})` ok `get_time()`']) == [
            call("search", {"q": 1}, '``search({"q": 1})'),
            "` ok ",
            call("get_time", {}, "`get_time()`"),
        ]

    def test_text_after_the_closer_keeps_streaming(self) -> None:
        """Text after a dropped closer is visible."""
        assert run(["`get_time()` it is late"])[-1] == " it is late"

    def test_later_call_is_found(self) -> None:
        """After one call, scanning goes on and finds the next."""
        assert run(['get_time() then `search("cats")`.']) == [
            call("get_time", {}, "get_time()"),
            " then ",
            call("search", {"q": "cats"}, '`search("cats")`'),
            ".",
        ]

    def test_inline_code_that_is_not_a_call_is_visible(self) -> None:
        """Ordinary inline code is prose, released as soon as it cannot be a call."""
        p = parser()
        assert p.feed("use `ls -la` here").visible_text == "use `ls -la` here"


class TestFeedContract:
    def test_prose_then_call_in_one_feed_returns_the_prose_first(self) -> None:
        """A feed with prose and a whole call returns the prose; the call waits."""
        p = parser()
        assert p.feed('Hi. search({"q": "cats"})') == Feed(visible_text="Hi. ", function_call=None)

    def test_waiting_call_comes_with_an_empty_feed(self) -> None:
        """``feed("")`` hands out the call that waited behind prose."""
        p = parser()
        p.feed('Hi. search({"q": "cats"})')
        assert p.feed("") == Feed(visible_text="", function_call=SEARCH_CATS)

    def test_waiting_call_comes_with_flush(self) -> None:
        """``flush()`` hands out the call that waited behind prose."""
        p = parser()
        p.feed('Hi. search({"q": "cats"})')
        assert p.flush() == Flush(pending_text="", function_call=SEARCH_CATS)

    def test_call_alone_in_a_feed_is_returned_at_once(self) -> None:
        """A feed that completes a call and showed no prose returns the call."""
        p = parser()
        assert p.feed('search({"q": ') == Feed(visible_text="", function_call=None)
        assert p.feed('"cats"})') == Feed(visible_text="", function_call=SEARCH_CATS)

    def test_text_after_a_call_comes_with_the_next_feed(self) -> None:
        """Text that followed a call in the same chunk is handed out next, in order."""
        p = parser()
        assert p.feed('search({"q": "cats"}) ok').function_call == SEARCH_CATS
        assert p.feed(" then").visible_text == " ok then"

    def test_flush_hands_out_one_result_at_a_time(self) -> None:
        """Repeated flushes drain the queue in stream order, then return nothing."""
        p = parser()
        assert p.feed("a get_time() b get_time() c").visible_text == "a "
        now = call("get_time", {}, "get_time()")
        assert drain(p) == [now, " b ", now, " c"]

    def test_feed_after_flush_is_a_runtime_error(self) -> None:
        """The stream has ended once flushed; feeding more is caller misuse."""
        p = parser()
        p.flush()
        with pytest.raises(RuntimeError, match=r"^feed\(\) after flush\(\)"):
            p.feed("x")


class TestArguments:
    def test_empty_parens_call_a_tool_without_required_params(self) -> None:
        """``tool()`` is a call with no arguments when nothing is required."""
        assert run(["get_time( )"]) == [call("get_time", {}, "get_time( )")]

    def test_empty_parens_for_a_tool_with_required_params_are_visible(self) -> None:
        """``tool()`` is refused when the tool requires parameters."""
        assert run(["search() now"]) == ["search() now"]

    def test_json_object_is_the_arguments(self) -> None:
        """A JSON object becomes the call's arguments as written."""
        raw = 'send({"to": "ann", "body": "hi", "extra": [1, {"a": null}]})'
        args = {"to": "ann", "body": "hi", "extra": [1, {"a": None}]}
        assert run([raw]) == [call("send", args, raw)]

    def test_sole_string_maps_to_the_only_required_param(self) -> None:
        """``tool("v")`` fills the only required parameter when it is a string."""
        assert run(['search("cats")']) == [call("search", {"q": "cats"}, 'search("cats")')]

    def test_string_for_a_tool_with_two_required_params_is_visible(self) -> None:
        """A lone string is refused when the tool requires more than one parameter."""
        assert run(['send("hi")']) == ['send("hi")']

    def test_string_for_a_non_string_param_is_visible(self) -> None:
        """A lone string is refused when the only required parameter is not a string."""
        assert run(['count("3")']) == ['count("3")']

    def test_invalid_json_is_visible_and_scanning_resumes_after_it(self) -> None:
        """Broken JSON is released whole; a call after it is still found."""
        assert run(['search({q: cats}) search("dogs")']) == [
            "search({q: cats}) ",
            call("search", {"q": "dogs"}, 'search("dogs")'),
        ]

    def test_nested_parentheses_release_the_call_and_scanning_resumes(self) -> None:
        """A parenthesis outside JSON strings nests; the balanced text is no JSON, so visible."""
        assert run(['search({"q": 1} (x)) search({"q": 2})']) == [
            'search({"q": 1} (x)) ',
            call("search", {"q": 2}, 'search({"q": 2})'),
        ]

    def test_two_arguments_are_visible(self) -> None:
        """More than one argument is the wrong arity."""
        assert run(['search("a", "b")']) == ['search("a", "b")']

    def test_json_that_is_not_an_object_or_string_is_visible(self) -> None:
        """Numbers and arrays are not arguments."""
        assert run(["count(3) count([3])"]) == ["count(3) count([3])"]

    def test_nan_is_not_json(self) -> None:
        """``NaN`` and ``Infinity`` are refused, as strict JSON does."""
        assert run(['count({"n": NaN})']) == ['count({"n": NaN})']

    def test_parentheses_inside_json_strings_are_ignored(self) -> None:
        """A ``)`` inside a JSON string does not close the call."""
        raw = 'search({"q": "f(x) = (y"})'
        assert run([raw]) == [call("search", {"q": "f(x) = (y"}, raw)]

    def test_escaped_quote_does_not_end_a_json_string(self) -> None:
        """``\\"`` stays inside the string, so the ``)`` after it is still in the string."""
        raw = 'search("say \\") twice")'
        assert run([raw]) == [call("search", {"q": 'say ") twice'}, raw)]

    def test_prose_parenthesis_after_a_name_is_held_until_it_balances(self) -> None:
        """``name (`` is an anchor whatever follows: prose after it is held, then released."""
        p = parser()
        assert p.feed("I will search (see below").visible_text == "I will "
        assert p.feed(") ok").visible_text == "search (see below) ok"

    @pytest.mark.parametrize(
        "span",
        [
            'search(search("m1"))',
            "search(get_time())",
            'search( `search("m1")` )',
            'search(see search("m1") below)',
            'search({"q": "a"} search("m1"))',
        ],
    )
    def test_invalid_balanced_span_is_released_whole(self, span: str) -> None:
        """A call inside an invalid balanced span is not extracted: the span is text (SPEC 10)."""
        assert run([f"{span} then get_time()"]) == [
            f"{span} then ",
            call("get_time", {}, "get_time()"),
        ]

    def test_invalid_balanced_span_is_released_whole_however_chunked(self) -> None:
        """``search(search("m1"))`` stays text at every split and one character at a time."""
        text = 'search(search("m1")) get_time()'
        whole = ['search(search("m1")) ', call("get_time", {}, "get_time()")]
        assert run(list(text)) == whole
        for cut in range(len(text) + 1):
            assert run([text[:cut], text[cut:]]) == whole, cut


class TestHolding:
    def test_prose_without_an_anchor_is_emitted_at_once(self) -> None:
        """Text that cannot start a call is visible in the same feed."""
        assert parser().feed("Hello there (really).").visible_text == "Hello there (really)."

    def test_partial_name_at_the_end_is_held(self) -> None:
        """A trailing prefix of a tool name waits for the next chunk."""
        p = parser()
        assert p.feed("I will sea").visible_text == "I will "
        assert p.feed("t").visible_text == "seat"

    def test_full_name_awaiting_paren_is_held(self) -> None:
        """A trailing full name and spaces wait for ``(``."""
        p = parser()
        assert p.feed("ok search  ").visible_text == "ok "
        assert p.feed("it").visible_text == "search  it"

    def test_chunk_that_ends_a_held_word_can_hold_the_next_one(self) -> None:
        """A held word that dies mid-chunk, then a new tail held to the chunk's edge."""
        p = parser()
        assert p.feed("ok sea").visible_text == "ok "
        assert p.feed("t, get_").visible_text == "seat, "
        assert p.feed("time").visible_text == ""
        assert p.feed("()").function_call == call("get_time", {}, "get_time()")
        assert p.feed(" x search \t").visible_text == " x "
        assert p.feed('("q")').function_call == call("search", {"q": "q"}, 'search \t("q")')

    def test_code_opener_is_held(self) -> None:
        """A trailing code opener waits for what follows it."""
        p = parser()
        assert p.feed("see ```py\n").visible_text == "see "
        assert p.feed("print(1)").visible_text == "```py\nprint(1)"

    def test_open_call_is_held_until_it_balances(self) -> None:
        """From the anchor, nothing is shown until the parentheses balance."""
        p = parser()
        assert p.feed('search({"q": "(').visible_text == ""
        assert p.feed('"})').function_call == call("search", {"q": "("}, 'search({"q": "("})')


class TestCap:
    def test_call_longer_than_the_cap_is_visible(self) -> None:
        """A candidate that outgrows ``max_buffer_chars`` is released as text."""
        text = 'search({"q": "' + "x" * 50 + '"})'
        assert run([text], cap=40) == [text]

    def test_call_exactly_at_the_cap_is_recovered(self) -> None:
        """A call whose raw text is exactly ``max_buffer_chars`` long is still a call."""
        raw = 'search({"q": "' + "x" * 26 + '"})'
        assert len(raw) == 43
        assert run([raw], cap=43) == [call("search", {"q": "x" * 26}, raw)]

    def test_release_at_the_cap_happens_while_streaming(self) -> None:
        """Held text past the cap is visible without waiting for the end of the stream."""
        p = parser(cap=10)
        assert p.feed("search      x").visible_text == "search      x"

    def test_spaces_past_the_cap_release_the_name(self) -> None:
        """A name awaiting ``(`` behind too many spaces is prose."""
        text = "search" + " " * 20 + '("cats")'
        assert run([text], cap=10) == [text]


class TestFlush:
    def test_unbalanced_call_at_flush_is_visible(self) -> None:
        """A call still open at the end of the stream is released as text."""
        p = parser()
        p.feed('search({"q": "ca')
        assert p.flush() == Flush(pending_text='search({"q": "ca', function_call=None)

    def test_held_tail_at_flush_is_pending_text(self) -> None:
        """A held partial name is pending text at the end of the stream."""
        p = parser()
        p.feed("I will sear")
        assert p.flush() == Flush(pending_text="sear", function_call=None)

    def test_call_awaiting_its_closer_at_flush_is_handed_out(self) -> None:
        """A fenced call whose fence never closes is still a call."""
        p = parser()
        p.feed("```\nget_time()\n")
        assert drain(p) == [call("get_time", {}, "```\nget_time()"), "\n"]


class TestGuide:
    def test_guide_example_runs(self) -> None:
        """The runnable example in docs/verbatim.md holds."""
        guide = (Path(__file__).parents[2] / "docs" / "verbatim.md").read_text()
        example = guide.split("```python\n", 1)[1].split("\n```\n", 1)[0]
        exec(compile(example, "docs/verbatim.md", "exec"), {})


class TestConfiguration:
    def test_max_buffer_chars_must_be_positive(self) -> None:
        """A cap below one character is refused with the value named."""
        with pytest.raises(ValueError, match=r"^max_buffer_chars must be >= 1 \(got 0\)$"):
            VerbatimToolCallParser(tools=TOOLS, max_buffer_chars=0)

    def test_tool_name_that_cannot_anchor_is_refused(self) -> None:
        """A name with whitespace or parentheses is refused rather than never found."""
        with pytest.raises(ValueError, match=r"^tool name 'my tool' cannot anchor"):
            VerbatimToolCallParser(tools={"my tool": {}})

    def test_no_tools_means_all_text_is_visible(self) -> None:
        """Without exposed tools nothing anchors."""
        p = VerbatimToolCallParser(tools={})
        assert p.feed("`get_time()`").visible_text == "`get_time()`"


SPLIT_TEXTS = [
    'Let me check. search({"q": "a(b)\\"c"}) and then get_time() ok',
    'Here:\n```json\nsend({"to": "x", "body": "y"})\n```\nDone `search("z")`!',
    'research(1) searching `ls` ```\n``count({"n": 1})`` sea',
    'search({"q": 1}, 2) `web-search("q")` count ({"n": NaN}) get_time',
    'x.search({"q": "a"}) (get_time) é.sea Now,get_time() [count({"n": 3})]',
    '```search{"q": 1}\n``` ```count\ncount({"n": 2})\n``` `search ("\\\\ \\" )")`',
    'x.web-search ("q") y',
    '``search("a")``` x ``get_time()`` ok',
]


class TestChunking:
    @pytest.mark.parametrize("text", SPLIT_TEXTS)
    def test_every_split_point_gives_the_same_result(self, text: str) -> None:
        """Splitting the stream in two at any index changes nothing."""
        whole = run([text])
        for cut in range(len(text) + 1):
            assert run([text[:cut], text[cut:]]) == whole, cut

    @pytest.mark.parametrize("text", SPLIT_TEXTS)
    def test_one_character_chunks_give_the_same_result(self, text: str) -> None:
        """Feeding one character at a time changes nothing."""
        assert run(list(text)) == run([text])

    @pytest.mark.parametrize("cap", [4, 12])
    @pytest.mark.parametrize("text", SPLIT_TEXTS)
    def test_every_split_point_at_a_small_cap_gives_the_same_result(
        self, text: str, cap: int
    ) -> None:
        """Where the cap releases held text does not depend on the split either, even when
        the cap is shorter than a tool's name."""
        whole = run([text], cap=cap)
        for cut in range(len(text) + 1):
            assert run([text[:cut], text[cut:]], cap=cap) == whole, cut


class TestLongChunks:
    """Positions past 256 are compared by value: long chunks split inside a candidate."""

    TEXT = "y" * 300 + ' `  search("a")` ```json\n\n  send({"to": "x", "body": "y"})\n```'

    def test_every_split_inside_the_candidates_gives_the_same_result(self) -> None:
        """Openers, spaces and blank lines ending a long chunk are held as in a short one."""
        whole = run([self.TEXT])
        assert whole[1] == call("search", {"q": "a"}, '`  search("a")`')
        for cut in range(300, len(self.TEXT) + 1):
            assert run([self.TEXT[:cut], self.TEXT[cut:]]) == whole, cut


class TestHostile:
    def test_huge_nesting_never_raises(self) -> None:
        """Deeply nested JSON is refused or accepted, never a crash."""
        text = 'search({"q": ' + "[" * 100_000 + "]" * 100_000 + "})"
        assert rebuilt(run([text], cap=1_000_000)) == text

    def test_endless_parentheses_never_raise(self) -> None:
        """An anchor followed by endless ``(`` is released as text."""
        text = 'search({"q": "x"}' + "(" * 200_000
        assert run([text]) == [text]

    @pytest.mark.parametrize(
        ("unit", "times"),
        [("search", 1_000_000), ("search ", 1_000_000), ("search(", 100_000), ("`search", 100_000)],
    )
    def test_tool_name_repeated_a_million_times_never_raises(self, unit: str, times: int) -> None:
        """A name repeated a million times (each a candidate: a hundred thousand) stays text."""
        text = unit * times
        assert run([text]) == [text]


ASCII_TOOLS = {name: schema for name, schema in TOOLS.items() if "-" not in name}
"""Names of ASCII word characters only: no name can start inside a word (the fast paths)."""
toolsets = st.sampled_from([TOOLS, ASCII_TOOLS])

TOKENS = [
    "search", "get_time", "send", "count", "web-search", "sea", "get_", "re", "-",
    "(", ")", "{", "}", '"', "\\", "`", "``", "```", "\n", " ", "\t", ":", ",", "x", "é",
    '{"q": "a"}', '"cats"', "py", "NaN", "[", "]", "請調用", "\r\n", "web-sear", ".", "_",
    'search("m1")', "get_time()", "x-",
]  # fmt: skip
PLAIN_TOKENS = [t for t in TOKENS if "`" not in t]

texts = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)
bare_texts = st.lists(st.sampled_from(PLAIN_TOKENS), max_size=40).map("".join)
caps = st.sampled_from([1, 6, 16, 8192])


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def fed_then_drained(p: VerbatimToolCallParser, chunks: Sequence[str]) -> Iterable[int]:
    """Feed each chunk, then ``feed("")`` until nothing is queued; yield how much of the text
    fed so far has not come out yet (as visible text or as a call's raw text)."""
    fed = out = 0
    for chunk in chunks:
        fed += len(chunk)
        result = p.feed(chunk)
        while result != Feed(visible_text="", function_call=None):
            raw = result.function_call.raw if result.function_call else ""
            out += len(result.visible_text) + len(raw)
            result = p.feed("")
        yield fed - out


def reference(text: str, tools: dict[str, dict[str, Any]]) -> list[Event]:
    """SPEC 10 read over the whole text at once, for text without code wrappers and below the
    cap: quadratic and obvious, the oracle for the incremental parser."""
    events: list[Event] = []
    shown = at = 0
    while (anchor := _first_anchor(text, at, tools)) is not None:
        start, name, paren = anchor
        end = _balanced_end(text, paren)
        if end is None:
            break  # unbalanced at the end of the stream: visible
        args = _arguments(text[paren + 1 : end - 1], tools[name])
        if args is not None:
            events += [text[shown:start], call(name, args, text[start:end])]
            shown = end
        at = end  # a refused span is released whole; scanning resumes after it
    return merge([*events, text[shown:]])


def _first_anchor(
    text: str, at: int, tools: dict[str, dict[str, Any]]
) -> tuple[int, str, int] | None:
    for start in range(at, len(text)):
        if start and re.fullmatch(r"[A-Za-z0-9_]", text[start - 1]):
            continue
        for name in tools:
            if text.startswith(name, start):
                paren = start + len(name)
                while paren < len(text) and text[paren] in " \t\r\n":
                    paren += 1
                if paren < len(text) and text[paren] == "(":
                    return start, name, paren
    return None


def _balanced_end(text: str, paren: int) -> int | None:
    depth, in_string, escaped = 0, False, False
    for k in range(paren, len(text)):
        c = text[k]
        if escaped:
            escaped = False
        elif in_string:
            escaped, in_string = c == "\\", c != '"'
        elif c == '"':
            in_string = True
        elif c in "()":
            depth += 1 if c == "(" else -1
            if depth == 0:
                return k + 1
    return None


def _arguments(body: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    required = schema.get("required", [])
    if not body.strip():
        return {} if not required else None
    try:
        value = json.loads(body, parse_constant=lambda token: 1 / 0)
    except (ValueError, ZeroDivisionError):
        return None
    if isinstance(value, dict):
        return value
    sole_string = len(required) == 1 and schema["properties"][required[0]]["type"] == "string"
    return {required[0]: value} if isinstance(value, str) and sole_string else None


class TestProperties:
    @settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
    @given(text=texts, cuts=st.lists(st.integers(0, 200)), cap=caps, tools=toolsets)
    def test_visible_text_and_call_raws_in_order_rebuild_the_input(
        self, text: str, cuts: list[int], cap: int, tools: dict[str, dict[str, Any]]
    ) -> None:
        """For any text and chunking, visible text with each call's raw put back is the input."""
        assert rebuilt(run(chunked(text, cuts), cap, tools)) == text

    @settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
    @given(text=texts, cuts=st.lists(st.integers(0, 200)), cap=caps, tools=toolsets)
    def test_result_does_not_depend_on_chunking(
        self, text: str, cuts: list[int], cap: int, tools: dict[str, dict[str, Any]]
    ) -> None:
        """For any text, the visible text and the calls are the same however it is chunked."""
        assert run(chunked(text, cuts), cap, tools) == run([text], cap, tools)

    @settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
    @given(text=bare_texts, cuts=st.lists(st.integers(0, 200)), tools=toolsets)
    def test_bare_calls_are_what_a_whole_text_reading_of_the_spec_finds(
        self, text: str, cuts: list[int], tools: dict[str, dict[str, Any]]
    ) -> None:
        """Without code wrappers and below the cap, the calls and the visible text are those of
        an obvious whole-text reading of SPEC 10 (ASCII boundary, any whitespace before ``(``,
        an invalid balanced span released whole), however the text is chunked."""
        assert run(chunked(text, cuts), 8192, tools) == reference(text, tools)

    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(text=texts, cuts=st.lists(st.integers(0, 200)), cap=caps, tools=toolsets)
    def test_text_held_between_feeds_never_exceeds_the_cap(
        self, text: str, cuts: list[int], cap: int, tools: dict[str, dict[str, Any]]
    ) -> None:
        """Once each feed's queue is drained, what has not come out yet is at most the cap."""
        p = VerbatimToolCallParser(tools=tools, max_buffer_chars=cap)
        assert max(fed_then_drained(p, chunked(text, cuts)), default=0) <= cap

    @settings(max_examples=200)
    @given(text=st.text(max_size=300), cuts=st.lists(st.integers(0, 300)), cap=caps)
    def test_any_unicode_input_never_raises(self, text: str, cuts: list[int], cap: int) -> None:
        """Arbitrary text, arbitrarily chunked, never raises and loses nothing."""
        assert rebuilt(run(chunked(text, cuts), cap)) == text

    @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
    @given(
        text=st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=3)), max_size=60).map(
            "".join
        ),
        cuts=st.lists(st.integers(0, 400)),
        cap=caps,
        tools=toolsets,
    )
    def test_hostile_text_mixed_with_any_unicode_never_raises(
        self, text: str, cuts: list[int], cap: int, tools: dict[str, dict[str, Any]]
    ) -> None:
        """Tool names, code openers and JSON mixed with arbitrary characters, arbitrarily
        chunked, never raise, lose nothing and do not depend on the chunking."""
        events = run(chunked(text, cuts), cap, tools)
        assert rebuilt(events) == text
        assert events == run([text], cap, tools)


def python_steps(chunks: Sequence[str], tools: dict[str, dict[str, Any]]) -> int:
    """Lines of engine/verbatim.py executed while feeding the chunks and draining the parser:
    a deterministic measure of the parser's own work (its C-level reads are each anchored or
    forward-only; the benchmark times them)."""
    count = 0

    def in_parser(frame: FrameType, event: str, arg: object) -> Callable[..., object] | None:
        return count_line if frame.f_code.co_filename == verbatim.__file__ else None

    def count_line(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        count += event == "line"
        return count_line

    previous = sys.gettrace()
    sys.settrace(in_parser)
    try:
        run(chunks, tools=tools)
    finally:
        sys.settrace(previous)
    return count


HOSTILE = [  # (what starts the text, the unit repeated after it)
    ("", "search"),  # a name repeated with no boundary between
    ("", "search "),  # a full name awaiting "(" again and again
    ("", "search\n\n"),
    ("", "search("),  # an anchor that never balances: held to the cap, again and again
    ("", "`search"),
    ("", "``` search\n"),
    ("", "web-sear-"),  # a name dying at a "-" where another may start
    ("", "x-web-search-"),
    ("", "請調用search\t"),
    ("search", "("),  # endless parentheses
    ('search({"q": ', "["),  # deep nesting
    ('search({"q": "', '\\"'),  # endless escapes in a string
    ("", "get_time()"),  # a call per unit
    ("", 'search(search("m1")) '),  # an invalid balanced span per unit
]


class TestLinearCost:
    @pytest.mark.parametrize("size", [1, 7, None], ids=["1-char", "7-char", "whole"])
    @pytest.mark.parametrize(("start", "unit"), HOSTILE)
    def test_four_times_the_hostile_text_costs_at_most_four_times_the_steps(
        self, start: str, unit: str, size: int | None
    ) -> None:
        """The parser's Python steps grow linearly with hostile text, however it is chunked."""

        def steps(repeats: int) -> int:
            text = start + unit * repeats
            chunks = (
                [text] if size is None else [text[i : i + size] for i in range(0, len(text), size)]
            )
            return python_steps(chunks, TOOLS)

        small, large = steps(300), steps(1200)
        assert large <= 4 * small + 200, (small, large)
