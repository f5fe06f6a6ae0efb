"""The page's server over real HTTP on loopback: what it serves, its live events, its guards."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolloop.effects.inspect import Inspector, Running, TokenRequired, serve_in_thread
from toolloop.effects.inspect.app import LONGEST_PAUSE, ROWS_PER_SECOND, STATIC, pause
from toolloop.effects.inspect.server import is_loopback
from toolloop.states import TurnSettings


@pytest.fixture
def inspector() -> Inspector:
    return Inspector()


@pytest.fixture
def served(inspector: Inspector) -> Iterator[Running]:
    running = serve_in_thread(inspector, port=0, rate=50)
    yield running
    running.stop()


def test_the_page_and_everything_it_loads_come_from_the_package(served: Running) -> None:
    page = httpx.get(served.url)
    assert page.status_code == 200 and "toolloop inspect" in page.text
    loaded = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert loaded and all(url.startswith(("/static/", "data:")) for url in loaded)
    for url in loaded:
        if url.startswith("/static/"):
            assert httpx.get(served.url.rstrip("/") + url).status_code == 200
    for shipped in STATIC.iterdir():  # no script, style or font from elsewhere
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", shipped.read_text())


def test_the_machine_and_the_turns_are_served_as_json(
    served: Running, inspector: Inspector
) -> None:
    with inspector.watch(TurnSettings(), channel="#json"):
        drawn = httpx.get(served.url + "api/machine").json()
        turns = httpx.get(served.url + "api/turns").json()
        detail = httpx.get(served.url + f"api/turns/{turns[0]['id']}").json()
    assert "finished" in drawn["phases"] and drawn["exits"]["completed"]
    assert [(turn["channel"], turn["finished"]) for turn in turns] == [("#json", False)]
    assert detail["timeline"] == []
    missing = httpx.get(served.url + "api/turns/999")
    assert missing.status_code == 404 and "no such turn" in missing.json()["error"]


def test_the_events_push_a_turn_when_it_changes(served: Running, inspector: Inspector) -> None:
    with httpx.stream("GET", served.url + "api/events", timeout=10) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.iter_lines()
        with inspector.watch(TurnSettings(), channel="#live"):
            pass
        pushed = next_event(lines)
    rows = [dict(zip(pushed["fields"], row, strict=True)) for row in pushed["turns"]]
    assert [(row["channel"], row["phase"], row["finished"]) for row in rows] == [
        ("#live", "idle", True)
    ]


def test_a_push_carries_only_the_turns_changed_since_the_last_and_the_ids_gone() -> None:
    """A turn that has not changed is not sent again; a finished turn no longer kept is
    named in `removed` once, and then in no push."""
    inspector = Inspector(keep_finished=0)
    running = serve_in_thread(inspector, port=0, rate=50)
    try:
        with httpx.stream("GET", running.url + "api/events", timeout=10) as events:
            lines = events.iter_lines()
            first = inspector.watch(TurnSettings(), channel="#first")
            with first:
                assert pushed_channels(next_event(lines)) == ["#first"]
                with inspector.watch(TurnSettings(), channel="#second"):
                    assert pushed_channels(next_event(lines)) == ["#second"]
                gone = next_event(lines)
            last = next_event(lines)
    finally:
        running.stop()
    assert (pushed_channels(gone), len(gone["removed"])) == ([], 1)
    assert (pushed_channels(last), last["removed"]) == ([], [first.id])


def test_a_page_that_leaves_frees_its_event_stream(served: Running, inspector: Inspector) -> None:
    """A page closed after a push: the server ends its stream and drops its connection."""
    with httpx.stream("GET", served.url + "api/events", timeout=10) as events:
        lines = events.iter_lines()
        with inspector.watch(TurnSettings(), channel="#leaving"):
            next_event(lines)
    connections = served._server.server_state.connections
    deadline = time.monotonic() + 10
    while connections and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not connections


def test_a_page_is_pushed_to_less_often_than_its_rate_only_when_many_turns_change() -> None:
    """After a push of up to `ROWS_PER_SECOND * period` rows, the rate's period; after a
    larger one, a pause that keeps to `ROWS_PER_SECOND`, but no longer than `LONGEST_PAUSE`
    unless the rate itself asks for longer."""
    period = 0.1
    rows = int(ROWS_PER_SECOND * period)
    assert [pause(period, sent) for sent in (0, 1, rows)] == [period] * 3
    assert pause(period, 3 * rows) == pytest.approx(3 * period)
    assert pause(period, 1_000_000) == LONGEST_PAUSE
    assert pause(2 * LONGEST_PAUSE, 1_000_000) == 2 * LONGEST_PAUSE


def pushed_channels(pushed: dict[str, Any]) -> list[str]:
    """The channels of the turns a push carries, in its order."""
    at = pushed["fields"].index("channel")
    return [row[at] for row in pushed["turns"]]


def test_stopping_ends_an_open_event_stream_with_no_error(inspector: Inspector) -> None:
    """The page's stream ends whole (its last chunk sent), and uvicorn logs no exception."""
    errors = Recorded()
    logging.getLogger("uvicorn.error").addHandler(errors)
    try:
        running = serve_in_thread(inspector, port=0, rate=50)
        with httpx.stream("GET", running.url + "api/events", timeout=10) as events:
            lines = events.iter_lines()
            with inspector.watch(TurnSettings(), channel="#open"):
                pass
            next_event(lines)
            running.stop()
            rest = list(lines)  # a stream cut mid-response raises here
    finally:
        logging.getLogger("uvicorn.error").removeHandler(errors)
    assert not any(line.startswith("data: ") for line in rest)
    assert [record.getMessage() for record in errors.records] == []


