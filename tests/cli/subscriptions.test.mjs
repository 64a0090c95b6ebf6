// Subscription providers: Onyx drives the real Claude Code, Codex and GitHub
// Copilot CLIs (the npm packages in this folder) as the `claude-subscription`,
// `codex` and `copilot` providers, each pointed at a fake upstream with an API
// key instead of a subscription sign-in (Copilot through its BYOK provider,
// over the JSON-RPC protocol of its SDK). Through the official OpenAI JS SDK:
// one turn as JSON and streamed; a CLI killed mid-turn is a clean 502 and the
// next request works; shutdown leaves no CLI process behind (read from /proc);
// and the credential files are sealed at rest.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startStack } from '../sdk/js/stack.mjs';

const KEY = 'onyx_sk_subscription_test_0000';
const bin = (name) => join(dirname(fileURLToPath(import.meta.url)), 'node_modules', '.bin', name);
// Claude Code against the fake Anthropic upstream, the Codex CLI against the
// fake OpenAI one (its Responses API), each with an API key.
const providers = (urls) => `
  "claude-subscription": {
    type: "claude-subscription", command: "${bin('claude')}", baseUrl: "${urls.anthropic}", apiKey: "${urls.key}", maxRetries: 0,
  },
  codex: { type: "codex", command: "${bin('codex')}", baseUrl: "${urls.openai}", apiKey: "${urls.key}", maxRetries: 0 },
  copilot: { type: "copilot", command: "${bin('copilot')}", baseUrl: "${urls.openai}", apiKey: "${urls.key}", maxRetries: 0 },
  "sealed-codex": { type: "codex", command: "${SEALED_CODEX}", maxRetries: 0 },
  "device-codex": { type: "codex", command: "${DEVICE_STAND_IN}", maxRetries: 0 },
  "pasted-claude": { type: "claude-subscription", command: "${DEVICE_STAND_IN}", maxRetries: 0 },
`;
const CLIS = [
  { prefix: 'claude-subscription', program: 'claude', name: 'Claude Code', echo: /^echo: [\s\S]*Say hello$/, pieces: 3 },
  { prefix: 'codex', program: 'codex', name: 'Codex', echo: /^echo: Say hello\s*$/, pieces: 1 },
  // The Copilot CLI puts the date before the prompt; the fake echoes both.
  { prefix: 'copilot', program: 'copilot', name: 'GitHub Copilot', echo: /^echo: [\s\S]*Say hello$/, pieces: 2 },
];
// A stand-in for the Codex CLI that answers only when the credentials it
// reads from its config dir are the ones signed in (what a real CLI needs).
const TOKEN = 'rt-sealed-test-0123456789abcdef';
const SEALED_CODEX = join(mkdtempSync(join(tmpdir(), 'onyx-sealed-')), 'codex-stand-in.mjs');
writeFileSync(SEALED_CODEX, `#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
let auth = {};
try { auth = JSON.parse(readFileSync(join(process.env.CODEX_HOME, 'auth.json'), 'utf8')); } catch {}
const ok = auth.tokens?.refresh_token === '${TOKEN}';
const say = (line) => process.stdout.write(JSON.stringify(line) + '\\n');
if (ok) {
  say({ type: 'item.completed', item: { type: 'agent_message', text: 'signed in as ' + auth.tokens.account_id } });
  say({ type: 'turn.completed', usage: { input_tokens: 3, output_tokens: 4 } });
} else {
  say({ type: 'turn.failed', error: { message: 'not signed in' } });
}
`);
chmodSync(SEALED_CODEX, 0o755);
// A stand-in for the CLIs' own sign-ins, as the UI starts them: Codex's device
// flow prints a URL and a code, then finishes on its own; Claude Code's prints
// a URL and waits for the code the page shows to be pasted back.
const DEVICE_STAND_IN = join(mkdtempSync(join(tmpdir(), 'onyx-device-')), 'sign-in-stand-in.mjs');
writeFileSync(DEVICE_STAND_IN, `#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
const args = process.argv.slice(2).join(' ');
if (args === 'login --device-auth') {
  console.log('Follow these steps to sign in:\\n  1. Open \\u001b[94mhttps://auth.openai.com/codex/device\\u001b[0m\\n  2. Enter this one-time code \\u001b[94mK7QP-2XWB\\u001b[0m');
  setTimeout(() => {
    writeFileSync(join(process.env.CODEX_HOME, 'auth.json'), JSON.stringify({ tokens: { refresh_token: 'rt-device', account_id: 'acct-device' } }));
    console.log('Successfully logged in');
  }, 1500);
} else if (args === 'auth login --claudeai') {
  process.stdout.write('Use the url below to sign in:\\n\\nhttps://claude.ai/oauth/authorize?code=true&state=xyz\\n\\nPaste code here if prompted > ');
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (code) => {
    if (code.trim() !== 'pasted-code-42') {
      console.log('OAuth error: invalid code');
      process.exit(1);
    }
    const home = process.env.CLAUDE_CONFIG_DIR;
    writeFileSync(join(home, '.credentials.json'), JSON.stringify({ claudeAiOauth: { accessToken: 'a', refreshToken: 'rt-pasted', expiresAt: Date.now() + 3600_000 } }));
    writeFileSync(join(home, '.claude.json'), JSON.stringify({ oauthAccount: { emailAddress: 'grace@example.com' } }));
    console.log('Login successful');
    process.exit(0);
  });
} else {
  console.error('unexpected arguments: ' + args);
  process.exit(2);
}
`);
chmodSync(DEVICE_STAND_IN, 0o755);
let stack;

