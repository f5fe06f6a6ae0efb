"""`make mutation`'s command line: a bad sample size is refused by name, before any work."""

from __future__ import annotations

import argparse
import re

import pytest

from tests.mutation import _positive


@pytest.mark.parametrize("text", ["0", "-3", "x", ""])
def test_a_sample_that_is_not_a_positive_whole_number_is_refused(text: str) -> None:
    """sqlite would read LIMIT -1 as no limit: the runner says what it expected instead."""
    message = f"expected a whole number of mutants >= 1, got {text!r}"
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        _positive(text)


def test_a_positive_sample_is_read_as_its_number() -> None:
    """A valid size is the number of mutants to keep."""
    assert _positive("200") == 200
