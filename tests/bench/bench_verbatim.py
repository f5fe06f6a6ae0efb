"""Throughput of the verbatim tool-call parser, and whether its cost is linear.

Run with ``python -m tests.bench bench_verbatim``. Targets: >= 20 MB/s for prose in 64-char
chunks, >= 1 MB/s in 1-char chunks, and about 10x the cost for 10x the text (hostile text
too).
"""

from __future__ import annotations

import random
import time

from toolloop.engine.verbatim import VerbatimToolCallParser

MB = 1_000_000
TOOLS = {
    name: {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    for name in (
        "web_search",
        "fetch_url",
        "get_weather",
        "remember",
        "update_short_term_memory",
        "send_sticker",
        "roll_dice",
        "generate_image",
    )
}
WORDS = [
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "so",
    "then",
    "it",
    "this",
    "that",
    "we",
    "you",
    "they",
    "was",
    "is",
    "are",
    "be",
    "have",
    "has",
    "had",
    "not",
    "weather",
    "today",
    "tomorrow",
    "forecast",
    "rain",
    "sun",
    "cloudy",
    "warm",
    "cold",
    "morning",
    "evening",
    "city",
    "trip",
    "look",
    "check",
    "found",
    "says",
    "shows",
    "think",
    "would",
    "could",
    "should",
    "maybe",
    "really",
    "quite",
    "some",
    "more",
    "search",
    "results",
    "page",
    "article",
    "news",
    "story",
    "link",
    "image",
    "memory",
    "remember",
    "sticker",
    "dice",
    "web_search",
    "fetch",
    "get",
    "roll",
    "send",
    "update",
    "generate",
    "short",
    "term",
]
EXTRAS = ("(just in case)", "`ls -la`", "(see above)", "**note**", '"quoted"', "3.14", "e.g.")


def prose(size: int) -> str:
    """Chat-like text: sentences of common words and tool-ish words (some are tool names or
    their prefixes), now and then a parenthesis, inline code, emphasis or a number."""
    rng = random.Random(7)
    out: list[str] = []
    length = 0
    while length < size:
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice(EXTRAS))
        sentence = " ".join(words).capitalize() + rng.choice([".", ".", "!", "?", ".\n\n"])
        out.append(sentence)
        length += len(sentence) + 1
    return " ".join(out)[:size]


def name_prefixes(size: int) -> str:
    """Hostile text: tool names and their prefixes, each of which must be held a while."""
    rng = random.Random(7)
    names = sorted(TOOLS)
    parts = (n[: rng.randint(1, len(n))] for n in (rng.choice(names) for _ in range(size // 4)))
    return " ".join(parts)[:size]


def hostile(size: int) -> str:
    """Hostile text: anchors that hold until their parentheses balance (or the cap), invalid
    spans released whole, calls, names straight after CJK text and before newlines."""
    rng = random.Random(7)
    names = sorted(TOOLS)
    units = (
        "{}(",
        "`{}",
        "請調用{}\n",
        '{0}({0}("x")) ',
        '{}("x") ',
        "{} (see below) ",
        '"',
        ")",
    )
    parts = (rng.choice(units).format(rng.choice(names)) for _ in range(size // 12))
    return "".join(parts)[:size]


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def seconds(pieces: list[str]) -> float:
    """Time feeding every piece and flushing; check that no text went missing."""
    parser = VerbatimToolCallParser(tools=TOOLS)
    start = time.process_time()
    shown = 0
    for piece in pieces:
        out = parser.feed(piece)
        shown += len(out.visible_text) + (len(out.function_call.raw) if out.function_call else 0)
    while (end := parser.flush()).pending_text or end.function_call:
        shown += len(end.pending_text) + (len(end.function_call.raw) if end.function_call else 0)
    elapsed = time.process_time() - start
    assert shown == sum(map(len, pieces)), "text went missing"
    return elapsed


def best(pieces: list[str], rounds: int = 3) -> float:
    """The fastest of a few runs: the first run of a process pays for warming up, and a
    shared machine's neighbours only ever add time."""
    return min(seconds(pieces) for _ in range(rounds))


def main() -> None:
    for label, make in (
        ("prose", prose),
        ("tool-name prefixes", name_prefixes),
        ("hostile anchors and spans", hostile),
    ):
        text = make(10 * MB)
        for size in (64, 1):
            rate = len(text) / MB / best(chunks(text, size))
            print(f"verbatim {label} {size}-char chunks: {rate:.1f} MB/s", flush=True)
        small = best(chunks(make(MB), 64))
        large = best(chunks(text, 64))
        print(f"verbatim {label} 10 MB / 1 MB cost ratio: {large / small:.1f}x", flush=True)


if __name__ == "__main__":
    main()
