// Every provider type added from the Config page, in Chromium against the real
// `onyx` binary and the fake upstreams (which check each wire protocol and its
// key): OpenAI-compatible, Anthropic, Ollama, Azure (with a deployment),
// Gemini, Vertex (a static access token), Bedrock (a region and a Bedrock API
// key) each answer a chat routed to them at once; a field the type refuses
// comes back named; a subscription added here (a stand-in for `codex login
// --device-auth`) is offered its sign-in straight away and connects. Needs
// ONYX_BIN, FAKE_UPSTREAM_BIN (set by tests/run) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { hashPassword, killAll, launchBrowser, newContext, signIn, startOnyx, startProcess, stopOnyx } from './harness.mjs';

const FAKES = process.env.FAKE_UPSTREAM_BIN;
const KEY = 'onyx_sk_providers_test_key_0123456789';
const PASSWORD = 'every provider from here';
const FAKE_KEY = 'sk-fake-upstream-key-0042';

let browser, home, fakes, onyx;
const violations = [];

const api = (path, init = {}) =>
	fetch(`${onyx.url}${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });

/** A stand-in for `codex login --device-auth`: prints a URL and a code, then signs in. */
function codexStandIn() {
	const file = join(home, 'codex.mjs');
	writeFileSync(
		file,
		`#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
if (process.argv.slice(2).join(' ') !== 'login --device-auth') process.exit(2);
console.log('1. Open https://auth.openai.com/codex/device\\n2. Enter this one-time code Q9ZX-4TRM');
setTimeout(() => {
  writeFileSync(join(process.env.CODEX_HOME, 'auth.json'), JSON.stringify({ tokens: { refresh_token: 'rt-p', account_id: 'acct-added' } }));
}, 1000);
`
	);
	chmodSync(file, 0o755);
	return file;
}

before(async () => {
	assert.ok(FAKES, 'FAKE_UPSTREAM_BIN must be set (tests/run does)');
	home = mkdtempSync(join(tmpdir(), 'onyx-providers-'));
	mkdirSync(join(home, 'data'));
	const started = await startProcess(FAKES, ['--key', FAKE_KEY], {}, /^(\{.*\})$/);
	fakes = JSON.parse(started.match[1]);
	onyx = await startOnyx(`{ gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hashPassword(PASSWORD)}" } } }`, home);
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	if (onyx) await stopOnyx(onyx);
	killAll();
	if (home) rmSync(home, { recursive: true, force: true });
});

