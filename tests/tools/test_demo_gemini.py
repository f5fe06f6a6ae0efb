"""`toolloop demo --provider gemini`: the demo through GeminiProvider, in a subprocess."""

from __future__ import annotations

import base64

from tests.tools.test_demo import run_demo, summary
from toolloop.testing import GeminiServer
from toolloop.tools import demo_gemini_model


def test_the_gemini_demo_runs_on_its_loopback_server_with_no_key() -> None:
    """The embedded model over Gemini's protocol: both tools run, the answer carries 395."""
    done = run_demo("--provider", "gemini", GEMINI_API_KEY="")
    assert done.returncode == 0, done.stderr
    assert summary(done.stdout) == (3, 2)
    assert "/v1beta" in done.stdout.splitlines()[0]
    answer = next(line for line in done.stdout.splitlines() if "is now" in line)
    assert "395" in answer
    assert "The plan calls for" not in done.stdout  # thoughts never reach the channel


def test_the_gemini_demo_sends_the_key_from_the_environment_in_its_header() -> None:
    """`--base-url` is a Gemini API root; GEMINI_API_KEY rides in x-goog-api-key, not the URL."""
    with GeminiServer(demo_gemini_model.chunks, api_key="AIza-demo") as server:
        done = run_demo(
            "--provider",
            "gemini",
            "--base-url",
            server.base_url,
            "--model",
            "gemini-3-pro",
            GEMINI_API_KEY="AIza-demo",
        )
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr
    assert [r.model for r in requests] == ["gemini-3-pro"] * 3
    assert all(r.query == "alt=sse" for r in requests)
    replayed = requests[2].body["contents"]
    signatures = [
        p["thoughtSignature"] for c in replayed for p in c["parts"] if "thoughtSignature" in p
    ]
    assert [base64.b64decode(s) for s in signatures] == [b"demo-signature-0", b"demo-signature-1"]
