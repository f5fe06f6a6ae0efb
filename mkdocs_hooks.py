"""mkdocs hooks: the API reference's `SPEC n` references become links to docs/contract.md.

Docstrings cite the project's specification by section (`SPEC 5`, `SPEC 6a`,
`SPEC 6.8-6.10`, `SPEC section 2`); a reader of the site has the contract,
which restates each section for a bot author. Each reference keeps its text
and links to the contract's section for it.
"""

from __future__ import annotations

import re
from typing import Any

#: The contract's section (its heading's anchor) for each section of the specification.
SECTIONS = {
    "1": "one-attempt-one-turn",
    "2": "configuration",
    "3": "what-you-get-back",
    "4": "the-loop-iteration-by-iteration",
    "5": "streaming-once",
    "6": "executing-a-tool-call",
    "6a": "restarting-with-richer-context",
    "6b": "executing-a-tool-call",
    "6c": "executing-a-tool-call",
    "7": "when-visible-text-came-before-a-tool",
    "8": "what-you-get-back",
    "9": "notices",
    "10": "the-generation-turn",
}
REFERENCE = re.compile(
    r"\bSPEC (?:sections? )?(?P<section>\d+)(?P<sub>[a-c])?(?P<rest>(?:[.\-]\d+|,? step \d+)*)"
)


def link_spec_references(html: str, contract: str) -> str:
    """`html` with each `SPEC n...` outside a tag linked to `contract`'s section for `n`."""

    def link(match: re.Match[str]) -> str:
        section = match["section"] + (match["sub"] or "")
        anchor = SECTIONS.get(section) or SECTIONS.get(match["section"])
        if anchor is None:
            raise ValueError(f"{match[0]!r}: the specification has no section {section}")
        return f'<a href="{contract}#{anchor}" title="the contract">{match[0]}</a>'

    # Only text between tags: an attribute or a tag name never holds a reference.
    parts = re.split(r"(<[^>]*>)", html)
    return "".join(part if part.startswith("<") else REFERENCE.sub(link, part) for part in parts)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """The API reference's references link to the contract (mkdocs calls this per page)."""
    if page.file.src_uri != "api.md":
        return html
    contract = files.get_file_from_path("contract.md")
    return link_spec_references(html, contract.url_relative_to(page.file))
