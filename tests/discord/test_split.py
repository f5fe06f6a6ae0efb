"""The 2000-character split: boundaries, fences, and what every cut keeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolloop.effects.discord.split import LIMIT, cut_page, open_fence


def pages(text: str, limit: int = LIMIT) -> list[str]:
    """Cut `text` the way a growing stream is cut, page after page."""
    out: list[str] = []
    while (cut := cut_page(text, limit)) is not None:
        page, text = cut
        out.append(page)
    return [*out, text]


class TestCutPage:
    """Where a page ends."""

    def test_text_that_fits_is_not_cut(self) -> None:
        """2000 characters are one message."""
        assert cut_page("x" * LIMIT) is None

    def test_a_paragraph_break_wins_over_a_later_sentence_end(self) -> None:
        """The cut takes the last blank line in the second half, not a sentence after it."""
        text = "a" * 1200 + "\n\n" + "b. " * 300
        assert cut_page(text) == ("a" * 1200, "b. " * 300)

    def test_without_a_paragraph_the_cut_is_at_a_sentence_end(self) -> None:
        """Sentences of 100 characters: the page ends with a full stop."""
        sentence = "w" * 98 + ". "
        page, rest = cut_page(sentence * 30) or ("", "")
        assert (page, rest) == ((sentence * 20).rstrip(), sentence * 10)

    def test_a_word_longer_than_the_page_is_cut_hard(self) -> None:
        """No boundary at all: exactly 2000 characters."""
        assert cut_page("x" * 2500) == ("x" * 2000, "x" * 500)

    def test_an_open_fence_is_closed_and_reopened_with_its_language(self) -> None:
        """A long ```python block: the page ends with ``` and the rest starts with ```python."""
        text = "Code:\n```python\n" + "x = 1\n" * 400 + "```\n"
        page, rest = cut_page(text) or ("", "")
        assert page.endswith("x = 1\n```") and len(page) <= LIMIT
        assert rest.startswith("```python\nx = 1\n")
        assert open_fence(page) is None

    def test_a_tilde_fence_is_closed_with_its_own_marker(self) -> None:
        """`~~~~` opens; only a fence of the same kind, as long or longer, closes it."""
        assert open_fence("~~~~sh\necho\n```\n") == ("~~~~", "sh")
        assert open_fence("~~~~sh\necho\n~~~~~\n") is None


@given(st.text(alphabet=st.sampled_from("ab .!\n`"), max_size=9000))
def test_every_page_fits_and_no_visible_character_is_lost(text: str) -> None:
    """Invariant: each page is at most 2000 characters, and the pages hold all the text's
    non-whitespace characters in order (fence markers added for a split block aside)."""
    cut = pages(text)
    assert all(len(page) <= LIMIT for page in cut)
    if "`" not in text:
        assert "".join("".join(p.split()) for p in cut) == "".join(text.split())


@given(st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=120))
def test_a_split_code_block_is_balanced_on_every_page(lines: list[int]) -> None:
    """Invariant: cutting a fenced block leaves no page with an open fence, and each
    continuation reopens it with its language."""
    text = "```rust\n" + "".join("y" * n + "\n" for n in lines) + "```\n"
    cut = pages(text, limit=200)
    assert all(open_fence(page) is None for page in cut)
    assert all(page.startswith("```rust\n") for page in cut)
