"""The inspector page in headless Chromium, over `toolloop inspect --demo` in its own process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Page

from tests.browser.conftest import Demo

WATCH_FOR = 30.0
"""Seconds to follow a turn to its end (a demo turn takes about 7)."""

SAMPLE = """() => {
  const row = document.querySelector("#turns tbody tr.selected");
  const current = [...document.querySelectorAll("#machine .phase.current")].map(g => g.id);
  const lit = [...document.querySelectorAll("#machine .phase.lit")].map(g => g.id);
  return {row: row && row.dataset.phase, current, lit};
}"""


def open_page(browser: Browser, url: str) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": 820})
    page.goto(url)
    page.wait_for_selector("#connection[data-state='live']")
    return page


def follow_a_turn(page: Page) -> tuple[str, list[dict[str, Any]]]:
    """Select the newest running turn and sample the page until it finished."""
    page.wait_for_selector("#turns tbody tr:not(.finished)")
    row = page.locator("#turns tbody tr:not(.finished)").first
    turn_id = row.get_attribute("data-turn-id")
    assert turn_id is not None
    row.click()
    samples: list[dict[str, Any]] = []
    deadline = time.monotonic() + WATCH_FOR
    while time.monotonic() < deadline:
        sample = page.evaluate(SAMPLE)
        samples.append(sample)
        if sample["row"] == "finished":
            break
        time.sleep(0.05)
    return turn_id, samples


def collapsed(phases: list[str]) -> list[str]:
    return [phase for index, phase in enumerate(phases) if index == 0 or phases[index - 1] != phase]


def test_the_lit_phase_follows_the_selected_turns_moves(
    browser: Browser, demo: Demo, artefacts: Path
) -> None:
    page = open_page(browser, demo.url)
    turn_id, samples = follow_a_turn(page)
    assert samples[-1]["row"] == "finished", "the turn did not finish while watched"
    for sample in samples:  # the outlined phase is always the selected turn's
        assert sample["current"] == [f"phase-{sample['row']}"], sample
        if sample["row"] != "finished":
            assert f"phase-{sample['row']}" in sample["lit"]
    seen = collapsed([sample["row"] for sample in samples])
    detail = httpx.get(f"{demo.base}api/turns/{turn_id}").json()
    moved = collapsed(
        [detail["timeline"][0]["source"]]
        + [entry["dest"] for entry in detail["timeline"] if entry["kind"] == "move"]
    )
    assert is_subsequence(seen, moved), (seen, moved)
    assert {"streaming", "dispatching", "finished"} <= set(seen)
    shown = page.locator("#timeline li[data-kind='move']").all_inner_texts()
    assert len(shown) == sum(1 for entry in detail["timeline"] if entry["kind"] == "move")
    page.screenshot(path=str(artefacts / "inspector.png"))
    page.click("#view-exits")
    assert page.locator("#exits ul[data-status='completed'] li").count() >= 1
    assert not page.locator("#machine").is_visible()
    page.screenshot(path=str(artefacts / "inspector-exits.png"))


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    """`part` appears in `whole` in order (the page samples; it may miss a short phase)."""
    remaining = iter(whole)
    return all(any(item == other for other in remaining) for item in part)


def test_the_token_guard_refuses_the_page_without_its_token(
    browser: Browser, guarded_demo: Demo
) -> None:
    refused = browser.new_page()
    response = refused.goto(guarded_demo.base)
    assert response is not None and response.status == 401
    assert "needs its token" in refused.content()
    page = open_page(browser, guarded_demo.url)  # ?token= once; the cookie does the rest
    page.wait_for_selector("#turns tbody tr")
    assert page.locator("#machine .phase").count() == 5
