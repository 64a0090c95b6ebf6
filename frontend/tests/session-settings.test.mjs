// The Chat page's per-session settings in Chromium against the real `onyx`
// binary and the fake upstream: waiting for the session to exist, offering
// only permission modes at or below the agent's own, saving model, reasoning
// effort and mode with PATCH (read back through the API), the next turn
// reaching the upstream with the chosen model and effort and without the
// tools the stricter mode takes away, the header badge and the settings kept
// across a reload, and the server's refusal shown in words when the agent's
// mode was lowered behind the page's back (nothing stored changes). Needs
// ONYX_BIN and FAKE_UPSTREAM_BIN (set by tests/run) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { ONYX, finish, hashPassword, launchBrowser, newContext, scratchHome, signIn, startFakes, startOnyx } from './harness.mjs';

const KEY = 'onyx_sk_session_settings_test_key_01';
const FAKE_KEY = 'sk-fake-upstream-key-0001';
const PASSWORD = 'one conversation, its own model';

// Screenshots, kept as test artifacts beside the other UI suites'.
const ARTIFACTS = fileURLToPath(new URL('../../tests/artifacts/ui/', import.meta.url));
mkdirSync(ARTIFACTS, { recursive: true });
const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

let browser, home, onyx, fakes;
const violations = [];

before(async () => {
	assert.ok(ONYX, 'ONYX_BIN must be set (tests/run does)');
	fakes = await startFakes(FAKE_KEY);
	home = scratchHome('onyx-session-settings-');
	onyx = await startOnyx(
		`{
		gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hashPassword(PASSWORD)}" } },
		providers: { openai: { type: "openai", baseUrl: "${fakes.openai}", apiKey: "${FAKE_KEY}" } },
		agents: { list: [{ id: "careful", default: true, model: "openai/fake-script", permissionMode: "ask" }] },
	}`,
		home
	);
	browser = await launchBrowser();
});

after(async () => {
	await finish({ browser, onyx, home });
	assert.deepEqual(violations, [], 'no page may break the Content-Security-Policy');
});