before(async () => {
  stack = await startStack(KEY, { providers, gateway: 'shutdownGraceSeconds: 1' });
});
after(() => stack.stop());

/** Every live process below `pid` (children, grandchildren, …), from /proc. */
function descendants(pid) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // The state and the parent follow the command, which may hold spaces.
    const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state === 'Z') continue;
    const list = children.get(Number(parent)) ?? [];
    list.push(Number(entry));
    children.set(Number(parent), list);
  }
  const found = [];
  const queue = [pid];
  while (queue.length) {
    for (const child of children.get(queue.shift()) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** Waits until Onyx has a child running `program`; returns its pid. */
async function cliChild(onyx, program) {
  for (let i = 0; i < 500; i++) {
    const child = descendants(onyx.pid).find((pid) => {
      try {
        // An argument named `program` (not any path containing the word).
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
          .split('\0')
          .some((arg) => arg.split('/').pop() === program);
      } catch {
        return false;
      }
    });
    if (child) return child;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no ${program} process appeared`);
}

const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Say hello' },
];

for (const cli of CLIS) {
  test(`${cli.prefix}: one turn as JSON, the answer and the usage from the CLI`, async () => {
    const reply = await stack.client.chat.completions.create({ model: `${cli.prefix}/fake-echo`, messages });
    assert.equal(reply.object, 'chat.completion');
    assert.equal(reply.model, 'fake-echo');
    assert.match(reply.choices[0].message.content, cli.echo);
    assert.equal(reply.choices[0].finish_reason, 'stop');
    assert.ok(reply.usage.prompt_tokens > 0, JSON.stringify(reply.usage));
    assert.ok(reply.usage.completion_tokens > 0, JSON.stringify(reply.usage));
  });

  test(`${cli.prefix}: one turn streamed, text deltas, a finish reason and the usage chunk`, async () => {
    const stream = await stack.client.chat.completions.create({
      model: `${cli.prefix}/fake-echo`,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const chunks = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.match(text, cli.echo);
    assert.ok(chunks.filter((c) => c.choices[0]?.delta?.content).length >= cli.pieces, 'the answer came in pieces');
    assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'stop');
    assert.ok(chunks.at(-1).usage.completion_tokens > 0, JSON.stringify(chunks.at(-1)));
  });

  test(`${cli.prefix}: a CLI killed mid-turn is a clean 502 in OpenAI's shape, and the next request works`, async () => {
    // fake-slow streams its answer over 3 s: long enough to kill the CLI inside it.
    const pending = stack.client.chat.completions.create({ model: `${cli.prefix}/fake-slow`, messages });
    const pid = await cliChild(stack.onyx, cli.program);
    process.kill(-pid, 'SIGKILL');
    await assert.rejects(pending, (err) => {
      assert.equal(err.status, 502);
      assert.equal(err.code, 'subscription_process_exited');
      assert.match(err.message, new RegExp(`${cli.prefix}: the ${cli.name} process exited before answering`));
      return true;
    });
    const reply = await stack.client.chat.completions.create({ model: `${cli.prefix}/fake-echo`, messages });
    assert.match(reply.choices[0].message.content, cli.echo);
  });
}

test('bad input names the field in OpenAI\'s error shape', async () => {
  await assert.rejects(
    stack.client.chat.completions.create({
      model: 'claude-subscription/fake-echo',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
    }),
    (err) => err.status === 400 && /messages\[0\]\.content/.test(err.message),
  );
});

test('GET /v1/subscriptions reads the sign-in from the credential files under the data dir', async () => {
  const list = async () => {
    const res = await fetch(`${stack.base}/v1/subscriptions`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 200);
    return (await res.json()).data;
  };
  const listed = await list();
  assert.deepEqual(listed[0], 
    { provider: 'claude-subscription', type: 'claude-subscription', cli: 'claude', connected: false, expired: false, account: null },
  );
  assert.deepEqual(listed.find((s) => s.provider === 'copilot'),
    { provider: 'copilot', type: 'copilot', cli: 'copilot', connected: false, expired: false, account: null },
  );
  const home = join(stack.dir, 'data', 'subscriptions', 'claude');
  mkdirSync(home, { recursive: true });
  const credentials = join(home, '.credentials.json');
  writeFileSync(credentials, JSON.stringify({ claudeAiOauth: { accessToken: 'a', expiresAt: Date.now() - 1000 } }));
  assert.deepEqual((await list())[0], {
    provider: 'claude-subscription', type: 'claude-subscription', cli: 'claude', connected: false, expired: true, account: null,
  });
  writeFileSync(credentials, JSON.stringify({ claudeAiOauth: { accessToken: 'a', refreshToken: 'r', expiresAt: Date.now() + 3600_000 } }));
  const config = JSON.parse(readFileSync(join(home, '.claude.json'), 'utf8'));
  writeFileSync(join(home, '.claude.json'), JSON.stringify({ ...config, oauthAccount: { emailAddress: 'ada@example.com' } }));
  assert.deepEqual((await list())[0], {
    provider: 'claude-subscription', type: 'claude-subscription', cli: 'claude', connected: true, expired: false, account: 'ada@example.com',
  });
  rmSync(credentials);
  writeFileSync(join(home, '.claude.json'), JSON.stringify(config));
});

test('credential files are sealed at rest, unsealed for a run, and the run still signs in', async () => {
  const home = join(stack.dir, 'data', 'subscriptions', 'codex');
  mkdirSync(home, { recursive: true });
  // A sign-in made outside Onyx: plaintext, sealed after the first run.
  writeFileSync(join(home, 'auth.json'), JSON.stringify({ tokens: { refresh_token: TOKEN, account_id: 'acct-7' } }));
  const ask = () => stack.client.chat.completions.create({ model: 'sealed-codex/m', messages });
  assert.equal((await ask()).choices[0].message.content, 'signed in as acct-7');
  const atRest = () => {
    assert.ok(!existsSync(join(home, 'auth.json')), 'no plaintext credentials at rest');
    const sealed = readFileSync(join(home, 'auth.json.sealed'), 'utf8');
    assert.match(sealed, /^onyx-sealed:v1:/);
    assert.ok(!sealed.includes(TOKEN) && !sealed.includes('acct-7'), 'the sealed file does not hold the token');
  };
  atRest();
  // The next run reads the credentials unsealed from the sealed file.
  assert.equal((await ask()).choices[0].message.content, 'signed in as acct-7');
  atRest();
  const res = await fetch(`${stack.base}/v1/subscriptions`, { headers: { authorization: `Bearer ${KEY}` } });
  const codex = (await res.json()).data.find((s) => s.provider === 'sealed-codex');
  assert.deepEqual(codex, { provider: 'sealed-codex', type: 'codex', cli: 'codex', connected: true, expired: false, account: 'acct-7' });
  // Without the credentials the stand-in refuses: the answer above needed them.
  rmSync(join(home, 'auth.json.sealed'));
  await assert.rejects(ask(), (err) => err.status === 502 && /not signed in/.test(err.message));
});

test('the UI\'s sign-in: the CLI\'s URL and device code shown, a pasted code passed on, connected and sealed', async () => {
  const call = async (method, path, body) => {
    const res = await fetch(`${stack.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  const until = async (provider, done) => {
    for (let i = 0; i < 100; i++) {
      const { body } = await call('GET', `/v1/subscriptions/${provider}/login`);
      if (done(body)) return body;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`the sign-in of ${provider} never got there`);
  };
  // The device flow: URL and code read from what the CLI printed (colours removed).
  const started = await call('POST', '/v1/subscriptions/device-codex/login');
  assert.equal(started.status, 202, JSON.stringify(started.body));
  assert.equal(started.body.state, 'waiting');
  const shown = await until('device-codex', (s) => s.url && s.code);
  assert.equal(shown.url, 'https://auth.openai.com/codex/device');
  assert.equal(shown.code, 'K7QP-2XWB');
  assert.equal(shown.accepts_code, false);
  const connected = await until('device-codex', (s) => s.state !== 'waiting');
  assert.equal(connected.state, 'connected', JSON.stringify(connected));
  assert.equal(connected.message, 'acct-device');
  const home = join(stack.dir, 'data', 'subscriptions', 'codex');
  assert.ok(!existsSync(join(home, 'auth.json')), 'sealed at rest once connected');
  assert.ok(!readFileSync(join(home, 'auth.json.sealed'), 'utf8').includes('rt-device'));
  const listed = await call('GET', '/v1/subscriptions');
  assert.equal(listed.body.data.find((s) => s.provider === 'device-codex').connected, true);
  rmSync(join(home, 'auth.json.sealed'));

  // Claude Code's flow: the page's code pasted back; a wrong one fails in words.
  const claudeHome = join(stack.dir, 'data', 'subscriptions', 'claude');
  const claudeJson = join(claudeHome, '.claude.json');
  const kept = existsSync(claudeJson) ? readFileSync(claudeJson, 'utf8') : null;
  await call('POST', '/v1/subscriptions/pasted-claude/login');
  const asking = await until('pasted-claude', (s) => s.url);
  assert.equal(asking.url, 'https://claude.ai/oauth/authorize?code=true&state=xyz');
  assert.equal(asking.accepts_code, true);
  const bad = await call('POST', '/v1/subscriptions/pasted-claude/login/code', { code: '' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, 'code');
  await call('POST', '/v1/subscriptions/pasted-claude/login/code', { code: 'wrong' });
  const refused = await until('pasted-claude', (s) => s.state !== 'waiting');
  assert.equal(refused.state, 'failed');
  assert.match(refused.message, /without credentials\. OAuth error: invalid code/);
  await call('POST', '/v1/subscriptions/pasted-claude/login');
  await until('pasted-claude', (s) => s.url && s.state === 'waiting');
  const sent = await call('POST', '/v1/subscriptions/pasted-claude/login/code', { code: 'pasted-code-42' });
  assert.equal(sent.status, 200, JSON.stringify(sent.body));
  const done = await until('pasted-claude', (s) => s.state !== 'waiting');
  assert.equal(done.state, 'connected', JSON.stringify(done));
  assert.equal(done.message, 'grace@example.com');
  assert.ok(!existsSync(join(claudeHome, '.credentials.json')), 'sealed at rest once connected');
  rmSync(join(claudeHome, '.credentials.json.sealed'));
  if (kept === null) rmSync(claudeJson);
  else writeFileSync(claudeJson, kept);

  // Not a subscription provider, or no sign-in started: a 404 naming it.
  const notOne = await call('POST', '/v1/subscriptions/nope/login');
  assert.equal(notOne.status, 404);
  assert.match(notOne.body.error.message, /no provider "nope"/);
  const none = await call('DELETE', '/v1/subscriptions/codex/login');
  assert.equal(none.status, 404);
});

test('shutdown leaves no CLI process behind', async () => {
  const { onyx } = stack;
  const pending = stack.client.chat.completions
    .create({ model: 'claude-subscription/fake-slow', messages, stream: true })
    .then(async (stream) => {
      for await (const _ of stream);
    })
    .catch(() => {});
  const pid = await cliChild(onyx, 'claude');
  // The long-lived Copilot CLI, up since the Copilot tests.
  const copilot = await cliChild(onyx, 'copilot');
  const family = [pid, ...descendants(pid), copilot, ...descendants(copilot)];
  const exited = new Promise((resolve) => onyx.once('exit', resolve));
  onyx.kill('SIGTERM');
  await exited;
  await pending;
  // A process killed with SIGKILL takes a moment to be gone (and reaped by init).
  const running = () =>
    family.filter((p) => {
      if (!existsSync(`/proc/${p}/stat`)) return false;
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] !== 'Z';
    });
  let alive = running();
  for (let i = 0; i < 100 && alive.length; i++) {
    await new Promise((r) => setTimeout(r, 20));
    alive = running();
  }
  assert.deepEqual(alive, [], `still running after shutdown: ${alive.map((p) => readFileSync(`/proc/${p}/stat`, 'utf8'))}`);
});

/**
 * `onyx login` with a stand-in for the vendor CLI (the real sign-ins need the
 * vendors' servers): it records its arguments and config dir, prints a URL
 * and code as the real ones do, and writes the credential files `files` names.
 */
function login(cli, files) {
  const dir = mkdtempSync(join(tmpdir(), 'onyx-login-'));
  const standIn = join(dir, 'stand-in.mjs');
  writeFileSync(standIn, `#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
const home = process.env.CLAUDE_CONFIG_DIR ?? process.env.CODEX_HOME ?? process.env.COPILOT_HOME;
const keytar = process.env.COPILOT_DISABLE_KEYTAR;
writeFileSync(join('${dir}', 'called.json'), JSON.stringify({ args: process.argv.slice(2), home, keytar }));
console.log('Visit https://example.com/device and enter code ABCD-1234');
for (const [name, value] of Object.entries(${JSON.stringify(files)})) writeFileSync(join(home, name), JSON.stringify(value));
`);
  chmodSync(standIn, 0o755);
  writeFileSync(join(dir, 'onyx.json5'), '{}');
  const out = spawnSync(process.env.ONYX_BIN, ['login', cli, '--config', join(dir, 'onyx.json5'), '--command', standIn], {
    env: { PATH: process.env.PATH, HOME: dir, ONYX_DATA_DIR: join(dir, 'data') },
    encoding: 'utf8',
    timeout: 60_000,
  });
  const called = existsSync(join(dir, 'called.json')) ? JSON.parse(readFileSync(join(dir, 'called.json'), 'utf8')) : null;
  return { out, called, data: join(dir, 'data') };
}

test('onyx login claude runs the CLI\'s sign-in with its config dir in the data dir, then reports the account', () => {
  const { out, called, data } = login('claude', {
    '.credentials.json': { claudeAiOauth: { accessToken: 'a', refreshToken: 'r', expiresAt: Date.now() + 3600_000 } },
    '.claude.json': { oauthAccount: { emailAddress: 'ada@example.com' } },
  });
  assert.equal(out.status, 0, out.stderr);
  assert.deepEqual(called, { args: ['auth', 'login', '--claudeai'], home: join(data, 'subscriptions', 'claude') });
  assert.match(out.stdout, /Visit https:\/\/example\.com\/device and enter code ABCD-1234/);
  assert.match(out.stdout, /claude: Connected ✓ \(ada@example\.com\)/);
});

test('onyx login codex signs in by device code; a sign-in that leaves no credentials fails clearly', () => {
  const ok = login('codex', { 'auth.json': { tokens: { refresh_token: 'r', account_id: 'acct-1' } } });
  assert.equal(ok.out.status, 0, ok.out.stderr);
  assert.deepEqual(ok.called, { args: ['login', '--device-auth'], home: join(ok.data, 'subscriptions', 'codex') });
  assert.match(ok.out.stdout, /codex: Connected ✓ \(acct-1\)/);
  const failed = login('claude', {});
  assert.equal(failed.out.status, 1);
  assert.match(failed.out.stdout, /claude: not connected; sign in with `onyx login claude`/);
});

test('onyx login copilot signs in by device code and leaves only sealed credentials', () => {
  const token = 'gho_sealedlogin0123456789';
  const { out, called, data } = login('copilot', {
    'config.json': {
      last_logged_in_user: { host: 'https://github.com', login: 'octocat' },
      copilot_tokens: { 'https://github.com:octocat': token },
    },
  });
  assert.equal(out.status, 0, out.stderr);
  const home = join(data, 'subscriptions', 'copilot');
  // The token goes to the config dir (sealed there), not a desktop keychain.
  assert.deepEqual(called, { args: ['login', '--device-code'], home, keytar: '1' });
  assert.match(out.stdout, /copilot: Connected ✓ \(octocat\)/);
  assert.ok(!existsSync(join(home, 'config.json')), 'no plaintext credentials after the sign-in');
  const sealed = readFileSync(join(home, 'config.json.sealed'), 'utf8');
  assert.match(sealed, /^onyx-sealed:v1:/);
  assert.ok(!sealed.includes(token), 'the sealed file does not hold the token');
});
