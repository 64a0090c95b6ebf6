"""Onyx's request fields as body fields through the official `openai` SDK's
`extra_body`, and the session id in the answer's `x_onyx.session_id`: the
fields never reach the upstream, and a field sent both ways with different
values is the SDK's own BadRequestError naming both."""

import httpx
import openai
import pytest

from conftest import FAKE_URLS, ONYX_KEY


@pytest.fixture
def client(stack):
    return openai.OpenAI(base_url=f"{stack}/v1", api_key=ONYX_KEY, max_retries=0)


def upstream_onyx_fields():
    # The fake's own routes sit at its root, beside the `/v1` its base URL names.
    sent = httpx.get(httpx.URL(FAKE_URLS["openai"]).copy_with(path="/_fake/requests")).json()
    return [key for request in sent for key in request if "onyx" in key.lower()]


def test_session_in_extra_body_and_in_the_answer(client):
    raw = client.chat.completions.with_raw_response.create(
        model="openai/fake-echo",
        messages=[{"role": "user", "content": "remember teal"}],
        extra_body={"x-onyx-session-id": "new", "x-onyx-include-memory": False},
    )
    first = raw.parse()
    session = raw.headers["x-onyx-session-id"]
    assert first.model_extra["x_onyx"]["session_id"] == session
    again = client.chat.completions.create(
        model="openai/fake-echo",
        messages=[{"role": "user", "content": "what colour?"}],
        extra_body={"x-onyx-session-id": session},
    )
    assert again.model_extra["x_onyx"]["session_id"] == session
    stream = client.chat.completions.create(
        model="openai/fake-echo",
        messages=[{"role": "user", "content": "stream it"}],
        stream=True,
        extra_body={"x-onyx-session-id": session},
    )
    chunks = list(stream)
    assert chunks[0].model_extra["x_onyx"]["session_id"] == session
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo: stream it"
    assert upstream_onyx_fields() == []


def test_a_field_sent_both_ways_differently_is_a_bad_request(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="openai/fake-echo",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-onyx-session-id": "new"},
            extra_body={"x-onyx-session-id": "some-other-session"},
        )
    message = refused.value.body["message"]
    assert "header" in message and "body" in message and "some-other-session" in message
    assert refused.value.body["param"] == "x-onyx-session-id"


def test_responses_carry_the_session_id(client):
    response = client.responses.create(
        model="openai/fake-echo", input="hello", extra_body={"x-onyx-session-id": "new"}
    )
    assert response.model_extra["x_onyx"]["session_id"]
    assert upstream_onyx_fields() == []
