// The official `openai` npm SDK's Responses API against a live Onyx: create,
// streaming (raw events and the `responses.stream` helper), function tools,
// `previous_response_id`, retrieve, delete and input items, through translated
// upstreams (fake OpenAI chat completions, fake Anthropic) and the passthrough
// to the fake OpenAI's own Responses API.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startStack } from './stack.mjs';

let stack;
let client;

before(async () => {
  stack = await startStack('onyx_sk_js_sdk_responses_key_01');
  client = stack.client;
});

after(() => stack?.stop());

const MODELS = ['openai/fake-echo', 'anthropic/fake-echo', 'openai_resp/fake-echo'];
const TOOLS = [{ type: 'function', name: 'lookup', strict: false, parameters: { type: 'object', properties: { query: { type: 'string' } } } }];

for (const model of MODELS) {
  test(`create and stream through ${model}`, async () => {
    const response = await client.responses.create({
      model,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi js' }, { type: 'input_image', image_url: 'https://example.com/cat.png', detail: 'auto' }] }],
    });
    assert.equal(response.output_text, 'echo: hi js');
    assert.equal(response.status, 'completed');
    assert.equal(response.usage.output_tokens, 3);

    const events = [];
    for await (const event of await client.responses.create({ model, input: 'stream js', stream: true })) events.push(event);
    assert.equal(events[0].type, 'response.created');
    assert.equal(events.at(-1).type, 'response.completed');
    assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    assert.equal(text, 'echo: stream js');

    const helper = client.responses.stream({ model, input: 'helper js' });
    let streamed = '';
    helper.on('response.output_text.delta', (e) => { streamed += e.delta; });
    const final = await helper.finalResponse();
    assert.equal(streamed, 'echo: helper js');
    assert.equal(final.output_text, 'echo: helper js');
  });

  test(`tools, previous_response_id, retrieve, input items and delete through ${model}`, async () => {
    const toolModel = model.replace('fake-echo', 'fake-tools');
    const first = await client.responses.create({ model: toolModel, input: 'lima', tools: TOOLS });
    const call = first.output.at(-1);
    assert.equal(call.type, 'function_call');
    assert.deepEqual(JSON.parse(call.arguments), { query: 'lima' });
    const second = await client.responses.create({
      model: toolModel,
      tools: TOOLS,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    });
    assert.equal(second.output_text, 'tool said: sunny');

    const got = await client.responses.retrieve(second.id);
    assert.equal(got.id, second.id);
    const items = [];
    for await (const item of client.responses.inputItems.list(second.id)) items.push(item);
    // Newest first: the function's output, the call (after any text the model said), the question.
    assert.equal(items[0].type, 'function_call_output');
    assert.equal(items[1].type, 'function_call');
    assert.equal(items.at(-1).content[0].text, 'lima');

    await client.responses.delete(second.id);
    await assert.rejects(client.responses.retrieve(second.id), OpenAI.NotFoundError);
  });
}

test('errors are the SDK error classes', async () => {
  await assert.rejects(
    client.responses.create({ model: 'openai/fake-echo', input: 'x', previous_response_id: 'resp_unknown' }),
    (err) => err instanceof OpenAI.NotFoundError && err.code === 'previous_response_not_found',
  );
  await assert.rejects(
    client.responses.create({ model: 'anthropic/fake-echo', input: 'x', tools: [{ type: 'namespace', name: 'n' }] }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'tools[0].tools',
  );
});
