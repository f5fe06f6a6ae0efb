"""The documentation site reads offline: pictures drawn at build time, nothing from a CDN.

Also: the machine is on the Diagrams page at a readable size, and the API
reference's `SPEC n` references link to the contract's sections.
"""

from __future__ import annotations

import re

import pytest
import yaml

from mkdocs_hooks import SECTIONS, link_spec_references
from tests.docs_samples import ROOT
from tests.reliability.chart import line_chart

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


class TestNothingFromAnotherHost:
    def test_no_page_needs_a_diagram_script(self) -> None:
        """No ```mermaid fence in any page: Mermaid renders only with a script from a CDN."""
        fenced = [page.name for page in PAGES if re.search(r"^```mermaid", page.read_text(), re.M)]
        assert fenced == []

    def test_the_site_loads_no_font_or_script_from_elsewhere(self) -> None:
        """The theme uses the system's fonts, and no extra script or stylesheet is remote."""
        config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
        assert config["theme"]["font"] == "false"
        remote = [
            url
            for url in [*config.get("extra_javascript", []), *config.get("extra_css", [])]
            if "://" in str(url)
        ]
        assert remote == []

    def test_the_soak_chart_is_inline_svg(self) -> None:
        """docs/reliability.md's memory plot is an SVG between the soak markers."""
        page = (DOCS / "reliability.md").read_text()
        block = re.search(r"<!-- soak:begin -->\n(.*?)\n<!-- soak:end -->", page, re.S)
        assert block is not None and block.group(1).startswith("<svg ")
        assert "\n\n" not in block.group(1)  # one raw HTML block: Markdown leaves it whole
        assert block.group(1).count("<polyline ") == 2  # trio and asyncio


class TestTheMachineIsShown:
    def test_the_diagrams_page_shows_the_machine_at_its_own_scale(self) -> None:
        """The page embeds machine.svg unshrunk, in a box that scrolls sideways."""
        page = (DOCS / "diagrams.md").read_text()
        assert re.search(
            r'<div class="machine" style="overflow-x: auto" markdown>\n'
            r"!\[[^\]]+\]\(machine\.svg\)\{ style=\"max-width: none\" \}\n</div>",
            page,
        )

    def test_the_svg_labels_are_at_least_13_points(self) -> None:
        """Every label of docs/machine.svg is 13 pt or larger: readable without zooming."""
        svg = (DOCS / "machine.svg").read_text()
        sizes = {float(size) for size in re.findall(r'font-size="([\d.]+)"', svg)}
        assert sizes and min(sizes) >= 13


class TestSpecReferencesLinkToTheContract:
    def test_a_reference_keeps_its_text_and_links_to_the_section(self) -> None:
        """`SPEC 6.8-6.10` and `SPEC section 2` become links to the contract's sections."""
        html = "<p>Logged (SPEC 6.8-6.10); see SPEC section 2 and SPEC 6a.</p>"
        assert link_spec_references(html, "../contract/") == (
            '<p>Logged (<a href="../contract/#executing-a-tool-call" title="the contract">'
            "SPEC 6.8-6.10</a>); see "
            '<a href="../contract/#configuration" title="the contract">SPEC section 2</a> and '
            '<a href="../contract/#restarting-with-richer-context" title="the contract">'
            "SPEC 6a</a>.</p>"
        )

    def test_a_tag_or_attribute_is_left_alone(self) -> None:
        """Only text between tags is rewritten."""
        html = '<span title="SPEC 5">x</span>'
        assert link_spec_references(html, "c/") == html

    def test_a_section_the_specification_lacks_is_an_error_naming_it(self) -> None:
        """A reference to no section fails the build instead of linking nowhere."""
        with pytest.raises(ValueError, match=r"^'SPEC 11': the specification has no section 11$"):
            link_spec_references("<p>SPEC 11</p>", "c/")

    def test_every_reference_in_the_sources_resolves(self) -> None:
        """Each `SPEC n` the API reference can show names a section the contract restates."""
        sources = [
            p
            for d in ("states", "engine", "effects", "testing", "toolloop")
            for p in sorted((ROOT / d).rglob("*.py"))
        ]
        texts = [path.read_text() for path in sources]
        for text in texts:
            link_spec_references(text.replace("<", " ").replace(">", " "), "c/")
        assert sum(text.count("SPEC ") for text in texts) > 50
        headings = re.findall(r"^##+ (.+)$", (DOCS / "contract.md").read_text(), re.M)
        slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
        assert set(SECTIONS.values()) <= slugs


def test_the_line_chart_draws_one_line_per_series_through_every_point() -> None:
    """Each series is one polyline with a point per x; labels are 14 px text."""
    svg = line_chart("t", "turns", [1, 2, 3], "MiB", {"a": [1.0, 2.0, 3.0], "b": [0.5, 0.5, 1]})
    points = re.findall(r'<polyline [^>]*points="([^"]+)"', svg)
    assert [len(p.split()) for p in points] == [3, 3]
    assert set(re.findall(r'font-size="(\d+)"', svg)) == {"14"}