/** `method path` on Onyx with the test key; the parsed body, asserting `status`. */
async function api(method, path, body, status = 200) {
	const response = await fetch(`${onyx.url}${path}`, {
		method,
		headers: { authorization: `Bearer ${KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
		body: body ? JSON.stringify(body) : undefined
	});
	const text = await response.text();
	assert.equal(response.status, status, `${method} ${path}: ${text}`);
	return JSON.parse(text);
}

/** The chat requests the fake OpenAI upstream received, oldest first. */
async function upstreamChats() {
	const sent = await (await fetch(new URL('/_fake/requests', fakes.openai))).json();
	return sent.filter((r) => Array.isArray(r.messages));
}

const toolNames = (request) => (request.tools ?? []).map((t) => t.function?.name);

async function chatPage() {
	const context = await newContext(browser, violations, { viewport: { width: 1280, height: 900 } });
	const page = await context.newPage();
	await page.goto(onyx.url);
	await signIn(page, PASSWORD);
	return { context, page };
}

/** Sends `text` and waits for the echoed answer. */
async function say(page, text) {
	await page.getByLabel('Message').fill(text);
	await page.getByRole('button', { name: 'Send' }).click();
	await page.locator('[data-role=assistant]').filter({ hasText: `echo: ${text}` }).waitFor();
}

/** The values a select offers. */
const optionValues = (select) => select.locator('option').evaluateAll((options) => options.map((o) => o.value));

test('a conversation gets its own model, effort and a stricter mode, which its next turn uses and a reload keeps', async () => {
	const { context, page } = await chatPage();
	await page.getByLabel('Agent or model').selectOption('onyx:careful');
	const toggle = page.getByRole('button', { name: 'Session settings' });
	// No session yet: nothing to attach settings to.
	assert.equal(await toggle.isDisabled(), true, 'disabled before the first message');

	await say(page, 'first turn');
	await page.waitForURL(/\?session=/);
	const session = new URL(page.url()).searchParams.get('session');
	const first = (await upstreamChats()).at(-1);
	assert.equal(first.model, 'fake-script');
	assert.ok(toolNames(first).includes('fs_write'), `an ask agent is offered fs_write: ${toolNames(first)}`);
	assert.equal(first.reasoning_effort, undefined);

	await toggle.click();
	const model = page.getByLabel('Session model');
	const effort = page.getByLabel('Reasoning effort');
	const mode = page.getByLabel('Permission mode');
	// The agent's own mode is the default; only stricter ones are offered besides.
	await mode.locator('option', { hasText: 'agent default (ask)' }).waitFor({ state: 'attached' });
	assert.deepEqual(await optionValues(mode), ['', 'safe']);
	await model.locator('option[value="openai/fake-echo"]').waitFor({ state: 'attached' });
	assert.ok((await optionValues(model)).every((m) => !m.startsWith('onyx:')), 'agents are not models of a session');
	assert.deepEqual(await optionValues(effort), ['', 'minimal', 'low', 'medium', 'high']);
	assert.equal(await page.getByTestId('session-overrides').count(), 0, 'no badge while the session is the agent’s');

	await model.selectOption('openai/fake-echo');
	await effort.selectOption('high');
	await mode.selectOption('safe');
	await page.getByRole('button', { name: 'Save' }).click();
	await page.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
	const badge = page.getByTestId('session-overrides');
	for (const label of ['model openai/fake-echo', 'effort high', 'mode safe']) await badge.getByText(label).waitFor();
	await shot(page, 'chat-session-settings');

	// The PATCH landed: the API reads the same settings back.
	const stored = await api('GET', `/v1/sessions/${session}?limit=1`);
	assert.deepEqual(stored.settings, { model: 'openai/fake-echo', reasoning_effort: 'high', permission_mode: 'safe' });

	// The next turn runs on the chosen model and effort, without the tools `safe` takes away.
	await say(page, 'second turn');
	const second = (await upstreamChats()).at(-1);
	assert.equal(second.model, 'fake-echo');
	assert.equal(second.reasoning_effort, 'high');
	assert.ok(toolNames(second).includes('fs_read'), `safe keeps reading: ${toolNames(second)}`);
	assert.ok(!toolNames(second).includes('fs_write'), `safe takes fs_write away: ${toolNames(second)}`);

	// A reload shows the same conversation with its settings.
	await page.reload();
	await page.locator('[data-role=assistant]').filter({ hasText: 'echo: second turn' }).waitFor();
	for (const label of ['model openai/fake-echo', 'effort high', 'mode safe']) await badge.getByText(label).waitFor();
	await page.getByRole('button', { name: 'Session settings' }).click();
	await page.getByLabel('Permission mode').locator('option', { hasText: 'agent default (ask)' }).waitFor({ state: 'attached' });
	assert.equal(await page.getByLabel('Session model').inputValue(), 'openai/fake-echo');
	assert.equal(await page.getByLabel('Reasoning effort').inputValue(), 'high');
	assert.equal(await page.getByLabel('Permission mode').inputValue(), 'safe');

	// Back to the agent's own: the PATCH clears them and the badge goes.
	await page.getByLabel('Session model').selectOption('');
	await page.getByLabel('Reasoning effort').selectOption('');
	await page.getByLabel('Permission mode').selectOption('');
	await page.getByRole('button', { name: 'Save' }).click();
	await page.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
	await badge.waitFor({ state: 'detached' });
	assert.deepEqual((await api('GET', `/v1/sessions/${session}?limit=1`)).settings, {});
	await context.close();
});

test('a mode the agent no longer allows is refused in the server’s words, and nothing stored changes', async () => {
	await api('POST', '/v1/agents', { id: 'lowered', model: 'openai/fake-script', permission_mode: 'allow-all' });
	const { context, page } = await chatPage();
	await page.getByLabel('Agent or model').selectOption('onyx:lowered');
	await say(page, 'before the change');
	await page.waitForURL(/\?session=/);
	const session = new URL(page.url()).searchParams.get('session');
	await api('PATCH', `/v1/sessions/${session}`, { settings: { reasoning_effort: 'low' } });

	await page.getByRole('button', { name: 'Session settings' }).click();
	const mode = page.getByLabel('Permission mode');
	await mode.locator('option', { hasText: 'agent default (allow-all)' }).waitFor({ state: 'attached' });
	assert.deepEqual(await optionValues(mode), ['', 'safe', 'ask']);

	// The owner lowers the agent elsewhere while this page still offers `ask`.
	await api('PATCH', '/v1/agents/lowered', { permission_mode: 'safe' });
	await mode.selectOption('ask');
	await page.getByRole('button', { name: 'Save' }).click();
	await page.getByRole('alert').filter({ hasText: /settings\.permission_mode: "ask" is above the agent's own "safe"/ }).waitFor();
	assert.equal(await page.getByRole('status').filter({ hasText: 'Saved' }).count(), 0);
	assert.deepEqual((await api('GET', `/v1/sessions/${session}?limit=1`)).settings, { reasoning_effort: 'low' });
	await context.close();
});
