// Onyx's request fields as body fields through the official `openai` npm
// SDK (extra keys in the request object), and the session id in the
// answer's `x_onyx.session_id`; the fields never reach the upstream.
// Binaries come from $ONYX_BIN and $FAKE_UPSTREAM_BIN (set by tests/run).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startStack } from './stack.mjs';

const KEY = 'onyx_sk_js_sdk_fields_key_0001';
let stack;

before(async () => {
  stack = await startStack(KEY);
});

after(() => stack?.stop());

async function upstreamOnyxFields() {
  const sent = await (await fetch(new URL('/_fake/requests', stack.urls.openai))).json();
  return sent.flatMap((request) => Object.keys(request).filter((key) => key.toLowerCase().includes('onyx')));
}

test('the session named in the body comes back in x_onyx, streamed on the first chunk', async () => {
  const { data, response } = await stack.client.chat.completions
    .create({ model: 'openai/fake-echo', messages: [{ role: 'user', content: 'remember teal' }], 'x-onyx-session-id': 'new' })
    .withResponse();
  const session = response.headers.get('x-onyx-session-id');
  assert.ok(session);
  assert.equal(data.x_onyx.session_id, session);
  const stream = await stack.client.chat.completions.create({
    model: 'openai/fake-echo',
    messages: [{ role: 'user', content: 'stream js' }],
    stream: true,
    'x-onyx-session-id': session,
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.equal(chunks[0].x_onyx.session_id, session);
  assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'echo: stream js');
  assert.deepEqual(await upstreamOnyxFields(), []);
});

test('a field sent as header and body with different values is a BadRequestError naming both', async () => {
  await assert.rejects(
    stack.client.chat.completions.create(
      { model: 'openai/fake-echo', messages: [{ role: 'user', content: 'hi' }], 'x-onyx-include-memory': true },
      { headers: { 'x-onyx-include-memory': 'false' } },
    ),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.param, 'x-onyx-include-memory');
      assert.match(err.message, /header.*body/);
      return true;
    },
  );
});
