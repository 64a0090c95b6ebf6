// The official `@anthropic-ai/sdk` against a live Onyx (`baseURL` without
// `/v1`): messages.create, messages.stream, tool use round trips,
// countTokens, image blocks and errors as the SDK's own error classes; each
// against an Anthropic provider (passed through) and an OpenAI one (translated).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startStack } from './stack.mjs';

const KEY = 'onyx_sk_js_anthropic_test_key_01';
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const TOOLS = [{ name: 'lookup', description: 'Look something up', input_schema: { type: 'object', properties: { query: { type: 'string' } } } }];
let stack;
let client;

before(async () => {
  stack = await startStack(KEY);
  client = new Anthropic({ baseURL: stack.base, apiKey: KEY, maxRetries: 0 });
});

after(() => stack?.stop());

for (const provider of ['anthropic', 'openai']) {
  const model = `${provider}/fake-echo`;

  test(`create, stream, count tokens and an image through ${model}`, async () => {
    const message = await client.messages.create({ model, max_tokens: 64, system: 'Be terse.', messages: [{ role: 'user', content: 'hi js' }] });
    assert.equal(message.type, 'message');
    assert.deepEqual(message.content, [{ type: 'text', text: 'echo: hi js' }]);
    assert.equal(message.stop_reason, 'end_turn');
    assert.equal(message.usage.output_tokens, 3);

    const stream = client.messages.stream({ model, max_tokens: 64, messages: [{ role: 'user', content: 'stream js please' }] });
    const names = [];
    stream.on('streamEvent', (event) => names.push(event.type));
    let text = '';
    stream.on('text', (delta) => (text += delta));
    const final = await stream.finalMessage();
    assert.equal(text, 'echo: stream js please');
    assert.equal(final.content[0].text, 'echo: stream js please');
    assert.equal(final.usage.output_tokens, 4);
    assert.equal(names[0], 'message_start');
    assert.equal(names.at(-1), 'message_stop');
    assert.ok(names.indexOf('content_block_start') < names.indexOf('content_block_delta'));
    assert.ok(names.lastIndexOf('content_block_stop') < names.indexOf('message_delta'));

    const count = await client.messages.countTokens({ model, system: 'be brief', messages: [{ role: 'user', content: 'three words here' }] });
    assert.ok(count.input_tokens >= 5 && count.input_tokens <= 20, JSON.stringify(count));

    const seen = await client.messages.create({
      model,
      max_tokens: 64,
      messages: [{ role: 'user', content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } },
        { type: 'text', text: 'describe it' },
      ] }],
    });
    assert.equal(seen.content[0].text, 'echo: describe it');
  });

  test(`tool use round trip through ${provider}/fake-tools, streamed`, async () => {
    const tools = `${provider}/fake-tools`;
    const messages = [{ role: 'user', content: 'weather in Lyon' }];
    const first = await client.messages.stream({ model: tools, max_tokens: 64, tools: TOOLS, messages }).finalMessage();
    assert.equal(first.stop_reason, 'tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    assert.equal(use.name, 'lookup');
    assert.deepEqual(use.input, { query: 'weather in Lyon' });
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'rainy' }] });
    const second = await client.messages.create({ model: tools, max_tokens: 64, tools: TOOLS, messages });
    assert.equal(second.content.at(-1).text, 'tool said: rainy');
  });
}

test('errors are the SDK error classes', async () => {
  const bad = new Anthropic({ baseURL: stack.base, apiKey: 'onyx_sk_wrong_js', maxRetries: 0 });
  await assert.rejects(
    bad.messages.create({ model: 'anthropic/fake-echo', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    (err) => err instanceof Anthropic.AuthenticationError && err.status === 401 && err.error.type === 'error',
  );
  await assert.rejects(
    client.messages.create({ model: 'openai/fake-echo', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'bogus' }] }] }),
    (err) => err instanceof Anthropic.BadRequestError && err.error.error.message.includes('messages.0.content.0.type'),
  );
  await assert.rejects(
    client.messages.create({ model: 'nowhere/model', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    (err) => err instanceof Anthropic.NotFoundError,
  );
});
