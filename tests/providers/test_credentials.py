"""Credentials besides `api_key`: an `api-key` header, an `Authorization` header, the base URL's
user and password. Sent to the server, never shown (issue 20 item 2)."""

from __future__ import annotations

import base64

import pytest

from tests.openai_server import OpenAIServer, error_reply, text_reply
from tests.providers.conftest import RecordingSink, make_request
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.states import StreamError, StreamResult

pytestmark = pytest.mark.anyio

KEY = "azure-0123456789abcdef"
PASSWORD = "p@ss-word-4711"


def error_of(result: StreamResult) -> StreamError:
    assert isinstance(result.data, StreamError)
    return result.data


def with_userinfo(server: OpenAIServer, userinfo: str) -> str:
    return server.base_url.replace("http://", f"http://{userinfo}@")


async def stream(provider: OpenAICompatProvider) -> StreamResult:
    async with provider:
        return await provider.stream(make_request(), RecordingSink())


@pytest.mark.parametrize(
    ("headers", "sent"),
    [
        ({"api-key": KEY}, ("api-key", KEY)),
        ({"Authorization": f"Bearer {KEY}"}, ("Authorization", f"Bearer {KEY}")),
        ({"Ocp-Apim-Subscription-Key": KEY}, ("Ocp-Apim-Subscription-Key", KEY)),
    ],
)
async def test_a_credential_header_is_sent_and_masked_in_errors(
    server: OpenAIServer, headers: dict[str, str], sent: tuple[str, str]
) -> None:
    """A 401 echoing the header's key says `***`, also where the excerpt's cut fell in it."""
    server.script(error_reply(401, f"invalid key {KEY}; key prefix {KEY[:10]}"))
    provider = OpenAICompatProvider(base_url=server.base_url, model="m", headers=headers)
    result = await stream(provider)
    name, value = sent
    assert server.requests[0].headers[name] == value
    assert ": invalid key ***; key prefix *** (" in error_of(result).message


async def test_a_header_that_is_no_credential_is_quoted_as_it_is(server: OpenAIServer) -> None:
    """`api-version` is not masked: the server's message about it stays readable."""
    server.script(error_reply(400, "api-version 2024-02-01 is not supported"))
    provider = OpenAICompatProvider(
        base_url=server.base_url, model="m", headers={"api-version": "2024-02-01"}
    )
    assert error_of(await stream(provider)).message.endswith(
        "api-version 2024-02-01 is not supported"
    )


async def test_the_url_s_user_and_password_go_as_basic_auth_and_are_never_shown(
    server: OpenAIServer,
) -> None:
    """Percent-encoded in the URL, sent as a Basic header, out of the repr, the URL
    the errors name and the server's echo (decoded or not)."""
    server.script(error_reply(403, f"user bot with {PASSWORD} / p%40ss-word-4711 is refused"))
    provider = OpenAICompatProvider(
        base_url=with_userinfo(server, "bot:p%40ss-word-4711"), model="m"
    )
    shown = repr(provider)
    result = await stream(provider)
    expected = base64.b64encode(f"bot:{PASSWORD}".encode()).decode()
    assert server.requests[0].headers["Authorization"] == f"Basic {expected}"
    assert f"url='{server.base_url}/chat/completions'" in shown
    assert error_of(result).message.startswith(
        f"HTTP 403 from {server.base_url}/chat/completions: user bot with *** / *** is refused ("
    )


async def test_a_token_given_as_the_url_s_user_is_masked(server: OpenAIServer) -> None:
    """`https://TOKEN@host`: without a password, the user is the credential."""
    server.script(error_reply(401, f"token {KEY} expired"))
    provider = OpenAICompatProvider(base_url=with_userinfo(server, KEY), model="m")
    assert ": token *** expired (" in error_of(await stream(provider)).message


async def test_a_refused_connection_names_the_url_without_its_password() -> None:
    """The transport error's URL is the one without userinfo."""
    provider = OpenAICompatProvider(
        base_url=f"http://bot:{PASSWORD.replace('@', '%40')}@127.0.0.1:9/v1", model="m"
    )
    message = error_of(await stream(provider)).message
    assert message.startswith("POST http://127.0.0.1:9/v1/chat/completions: could not connect")
    assert "p%40ss" not in message and PASSWORD not in message


def test_an_api_key_and_a_url_password_together_are_refused() -> None:
    """Both would be the `Authorization` header: the provider says so, quoting neither."""
    with pytest.raises(ValueError) as caught:
        OpenAICompatProvider(
            base_url=f"http://bot:{PASSWORD}@127.0.0.1:9/v1", model="m", api_key=KEY
        )
    assert str(caught.value) == "give the API key or a user and password in base_url, not both"


async def test_a_plain_url_and_key_work_as_before(server: OpenAIServer) -> None:
    """No userinfo: the bearer token alone, and a text reply streams."""
    server.script(text_reply("hi"))
    provider = OpenAICompatProvider(base_url=server.base_url, model="m", api_key=KEY)
    result = await stream(provider)
    assert result.accumulated_text == "hi"
    assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"
