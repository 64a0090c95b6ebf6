"""The official `openai` Python SDK's Responses API against a live Onyx: text and
multi-part input, streaming (raw events and the `responses.stream` helper),
function tools, `previous_response_id`, retrieve, delete and input items, each
through a translated upstream (fake OpenAI chat completions, fake Anthropic)
and through the passthrough to the fake OpenAI's own Responses API."""

import json

import openai
import pytest

from conftest import ONYX_KEY

MODELS = ["openai/fake-echo", "anthropic/fake-echo", "openai_resp/fake-echo"]
TOOL_MODELS = [m.replace("fake-echo", "fake-tools") for m in MODELS]
TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "description": "Look something up",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]
PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


@pytest.fixture
def client(stack):
    return openai.OpenAI(base_url=f"{stack}/v1", api_key=ONYX_KEY, max_retries=0)


@pytest.mark.parametrize("model", MODELS)
def test_create_text(client, model):
    response = client.responses.create(model=model, input="hello sdk")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text == "echo: hello sdk"
    assert response.output[0].type == "message"
    assert response.output[0].id.startswith("msg_")
    assert response.usage.output_tokens == 3
    assert response.usage.total_tokens == response.usage.input_tokens + 3


@pytest.mark.parametrize("model", MODELS)
def test_multi_part_input_with_an_image(client, model):
    response = client.responses.create(
        model=model,
        instructions="Describe images.",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this"},
                    {"type": "input_image", "image_url": PIXEL},
                ],
            }
        ],
    )
    assert response.output_text == "echo: what is this"
    assert response.instructions == "Describe images."


@pytest.mark.parametrize("model", MODELS)
def test_streaming_events(client, model):
    events = list(client.responses.create(model=model, input="stream this now", stream=True))
    types = [e.type for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == "echo: stream this now"
    assert events[-1].response.usage.output_tokens == 4
    assert events[-1].response.output_text == "echo: stream this now"


@pytest.mark.parametrize("model", MODELS)
def test_stream_helper(client, model):
    with client.responses.stream(model=model, input="helper stream") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == "echo: helper stream"
    assert final.output_text == "echo: helper stream"
    assert final.status == "completed"


@pytest.mark.parametrize("model", TOOL_MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_function_tools_round_trip(client, model, stream):
    if stream:
        with client.responses.stream(model=model, input="tokyo", tools=TOOLS) as events:
            kinds = [e.type for e in events]
            first = events.get_final_response()
        assert "response.function_call_arguments.delta" in kinds
        assert "response.function_call_arguments.done" in kinds
    else:
        first = client.responses.create(model=model, input="tokyo", tools=TOOLS)
    call = first.output[-1]
    assert call.type == "function_call"
    assert call.name == "lookup"
    assert json.loads(call.arguments) == {"query": "tokyo"}
    assert call.id.startswith("fc")
    second = client.responses.create(
        model=model,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "clear skies"}],
        tools=TOOLS,
    )
    assert second.output_text == "tool said: clear skies"
    # The same round trip without the store: the whole conversation sent again.
    third = client.responses.create(
        model=model,
        input=[
            {"role": "user", "content": "tokyo"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": call.call_id, "output": "rain"},
        ],
        tools=TOOLS,
        store=False,
    )
    assert third.output_text == "tool said: rain"


@pytest.mark.parametrize("model", MODELS)
def test_previous_response_retrieve_delete_and_input_items(client, model):
    first = client.responses.create(model=model, input="first words", instructions="be kind")
    second = client.responses.create(model=model, input="second words", previous_response_id=first.id)
    assert second.output_text == "echo: second words"
    assert second.previous_response_id == first.id
    assert second.instructions is None

    got = client.responses.retrieve(second.id)
    assert got.id == second.id
    assert got.output_text == "echo: second words"

    items = list(client.responses.input_items.list(second.id))
    # Newest first: this turn's input, the first answer, the first input.
    assert [i.type for i in items] == ["message", "message", "message"]
    assert [i.role for i in items] == ["user", "assistant", "user"]
    assert items[0].content[0].text == "second words"
    assert items[2].content[0].text == "first words"
    page = client.responses.input_items.list(second.id, order="asc", limit=1)
    assert [i.content[0].text for i in page.data] == ["first words"]
    assert page.has_more

    client.responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(second.id)


def test_errors_are_the_sdks_own_exceptions(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="openai/fake-echo", input="x", previous_response_id="resp_unknown")
    assert missing.value.code == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="anthropic/fake-echo", input="x", tools=[{"type": "namespace", "name": "n"}])
    assert bad.value.param == "tools[0].tools"
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(
            model="openai/fake-echo", input=[{"type": "function_call_output", "output": "lost"}]
        )
    assert bad.value.param == "input[0].call_id"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_missing")


def test_built_in_tools_are_left_out_for_a_translated_model_and_named_in_a_header(client):
    raw = client.responses.with_raw_response.create(
        model="anthropic/fake-echo",
        input="Say hi",
        tools=[{"type": "web_search_preview"}, {"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
    )
    assert raw.headers["x-onyx-tools-left-out"] == "web_search_preview"
    response = raw.parse()
    assert response.status == "completed"
    assert "Say hi" in response.output_text