class Recorded(logging.Handler):
    """The records of WARNING and above a logger passes it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def next_event(lines: Iterator[str]) -> dict[str, Any]:
    """The data of the next `turns` event."""
    for line in lines:
        if line.startswith("data: "):
            payload: dict[str, Any] = json.loads(line.removeprefix("data: "))
            return payload
    raise AssertionError("the event stream ended")


def test_without_a_token_only_loopback_names_are_answered(served: Running) -> None:
    """A page on another site that rebinds its DNS name to 127.0.0.1 gets nothing."""
    assert httpx.get(served.url + "api/turns", headers={"Host": "evil.example"}).status_code == 400
    assert httpx.get(served.url + "api/turns", headers={"Host": "localhost"}).status_code == 200


def test_another_loopback_address_is_answered_under_its_own_name(inspector: Inspector) -> None:
    running = serve_in_thread(inspector, host="127.0.0.2", port=0)
    try:
        assert running.url.startswith("http://127.0.0.2:")
        assert httpx.get(running.url + "api/turns").status_code == 200
    finally:
        running.stop()


def test_a_non_loopback_bind_without_a_token_is_refused(inspector: Inspector) -> None:
    with pytest.raises(TokenRequired, match=r"binding 0\.0\.0\.0 .* give it a token"):
        serve_in_thread(inspector, host="0.0.0.0", port=0)
    with pytest.raises(TokenRequired, match="the token is empty"):
        serve_in_thread(inspector, host="0.0.0.0", port=0, token="")


def test_with_a_token_every_request_must_carry_it(inspector: Inspector) -> None:
    running = serve_in_thread(inspector, host="0.0.0.0", port=0, token="t0k3n")
    try:
        port = running.url.split(":")[2].split("/")[0]
        base = f"http://127.0.0.1:{port}/"
        assert running.url.endswith("/?token=t0k3n")
        refused = httpx.get(base + "api/turns")
        assert refused.status_code == 401 and "needs its token" in refused.text
        assert httpx.get(base + "api/turns?token=wrong").status_code == 401
        bearer = {"Authorization": "Bearer t0k3n"}
        assert httpx.get(base + "api/turns", headers=bearer).status_code == 200
        with httpx.Client() as browser:
            page = browser.get(base + "?token=t0k3n")
            assert page.status_code == 200 and "HttpOnly" in page.headers["set-cookie"]
            assert browser.get(base + "api/machine").status_code == 200  # by the cookie
    finally:
        running.stop()


def test_a_busy_port_is_an_error_naming_it(served: Running, inspector: Inspector) -> None:
    port = int(served.url.split(":")[2].split("/")[0])
    with pytest.raises(OSError, match=f"could not serve on 127.0.0.1:{port}"):
        serve_in_thread(inspector, port=port)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("example.com", False),
    ],
)
def test_loopback_is_localhost_or_a_loopback_address(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