test('every provider type is added from the Config page and routes at once', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	await page.goto(`${onyx.url}/config`);
	await signIn(page, PASSWORD);
	const form = page.getByTestId('provider-form');

	/** Fills the add form for `name` of `type` (`fields`: label text → value) and adds it. */
	async function add(name, type, fields) {
		await page.getByRole('button', { name: 'Add provider' }).click();
		await form.getByLabel('Name (the model prefix)').fill(name);
		await form.getByLabel('Type').selectOption(type);
		for (const [label, value] of Object.entries(fields)) await form.getByLabel(label).fill(value);
		await form.getByRole('button', { name: 'Add provider' }).click();
	}

	const kinds = [
		['plain', 'openai', { 'Base URL': fakes.openai, 'API key': FAKE_KEY }, 'plain/fake-echo'],
		['claude', 'anthropic', { 'Base URL': fakes.anthropic, 'API key': FAKE_KEY, 'API version': '2023-06-01' }, 'claude/fake-echo'],
		['local', 'ollama', { 'Base URL': fakes.ollama }, 'local/fake-echo'],
		['az', 'azure', { 'Base URL': fakes.azure, 'API key': FAKE_KEY, 'API version': '2024-10-21', Deployments: 'gpt-4o-mini = fake-echo' }, 'az/gpt-4o-mini'],
		['gem', 'gemini', { 'Base URL': fakes.gemini, 'API key': FAKE_KEY }, 'gem/fake-echo'],
		['vtx', 'vertex', { 'Base URL': fakes.gemini, Project: 'demo', Location: 'europe-west4', 'Access token': FAKE_KEY }, 'vtx/fake-echo'],
		['rock', 'bedrock', { 'Base URL': fakes.bedrock, Region: 'eu-west-1', 'Bedrock API key': FAKE_KEY }, 'rock/fake-echo']
	];
	for (const [name, type, fields, model] of kinds) {
		await add(name, type, fields);
		const card = page.getByTestId('provider').filter({ hasText: `${type} · added here` }).filter({ hasText: name });
		await card.waitFor();
		if (fields['API key']) await card.getByText('…0042').waitFor();
		const reply = await api('/v1/chat/completions', {
			method: 'POST',
			body: JSON.stringify({ model, messages: [{ role: 'user', content: `hi ${type}` }] })
		});
		const body = await reply.json();
		assert.equal(reply.status, 200, `${type} added in the UI routes at once: ${JSON.stringify(body)}`);
		assert.equal(body.choices[0].message.content, `echo: hi ${type}`, type);
	}
	const stored = (await (await api('/v1/providers')).json()).data;
	const byName = Object.fromEntries(stored.map((p) => [p.name, p]));
	assert.deepEqual(byName.az.deployments, { 'gpt-4o-mini': 'fake-echo' });
	assert.equal(byName.vtx.project, 'demo');
	assert.equal(byName.vtx.location, 'europe-west4');
	assert.equal(byName.rock.region, 'eu-west-1');
	assert.ok(!JSON.stringify(stored).includes(FAKE_KEY), 'no key comes back from the API');

	// A field the type refuses is named, and nothing is added.
	await add('badrock', 'bedrock', { Region: 'eu west 1' });
	await page.getByText(/region: "eu west 1" is not an AWS region/).waitFor();
	assert.equal((await api('/v1/providers/badrock')).status, 404);
	await form.getByRole('button', { name: 'Cancel' }).click();

	// An edit of the Bedrock provider moves its region; the key stays.
	const rock = page.getByTestId('provider').filter({ hasText: 'bedrock · added here' });
	await rock.getByRole('button', { name: 'Edit' }).click();
	await form.getByLabel('Region').fill('us-west-2');
	await form.getByRole('button', { name: 'Save changes' }).click();
	await rock.getByRole('button', { name: 'Edit' }).waitFor();
	const edited = await (await api('/v1/providers/rock')).json();
	assert.equal(edited.region, 'us-west-2');
	assert.equal(edited.apiKey, '…0042');

	// A subscription: no key asked for, and its sign-in offered as soon as it is added.
	await page.getByRole('button', { name: 'Add provider' }).click();
	await form.getByLabel('Type').selectOption('codex');
	assert.equal(await form.getByLabel('API key').count(), 0, 'a subscription asks for no key');
	await form.getByLabel('Name (the model prefix)').fill('chatgpt');
	await form.getByLabel('CLI command').fill(codexStandIn());
	await form.getByRole('button', { name: 'Add provider' }).click();
	const subscription = page.getByTestId('provider').filter({ hasText: 'codex · added here' });
	const offer = subscription.getByTestId('sign-in-offer');
	await offer.waitFor();
	await offer.getByRole('button', { name: 'Sign in now' }).click();
	await subscription.getByTestId('sign-in-code').getByText('Q9ZX-4TRM').waitFor();
	await subscription.getByTestId('sign-in-result').getByText('Connected ✓ (acct-added)').waitFor({ timeout: 20000 });
	await offer.waitFor({ state: 'detached' });
	const signIns = (await (await api('/v1/subscriptions')).json()).data;
	assert.equal(signIns.find((s) => s.provider === 'chatgpt')?.connected, true);

	assert.deepEqual(violations, [], 'no Content-Security-Policy violation');
	await context.close();
});
