"""Serving the inspector beside a bot: uvicorn on its own thread and event loop.

The bot's loop (asyncio or trio) never waits for the page: the turns' hooks
write to the `Inspector` and the server thread reads it. Bound to 127.0.0.1
unless told otherwise; any other address needs a token.
"""

from __future__ import annotations

import ipaddress
import threading
import time

import uvicorn

from toolloop.effects.inspect.app import LONGEST_PAUSE, create_app
from toolloop.effects.inspect.board import Inspector
from toolloop.states.errors import ToolloopError

STARTUP_TIMEOUT = 10.0
STOP_GRACE = 1.0
"""Seconds `Running.stop` waits, after the longest pause between two ticks, for open pages'
event streams to end."""


class TokenRequired(ToolloopError, ValueError):
    """A non-loopback bind was asked for without a token."""


class ServeFailed(ToolloopError, OSError):
    """The inspector's server did not start listening (the port taken, the address not ours)."""


class Running:
    """A running inspector server: its `url` (with the token when it has one), and `stop`."""

    def __init__(
        self,
        server: uvicorn.Server,
        thread: threading.Thread,
        url: str,
        closing: threading.Event,
        period: float,
    ) -> None:
        self._server, self._thread, self.url = server, thread, url
        self._closing, self._period = closing, period

    def stop(self) -> None:
        """Stop the server: open pages' event streams end at their next tick, then it exits.

        A page that does not let go within a second of that is cut off.
        """
        self._closing.set()
        self._server.should_exit = True
        self._thread.join(self._period + STOP_GRACE)
        self._server.force_exit = True
        self._thread.join()


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve_in_thread(
    inspector: Inspector,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    rate: float = 10.0,
) -> Running:
    """Start the page for `inspector` on `host:port` (0: any free port) and return at once.

    Raises `TokenRequired` for a non-loopback `host` without a `token`, and
    `OSError` when the address cannot be bound.
    """
    if token is None and not is_loopback(host):
        raise TokenRequired(
            f"toolloop inspect: binding {host} exposes the inspector beyond this machine; "
            "give it a token (--token, TOOLLOOP_INSPECT_TOKEN, or token=...)"
        )
    if token is not None and not token:
        raise TokenRequired("toolloop inspect: the token is empty")
    closing = threading.Event()
    app = create_app(inspector, token=token, rate=rate, host=host, closing=closing)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run()
        except BaseException as error:  # a bind failure ends uvicorn with SystemExit
            failure.append(error)

    thread = threading.Thread(target=run, name="toolloop-inspect", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise ServeFailed(f"toolloop inspect: could not serve on {host}:{port}") from (
                failure[0] if failure else None
            )
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/" + ("" if token is None else f"?token={token}")
    return Running(server, thread, url, closing, max(1 / rate, LONGEST_PAUSE))
