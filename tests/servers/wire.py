"""A raw reader of OpenAI-style chat completion streams, for the wire tests.

It does on purpose nothing an adapter does (no accumulation, no repair): it
records what the server sent, so the tests can pin the servers' behaviour.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.servers.harness import Endpoint

USER_ASKS = [{"role": "user", "content": "What is the weather in Paris?"}]


@dataclass
class Stream:
    """What one streamed request produced."""

    status: int
    content_type: str
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False  # the stream ended with `data: [DONE]`
    body: str = ""  # the response body when it was not an event stream

    @property
    def deltas(self) -> list[dict[str, Any]]:
        """Return the delta of choice 0 of every event that has one."""
        return [e["choices"][0]["delta"] for e in self.events if e.get("choices")]

    @property
    def contents(self) -> list[str]:
        """Return every non-empty content delta, in order."""
        return [d["content"] for d in self.deltas if d.get("content")]

    @property
    def text(self) -> str:
        """Return the streamed content joined."""
        return "".join(self.contents)

    @property
    def finish_reason(self) -> str | None:
        """Return the last finish reason the stream reported."""
        reasons = [e["choices"][0].get("finish_reason") for e in self.events if e.get("choices")]
        return next((r for r in reversed(reasons) if r), None)

    @property
    def tool_call_fragments(self) -> list[dict[str, Any]]:
        """Return every tool-call fragment of every delta, in order."""
        return [call for d in self.deltas for call in (d.get("tool_calls") or [])]

    @property
    def arguments(self) -> str:
        """Return the argument fragments of tool call 0 joined."""
        return "".join(
            (f.get("function") or {}).get("arguments") or ""
            for f in self.tool_call_fragments
            if f.get("index", 0) == 0
        )


def chat_body(endpoint: Endpoint, **fields: Any) -> dict[str, Any]:
    """Return a streamed chat request for ``endpoint``'s model with ``fields``."""
    body: dict[str, Any] = {"model": endpoint.model.name, "messages": USER_ASKS, "stream": True}
    body.update(fields)
    return body


def stream_chat(client: httpx.Client, endpoint: Endpoint, body: dict[str, Any]) -> Stream:
    """POST ``body`` to ``endpoint`` and read the whole response."""
    with client.stream("POST", endpoint.chat_url, json=body) as response:
        content_type = response.headers.get("content-type", "")
        result = Stream(response.status_code, content_type)
        if not content_type.startswith("text/event-stream"):
            result.body = response.read().decode()
            return result
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                result.done = True
            else:
                result.events.append(json.loads(data))
        return result


def raw_exchange(
    endpoint: Endpoint, body: dict[str, Any], wait_s: float = 10.0
) -> tuple[bytes, bool]:
    """POST ``body`` on a fresh socket; return the bytes read and whether the server closed it.

    Reading goes on until the server closes the connection or sends nothing
    for ``wait_s`` (a connection kept alive, as HTTP/1.1 wants by default).
    """
    url = urlsplit(endpoint.chat_url)
    payload = json.dumps(body).encode()
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    received = b""
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80)) as sock:
        sock.settimeout(wait_s)
        sock.sendall(head + payload)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, False
        except ConnectionResetError:
            pass
    return received, True
