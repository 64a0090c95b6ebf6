"""The official `anthropic` Python SDK against a live Onyx (`base_url` without
`/v1`): messages.create, messages.stream, tool use round trips, count_tokens,
image blocks and errors as the SDK's own exception types; each against an
Anthropic provider (passed through) and an OpenAI one (translated)."""

import anthropic
import pytest

from conftest import ONYX_KEY

MODELS = ["anthropic/fake-echo", "openai/fake-echo"]
TOOL_MODELS = ["anthropic/fake-tools", "openai/fake-tools"]
TOOLS = [
    {
        "name": "lookup",
        "description": "Look something up",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]
# A 1x1 PNG.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture
def client(stack):
    return anthropic.Anthropic(base_url=stack, api_key=ONYX_KEY, max_retries=0)


@pytest.mark.parametrize("model", MODELS)
def test_create(client, model):
    message = client.messages.create(
        model=model,
        max_tokens=64,
        system="You are terse.",
        messages=[{"role": "user", "content": "hello sdk"}],
    )
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.content[0].type == "text"
    assert message.content[0].text == "echo: hello sdk"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 3
    assert message.usage.input_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_stream(client, model):
    with client.messages.stream(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "stream me please"}]
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert final.content[0].text == "echo: stream me please"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 4
    assert events[0] == "message_start"
    assert events[-1] == "message_stop"
    for name in ["content_block_start", "content_block_delta", "content_block_stop", "message_delta"]:
        assert name in events
    assert events.index("content_block_start") < events.index("content_block_stop") < events.index("message_delta")


@pytest.mark.parametrize("model", TOOL_MODELS)
@pytest.mark.parametrize("streamed", [False, True])
def test_tool_use_round_trip(client, model, streamed):
    messages = [{"role": "user", "content": "weather in Paris"}]
    if streamed:
        with client.messages.stream(model=model, max_tokens=64, tools=TOOLS, messages=messages) as stream:
            first = stream.get_final_message()
    else:
        first = client.messages.create(model=model, max_tokens=64, tools=TOOLS, messages=messages)
    assert first.stop_reason == "tool_use"
    use = next(block for block in first.content if block.type == "tool_use")
    assert use.name == "lookup"
    assert use.input == {"query": "weather in Paris"}
    assert use.id.startswith("toolu_")
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
    ]
    second = client.messages.create(model=model, max_tokens=64, tools=TOOLS, messages=messages)
    assert second.content[-1].text == "tool said: sunny"
    assert second.stop_reason == "end_turn"


@pytest.mark.parametrize("model", MODELS)
def test_count_tokens(client, model):
    count = client.messages.count_tokens(
        model=model, system="be brief", messages=[{"role": "user", "content": "three words here"}]
    )
    assert 5 <= count.input_tokens <= 20


@pytest.mark.parametrize("model", MODELS)
def test_image_block(client, model):
    message = client.messages.create(
        model=model,
        max_tokens=64,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
                    {"type": "text", "text": "describe it"},
                ],
            }
        ],
    )
    assert message.content[0].text == "echo: describe it"


def test_thinking_passes_through(client):
    message = client.messages.create(
        model="anthropic/fake-echo",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "think first"}],
    )
    assert [block.type for block in message.content] == ["thinking", "text"]
    assert message.content[0].signature == "sig_fake"


def test_bad_key(stack):
    client = anthropic.Anthropic(base_url=stack, api_key="onyx_sk_wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as raised:
        client.messages.create(model=MODELS[0], max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 401
    assert raised.value.body["error"]["type"] == "authentication_error"


def test_invalid_request(client):
    # Refused by Onyx while translating, naming the block's path.
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(
            model="openai/fake-echo", max_tokens=8, messages=[{"role": "user", "content": [{"type": "bogus", "x": 1}]}]
        )
    assert raised.value.body["type"] == "error"
    assert "messages.0.content.0.type" in raised.value.body["error"]["message"]
    # Refused by the Anthropic upstream, passed on.
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(
            model="anthropic/fake-echo", max_tokens=8, messages=[{"role": "assistant", "content": "me first"}]
        )
    assert raised.value.body["error"]["type"] == "invalid_request_error"


def test_unknown_model(client):
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="nowhere/model", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
