"""The official `openai` Python SDK against a live Onyx: chat, streaming,
tool calls, models, embeddings, and errors as the SDK's own exception types."""

import json

import openai
import pytest

from conftest import ONYX_KEY

# azure/gpt-4o-mini: Azure OpenAI, the model mapped to the fake-echo deployment;
# gemini/ and vertex/: Google's generateContent (API key; static access token);
# bedrock/: AWS Bedrock's Converse API, SigV4-signed (an inference-profile-style id too).
PROVIDERS = [
    "openai/fake-echo",
    "anthropic/fake-echo",
    "ollama/fake-echo",
    "azure/gpt-4o-mini",
    "gemini/fake-echo",
    "vertex/fake-echo",
    "bedrock/fake-echo",
    "bedrock/us.anthropic.fake-echo:0",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look something up",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]


@pytest.fixture
def client(stack):
    return openai.OpenAI(base_url=f"{stack}/v1", api_key=ONYX_KEY, max_retries=0)


@pytest.mark.parametrize("model", PROVIDERS)
def test_chat(client, model):
    completion = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello sdk"}])
    assert completion.choices[0].message.content == "echo: hello sdk"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens == 3


@pytest.mark.parametrize("model", PROVIDERS)
def test_streaming_with_usage(client, model):
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "stream this now"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: stream this now"
    assert chunks[-1].usage.completion_tokens == 4
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


@pytest.mark.parametrize(
    "model",
    ["openai/fake-tools", "anthropic/fake-tools", "ollama/fake-tools", "azure/fake-tools", "gemini/fake-tools", "vertex/fake-tools",
     "bedrock/us.anthropic.fake-tools:0"],
)
def test_tool_calls(client, model):
    messages = [{"role": "user", "content": "tokyo"}]
    first = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"query": "tokyo"}
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "clear skies"})
    second = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
    assert second.choices[0].message.content == "tool said: clear skies"


@pytest.mark.parametrize("model", ["anthropic/fake-tools", "azure/fake-tools", "gemini/fake-tools", "bedrock/fake-tools"])
def test_streamed_tool_calls_accumulate(client, model):
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "oslo"}], tools=TOOLS, stream=True
    )
    arguments = ""
    name = None
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            name = call.function.name or name
            arguments += call.function.arguments or ""
    assert name == "lookup"
    assert json.loads(arguments) == {"query": "oslo"}


def test_models_list(client):
    ids = {m.id for m in client.models.list()}
    assert {"openai/fake-echo", "anthropic/fake-echo", "ollama/fake-echo:latest", "bedrock/fake-echo"} <= ids


@pytest.mark.parametrize("model", ["openai/fake-embed", "ollama/fake-embed"])
def test_embeddings(client, model):
    # The SDK asks for base64 by default and decodes it.
    result = client.embeddings.create(model=model, input=["red apple", "green apple"])
    assert len(result.data) == 2
    assert len(result.data[0].embedding) == 16
    plain = client.embeddings.create(model=model, input="red apple", encoding_format="float")
    assert plain.data[0].embedding == pytest.approx(result.data[0].embedding)


def test_errors_are_the_sdks_own_exceptions(stack, client):
    bad = openai.OpenAI(base_url=f"{stack}/v1", api_key="onyx_sk_wrong_key_000000", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="nope/model", messages=[{"role": "user", "content": "x"}])
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad_request:
        client.chat.completions.create(model="openai/fake-echo", messages=[])
    assert bad_request.value.param == "messages"
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="openai/fake-429", messages=[{"role": "user", "content": "x"}])
