// The official `openai` npm SDK against a live Onyx: chat, streaming, tool
// calls, models, embeddings, and errors as the SDK's own error classes.
// Binaries come from $ONYX_BIN and $FAKE_UPSTREAM_BIN (set by tests/run).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startStack } from './stack.mjs';

const KEY = 'onyx_sk_js_sdk_test_key_0001';
let stack;
let client;
let base;

before(async () => {
  stack = await startStack(KEY);
  ({ client, base } = stack);
});

after(() => stack?.stop());

const TOOLS = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { query: { type: 'string' } } } } }];

for (const model of ['openai/fake-echo', 'anthropic/fake-echo', 'ollama/fake-echo', 'azure/gpt-4o-mini', 'gemini/fake-echo', 'vertex/fake-echo', 'bedrock/fake-echo', 'bedrock/us.anthropic.fake-echo:0']) {
  test(`chat and stream through ${model}`, async () => {
    const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi js' }] });
    assert.equal(completion.choices[0].message.content, 'echo: hi js');
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'stream js' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      usage = chunk.usage ?? usage;
    }
    assert.equal(text, 'echo: stream js');
    assert.equal(usage.completion_tokens, 3);
  });
}

test('tool calls', async () => {
  for (const model of ['openai/fake-tools', 'anthropic/fake-tools', 'ollama/fake-tools', 'azure/fake-tools', 'gemini/fake-tools', 'vertex/fake-tools', 'bedrock/us.anthropic.fake-tools:0']) {
    const completion = await client.chat.completions.create({ model, tools: TOOLS, messages: [{ role: 'user', content: 'lima' }] });
    const call = completion.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'lookup');
    assert.deepEqual(JSON.parse(call.function.arguments), { query: 'lima' });
  }
});

test('streamed tool calls through bedrock', async () => {
  const stream = await client.chat.completions.create({
    model: 'bedrock/fake-tools',
    tools: TOOLS,
    messages: [{ role: 'user', content: 'oslo' }],
    stream: true,
  });
  let name;
  let args = '';
  let finish;
  for await (const chunk of stream) {
    for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name = call.function?.name ?? name;
      args += call.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(name, 'lookup');
  assert.deepEqual(JSON.parse(args), { query: 'oslo' });
  assert.equal(finish, 'tool_calls');
});

test('models and embeddings', async () => {
  const ids = [];
  for await (const model of client.models.list()) ids.push(model.id);
  assert.ok(ids.includes('anthropic/fake-echo'), ids.join(','));
  assert.ok(ids.includes('bedrock/fake-echo'), ids.join(','));
  const embedding = await client.embeddings.create({ model: 'ollama/fake-embed', input: 'blue sky' });
  assert.equal(embedding.data[0].embedding.length, 16);
});

test('errors are the SDK error classes', async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'onyx_sk_wrong_000000000000', maxRetries: 0 });
  await assert.rejects(bad.models.list(), OpenAI.AuthenticationError);
  await assert.rejects(
    client.chat.completions.create({ model: 'nope/x', messages: [{ role: 'user', content: 'x' }] }),
    OpenAI.NotFoundError,
  );
  await assert.rejects(client.chat.completions.create({ model: 'openai/fake-echo', messages: [] }), OpenAI.BadRequestError);
});
