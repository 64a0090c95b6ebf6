// The official `openai` npm SDK against a live Onyx: chat, streaming, tool
// calls, models, embeddings, and errors as the SDK's own error classes.
// Binaries come from $ONYX_BIN and $FAKE_UPSTREAM_BIN (set by tests/run).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

const KEY = 'onyx_sk_js_sdk_test_key_0001';
const procs = [];
let client;
let base;

function firstLine(proc) {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout });
    rl.once('line', (line) => resolve(line));
    proc.once('exit', (code) => reject(new Error(`exited ${code} before printing`)));
  });
}

before(async () => {
  const fake = spawn(process.env.FAKE_UPSTREAM_BIN, [], { stdio: ['ignore', 'pipe', 'inherit'] });
  procs.push(fake);
  const urls = JSON.parse(await firstLine(fake));
  const dir = mkdtempSync(join(tmpdir(), 'onyx-js-'));
  const config = join(dir, 'onyx.json5');
  writeFileSync(config, `{
    gateway: { auth: { apiKeys: ["${KEY}"] } },
    providers: {
      openai: { type: "openai", baseUrl: "${urls.openai}", apiKey: "${urls.key}", maxRetries: 0 },
      anthropic: { type: "anthropic", baseUrl: "${urls.anthropic}", apiKey: "${urls.key}" },
      ollama: { type: "ollama", baseUrl: "${urls.ollama}" },
    },
  }`);
  const env = { ...process.env, HOME: dir, ONYX_DATA_DIR: join(dir, 'data') };
  for (const name of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENROUTER_API_KEY', 'OLLAMA_HOST', 'ONYX_CONFIG']) delete env[name];
  const onyx = spawn(process.env.ONYX_BIN, ['serve', '--config', config, '--listen', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  procs.push(onyx);
  const line = await firstLine(onyx);
  assert.match(line, /^listening on /);
  base = line.replace('listening on ', '').trim();
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0 });
});

after(() => procs.forEach((p) => p.kill('SIGTERM')));

const TOOLS = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { query: { type: 'string' } } } } }];

for (const model of ['openai/fake-echo', 'anthropic/fake-echo', 'ollama/fake-echo']) {
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
  for (const model of ['openai/fake-tools', 'anthropic/fake-tools', 'ollama/fake-tools']) {
    const completion = await client.chat.completions.create({ model, tools: TOOLS, messages: [{ role: 'user', content: 'lima' }] });
    const call = completion.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'lookup');
    assert.deepEqual(JSON.parse(call.function.arguments), { query: 'lima' });
  }
});

test('models and embeddings', async () => {
  const ids = [];
  for await (const model of client.models.list()) ids.push(model.id);
  assert.ok(ids.includes('anthropic/fake-echo'), ids.join(','));
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
