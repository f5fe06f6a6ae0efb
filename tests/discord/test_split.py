"""The 2000-character split: boundaries, fences, and what every cut keeps."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolloop.effects.discord.split import (
    LIMIT,
    Fence,
    Page,
    cut_page,
    last_page,
    open_fence,
    paginate,
)


def contents(text: str, limit: int = LIMIT) -> list[str]:
    return [page.content for page in paginate(text, limit)]


class TestCutPage:
    """Where a page ends."""

    def test_text_that_fits_is_not_cut(self) -> None:
        """2000 characters are one message."""
        assert cut_page("x" * LIMIT) is None

    def test_a_paragraph_break_wins_over_a_later_sentence_end(self) -> None:
        """The cut takes the last blank line in the second half, not a sentence after it."""
        text = "a" * 1200 + "\n\n" + "b. " * 300
        assert cut_page(text) == Page(body="a" * 1200 + "\n\n")
        assert contents(text) == ["a" * 1200, ("b. " * 300).rstrip()]

    def test_without_a_paragraph_the_cut_is_at_a_sentence_end(self) -> None:
        """Sentences of 100 characters: the page ends with a full stop."""
        sentence = "w" * 98 + ". "
        assert contents(sentence * 30) == [(sentence * 20).rstrip(), (sentence * 10).rstrip()]

    def test_a_word_longer_than_the_page_is_cut_hard(self) -> None:
        """No boundary at all: exactly 2000 characters."""
        assert contents("x" * 2500) == ["x" * 2000, "x" * 500]

    def test_an_open_fence_is_closed_and_reopened_with_its_language(self) -> None:
        """A long ```python block: the page ends with ``` and the next starts with ```python."""
        text = "Code:\n```python\n" + "x = 1\n" * 400 + "```\n"
        first, second = contents(text)
        assert first.endswith("x = 1\n```") and len(first) <= LIMIT
        assert second.startswith("```python\nx = 1\n") and second.endswith("x = 1\n```")
        assert open_fence(first) is None and open_fence(second) is None

    def test_a_tilde_fence_is_closed_with_its_own_marker(self) -> None:
        """`~~~~` opens; only a fence of the same kind, as long or longer, closes it."""
        assert open_fence("~~~~sh\necho\n```\n") == ("~~~~", "sh")
        assert open_fence("~~~~sh\necho\n~~~~~\n") is None

    def test_a_fence_whose_first_line_outruns_the_page_ends_in_two_pages(self) -> None:
        """Issue 20's flood: "```" and 2,500 characters without a newline were paginated
        forever (the reopened info string was the rest again); now it is two pages."""
        text = "```" + "x" * 2500
        assert contents(text) == [text[:2000], text[2000:]]

    def test_a_long_language_is_dropped_from_the_reopened_fence(self) -> None:
        """A 600-character info string does not fit in a quarter page: the fence reopens bare."""
        text = "```" + "i" * 600 + "\n" + "code\n" * 500
        pages = paginate(text)
        assert pages[1].reopen == "```\n"
        assert all(len(page.content) <= LIMIT for page in pages)

    @pytest.mark.parametrize("limit", [0, -3])
    def test_a_limit_below_one_character_is_refused(self, limit: int) -> None:
        """No page could hold anything: the error names the limit."""
        with pytest.raises(
            ValueError, match=rf"^a page limit must be at least 1 character \(got {limit}\)$"
        ):
            cut_page("text", limit)


PIECES = st.sampled_from(
    ["```", "````", "~~~", "```python", "~~~sh", "\n", "\n\n", " ", ". ", "x" * 40, "`"]
)
TEXTS = st.lists(PIECES | st.text(max_size=30), max_size=120).map("".join)
FENCES = st.none() | st.tuples(
    st.sampled_from(["```", "~~~", "`" * 30, "~" * 700]), st.text(max_size=900)
)


@given(text=TEXTS, limit=st.integers(min_value=1, max_value=400), fence=FENCES)
@example(text="```" + "x" * 2500, limit=LIMIT, fence=None)
@example(text="```" + "x" * 2500 + "\n" + "y\n" * 1000, limit=LIMIT, fence=None)
def test_any_text_ends_in_bounded_pages_that_fit_and_join_back(
    text: str, limit: int, fence: Fence | None
) -> None:
    """Invariant (any text, any open fence, any limit): the pages end, no more of them than
    one per quarter limit of text (plus the last), each page's message is within the limit,
    the pages' bodies join back to exactly the text, and a message differs from its body
    only by the fence lines the cut added and whitespace trimmed at its ends."""
    pages, rest, carried = [], text, fence
    bound = len(text) // max(1, limit // 4) + 1
    while (page := cut_page(rest, limit, carried)) is not None:
        pages.append(page)
        assert len(pages) <= bound, "the pages do not end"
        assert page.body, "a page took nothing from the text"
        rest, carried = rest[len(page.body) :], page.carried
    pages.append(last_page(rest, limit, carried))
    assert "".join(page.body for page in pages) == text
    for page in pages:
        assert len(page.content) <= limit
        middle = page.content.removeprefix(page.reopen).removesuffix(page.close)
        assert page.content == page.reopen + middle + page.close
        assert middle.strip() == page.body.strip() and middle in page.body


@given(st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=120))
def test_a_split_code_block_is_balanced_on_every_page(lines: list[int]) -> None:
    """Invariant: cutting a fenced block leaves no page with an open fence, and each
    continuation reopens it with its language."""
    text = "```rust\n" + "".join("y" * n + "\n" for n in lines) + "```\n"
    cut = contents(text, limit=200)
    assert all(open_fence(page) is None for page in cut)
    assert all(page.startswith("```rust\n") for page in cut)
