// The control UI in a real browser (Debian's Chromium through playwright-core)
// against the real `onyx` binary and the fake upstream: login (wrong password,
// throttling, cookie surviving a restart, cross-site refusal), chat with
// streaming, tool cards, approvals, stop (cancelling the run) and re-attaching
// to a run after a reload, then every page doing its job (the Usage and MCP pages too),
// at desktop and phone widths, all under the strict Content-Security-Policy
// (no page may report a violation). Needs ONYX_BIN and FAKE_UPSTREAM_BIN (set by
// tests/run) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as harness from './harness.mjs';
import { hashPassword, killAll, launchBrowser, startProcess, stopOnyx } from './harness.mjs';

const ONYX = process.env.ONYX_BIN;
const FAKES = process.env.FAKE_UPSTREAM_BIN;
const KEY = 'onyx_sk_ui_test_key_0123456789';
const PASSWORD = 'correct horse battery';
const FAKE_KEY = 'sk-fake-upstream-key-0001';

// Screenshots of every page, kept as test artifacts.
const ARTIFACTS = fileURLToPath(new URL('../../tests/artifacts/ui/', import.meta.url));
mkdirSync(ARTIFACTS, { recursive: true });
const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

let fakes, browser, home, config, onyx;

const startOnyx = (configText, dir = home) => harness.startOnyx(configText, dir, { FAKE_KEY });

const api = (path, init = {}) =>
	fetch(`${onyx.url}${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });

/**
 * A stand-in for `codex login --device-auth` (the real sign-in needs OpenAI's
 * servers): prints a URL and a code as the CLI does, then signs in.
 */
function signInStandIn() {
	const file = join(mkdtempSync(join(tmpdir(), 'onyx-ui-sign-in-')), 'codex.mjs');
	writeFileSync(
		file,
		`#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
if (process.argv.slice(2).join(' ') !== 'login --device-auth') process.exit(2);
console.log('1. Open https://auth.openai.com/codex/device\\n2. Enter this one-time code K7QP-2XWB');
setTimeout(() => {
  writeFileSync(join(process.env.CODEX_HOME, 'auth.json'), JSON.stringify({ tokens: { refresh_token: 'rt-ui', account_id: 'acct-ui' } }));
}, 2000);
`
	);
	chmodSync(file, 0o755);
	return file;
}

before(async () => {
	assert.ok(ONYX && FAKES, 'ONYX_BIN and FAKE_UPSTREAM_BIN must be set (tests/run does)');
	assert.ok(process.env.MCP_TIME_BIN, 'MCP_TIME_BIN (a real MCP server) must be set (tests/run does)');
	const started = await startProcess(FAKES, ['--key', FAKE_KEY], {}, /^(\{.*\})$/);
	fakes = JSON.parse(started.match[1]);
	home = mkdtempSync(join(tmpdir(), 'onyx-ui-'));
	mkdirSync(join(home, 'data'), { recursive: true });
	const hash = hashPassword(PASSWORD);
	config = `{
		gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hash}" } },
		providers: {
			openai: { type: "openai", baseUrl: "${fakes.openai}", apiKey: "\${FAKE_KEY}" },
			chatgpt: { type: "codex", command: "${signInStandIn()}" },
		},
		usage: { prices: { "openai/fake-echo": { input: 1000, output: 2000 } } },
		agents: {
			defaults: { model: "openai/fake-echo", permissionMode: "allow-all" },
			list: [
				{ id: "main", default: true, name: "Onyx" },
				{ id: "scripter", model: "openai/fake-script" },
				{ id: "careful", model: "openai/fake-script", permissionMode: "ask" },
				{ id: "slow", model: "openai/fake-slow" },
				{ id: "operator", model: "openai/fake-script" },
			],
		},
		mcp: { servers: {
			time: { command: "${process.env.MCP_TIME_BIN}", args: ["--local-timezone=UTC"], trust: "read" },
			broken: { command: "/nonexistent/mcp-server" },
		} },
	}`;
	onyx = await startOnyx(config);
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	killAll();
});

/** Every Content-Security-Policy violation any page reported (none may happen). */
const cspViolations = [];

/** A browser context whose pages report CSP violations into `cspViolations`. */
const newContext = (options = {}) => harness.newContext(browser, cspViolations, options);

/** Polls `GET path` until `done(body)` holds (5 s at most); the last body. */
async function eventually(path, done) {
	let body;
	for (let i = 0; i < 50; i++) {
		body = await (await api(path)).json();
		if (done(body)) break;
		await new Promise((resolve) => setTimeout(resolve, 100));
	}
	return body;
}

async function signedInPage(viewport = { width: 1280, height: 900 }) {
	const context = await newContext({ viewport });
	const page = await context.newPage();
	await page.goto(onyx.url);
	await harness.signIn(page, PASSWORD);
	return { context, page };
}

test('login: a wrong password is refused in words, the right one opens the app', async () => {
	const context = await newContext();
	const page = await context.newPage();
	await page.goto(onyx.url);
	await page.getByLabel('Password').fill('not it');
	await page.getByRole('button', { name: 'Sign in' }).click();
	await page.getByRole('alert').filter({ hasText: 'wrong password' }).waitFor();
	await page.getByLabel('Password').fill(PASSWORD);
	await page.getByRole('button', { name: 'Sign in' }).click();
	await page.getByRole('link', { name: 'Sessions' }).waitFor();
	const cookies = await context.cookies();
	const session = cookies.find((c) => c.name === 'onyx_session');
	assert.ok(session, 'a session cookie');
	assert.equal(session.httpOnly, true);
	assert.equal(session.sameSite, 'Strict');

	// The cookie works on the API from the UI's origin, and is refused from another.
	const cookie = `onyx_session=${session.value}`;
	const same = await fetch(`${onyx.url}/v1/tasks`, {
		method: 'POST', headers: { cookie, origin: onyx.url, 'content-type': 'application/json' }, body: '{}'
	});
	assert.equal(same.status, 400, 'reached the handler (which wants a prompt)');
	const cross = await fetch(`${onyx.url}/v1/tasks`, {
		method: 'POST', headers: { cookie, origin: 'https://evil.example', 'content-type': 'application/json' }, body: '{}'
	});
	assert.equal(cross.status, 403);
	assert.match((await cross.json()).error.message, /cross-site/);
	await context.close();
});

test('chat streams answers, shows tool cards and approvals, and stops', async () => {
	const { context, page } = await signedInPage();

	await page.getByLabel('Agent or model').selectOption('onyx:main');
	await page.getByLabel('Message').fill('hello browser');
	await page.getByLabel('Message').press('Enter');
	await page.locator('[data-role=assistant]').filter({ hasText: 'echo: hello browser' }).waitFor();
	await page.getByRole('link', { name: /^session / }).waitFor();
	assert.match(page.url(), /\?session=/);
	await shot(page, 'chat');

	await page.getByRole('button', { name: 'New conversation' }).click();
	await page.getByLabel('Agent or model').selectOption('onyx:scripter');
	await page.getByLabel('Message').fill('script: memory_search {"query": "dog"} ; answer');
	await page.getByRole('button', { name: 'Send' }).click();
	const card = page.getByTestId('tool-card').filter({ hasText: 'memory_search' });
	await card.waitFor();
	await page.locator('[data-role=assistant]').filter({ hasText: 'script done' }).waitFor();
	await card.getByRole('button').click();
	await card.getByText('"query": "dog"').waitFor();
	await shot(page, 'chat-tool-card');

	await page.getByRole('button', { name: 'New conversation' }).click();
	await page.getByLabel('Agent or model').selectOption('onyx:careful');
	await page.getByLabel('Message').fill('script: fs_write {"path": "note.txt", "content": "hi"} ; answer');
	await page.getByRole('button', { name: 'Send' }).click();
	await page.getByRole('button', { name: 'Approve' }).click();
	await page.getByText('approved').waitFor();
	await page.locator('[data-role=assistant]').filter({ hasText: 'script done' }).waitFor();

	await page.getByRole('button', { name: 'New conversation' }).click();
	await page.getByLabel('Agent or model').selectOption('onyx:slow');
	await page.getByLabel('Message').fill('take your time');
	await page.getByRole('button', { name: 'Send' }).click();
	await page.locator('[data-role=assistant]').filter({ hasText: 'w3' }).waitFor();
	await page.getByRole('button', { name: 'Stop' }).click();
	await page.getByText('Stopped.').waitFor();
	const text = await page.locator('[data-role=assistant]').last().innerText();
	assert.ok(!text.includes('w99'), 'the stream was cut off');
	// Stop cancelled the run on the server, not just this tab's stream.
	const cancelled = await eventually('/v1/runs?agent=slow&status=cancelled', (b) => b.data.length > 0);
	assert.equal(cancelled.data.length, 1, JSON.stringify(cancelled));

	// A reload mid-answer re-attaches to the run and shows the rest of it.
	await page.getByRole('button', { name: 'New conversation' }).click();
	await page.getByLabel('Message').fill('and once more');
	await page.getByRole('button', { name: 'Send' }).click();
	await page.locator('[data-role=assistant]').filter({ hasText: 'w3' }).waitFor();
	await page.waitForURL(/\?session=/);
	await page.reload();
	await page.locator('[data-role=assistant]').filter({ hasText: 'w99' }).waitFor();
	// The last words show before the run has recorded its end.
	const succeeded = await eventually('/v1/runs?agent=slow&status=succeeded', (b) => b.data.length > 0);
	assert.equal(succeeded.data.length, 1, JSON.stringify(succeeded));
	await context.close();
});

test('the Approvals page decides a call raised outside the chat page', async () => {
	const { context, page } = await signedInPage();
	await page.getByRole('link', { name: 'Approvals' }).click();
	await page.getByText('Nothing waits for a decision').waitFor();
	// A run started through the API (a script, a scheduled task, a chat bot) asks.
	const run = api('/v1/chat/completions', {
		method: 'POST',
		body: JSON.stringify({
			model: 'onyx:careful',
			messages: [{ role: 'user', content: 'script: fs_write {"path": "from-api.txt", "content": "hi"} ; answer' }]
		})
	});
	// Wherever the user is, the menu says a decision waits.
	await page.getByRole('link', { name: 'Memory' }).click();
	await page.getByTestId('approvals-waiting').getByText('1', { exact: true }).waitFor();
	await page.getByRole('link', { name: /^Approvals/ }).click();
	const row = page.getByTestId('approval-row').filter({ hasText: 'fs_write' });
	await row.getByText('"path": "from-api.txt"').waitFor();
	await row.getByText('by careful').waitFor();
	await shot(page, 'approvals');
	await row.getByRole('button', { name: 'Approve' }).click();
	const response = await run;
	assert.equal(response.status, 200);
	const answer = (await response.json()).choices[0].message.content;
	assert.match(answer, /wrote 2 bytes to from-api\.txt/);
	await page.getByTestId('decided').getByText('fs_write approved').waitFor();
	await page.getByText('Nothing waits for a decision').waitFor();
	await page.getByTestId('approvals-waiting').waitFor({ state: 'detached' });
	await context.close();
});

test('sessions, memory, agents, tasks, config, logs and status pages work', async () => {
	await api('/v1/memory', { method: 'POST', body: JSON.stringify({ content: 'My dog Rex needs his vaccination in spring.', target: 'memory' }) });
	const { context, page } = await signedInPage();

	// Sessions: the chat from before, its transcript, rename, archive.
	await page.getByRole('link', { name: 'Sessions' }).click();
	const row = page.getByTestId('session-row').filter({ hasText: 'hello browser' }).first();
	await row.click();
	await page.getByTestId('transcript').getByText('echo: hello browser').waitFor();
	await shot(page, 'sessions');
	await page.getByLabel('Title').fill('Browser greeting');
	await page.getByRole('button', { name: 'Rename' }).click();
	await page.getByTestId('session-row').filter({ hasText: 'Browser greeting' }).waitFor();
	await page.getByRole('button', { name: 'Archive' }).click();
	await page.getByTestId('session-row').filter({ hasText: 'Browser greeting' }).waitFor({ state: 'detached' });

	// Memory: hybrid search with scores, legs and highlights; the index status.
	await page.getByRole('link', { name: 'Memory' }).click();
	await page.getByTestId('memory-status').getByText('Chunks').waitFor();
	await page.getByTestId('memory-status').getByText('in memory').waitFor();
	await page.getByLabel('Search memory').fill('Rex vaccination');
	await page.getByRole('button', { name: 'Search' }).click();
	const results = page.getByTestId('memory-results');
	await results.getByText(/score \d/).first().waitFor();
	await results.locator('strong').first().waitFor();
	await results.getByText('text', { exact: true }).first().waitFor();
	// Edit a memory file: the change is saved and indexed.
	await page.getByRole('button', { name: 'MEMORY.md' }).click();
	await page.getByLabel('Content').fill('# Memory\n\nThe spare key is under the blue flowerpot.');
	await page.getByRole('button', { name: 'Save' }).click();
	await page.getByText('Saved and indexed.').waitFor();
	await page.getByLabel('Search memory').fill('flowerpot');
	await page.getByLabel('Mode').selectOption('text');
	await page.getByRole('button', { name: 'Search' }).click();
	await results.getByText('blue', { exact: false }).first().waitFor();
	await shot(page, 'memory');

	// Agents: create one from the templates and read its identity file.
	await page.getByRole('link', { name: 'Agents' }).click();
	await page.getByRole('button', { name: 'New agent' }).click();
	await page.getByLabel('Id').fill('research');
	await page.getByLabel('Name').fill('Researcher');
	await page.getByRole('button', { name: 'Create' }).click();
	await page.getByTestId('agent-row').filter({ hasText: 'Researcher' }).waitFor();
	await page.waitForFunction(() => document.querySelector('#file')?.value.includes('IDENTITY'));
	await shot(page, 'agents');

	// Tasks: a human reading of the cron expression, create, run now, history.
	await page.getByRole('link', { name: 'Tasks' }).click();
	await page.getByText('No scheduled tasks').waitFor();
	await page.getByRole('button', { name: 'New task' }).click();
	await page.getByLabel('Prompt').fill('morning digest');
	await page.getByLabel('When').fill('30 9 * * 1-5');
	await page.getByTestId('schedule-reading').getByText('at 09:30 on Monday to Friday').waitFor();
	await page.getByRole('button', { name: 'Create task' }).click();
	await page.getByTestId('task-row').filter({ hasText: 'morning digest' }).waitFor();
	await page.getByRole('button', { name: 'Run now' }).click();
	await page.getByTestId('runs').getByText('echo: morning digest').waitFor({ timeout: 15000 });
	await page.getByRole('button', { name: 'Pause' }).click();
	await page.getByTestId('task-row').getByText('paused').waitFor();
	await shot(page, 'tasks');

	// Config: providers with a live test; a key shown once, listed, revoked.
	await page.getByRole('link', { name: 'Config' }).click();
	const provider = page.getByTestId('provider').filter({ hasText: 'openai · config file' });
	await provider.getByRole('button', { name: 'Test connection' }).click();
	await provider.getByText(/models · \d+ ms/).waitFor();
	await page.getByLabel('Name').fill('laptop');
	await page.getByRole('button', { name: 'Create key' }).click();
	const key = await page.getByTestId('new-key').innerText();
	assert.match(key, /^onyx_sk_/);
	const listed = await api('/v1/models', { headers: { authorization: `Bearer ${key}` } });
	assert.equal(listed.status, 200, 'the new key works');
	page.once('dialog', (dialog) => dialog.accept());
	await page.getByTestId('key-row').filter({ hasText: 'laptop' }).getByRole('button', { name: 'Revoke' }).click();
	await page.getByTestId('key-row').filter({ hasText: 'laptop' }).waitFor({ state: 'detached' });

	// A provider added here routes at once; its key is shown only as a hint, and
	// never kept in the page's storage.
	await page.getByRole('button', { name: 'Add provider' }).click();
	const form = page.getByTestId('provider-form');
	await form.getByLabel('Name (the model prefix)').fill('house');
	await form.getByLabel('Base URL').fill(fakes.openai);
	await form.getByLabel('API key').fill(FAKE_KEY);
	await form.getByRole('button', { name: 'Add provider' }).click();
	const added = page.getByTestId('provider').filter({ hasText: 'house' });
	await added.getByText('added here').waitFor();
	await added.getByText('…0001').waitFor();
	const routed = await api('/v1/chat/completions', {
		method: 'POST',
		body: JSON.stringify({ model: 'house/fake-echo', messages: [{ role: 'user', content: 'hi' }] })
	});
	assert.equal(routed.status, 200, 'the provider added in the UI routes at once');
	await added.getByRole('button', { name: 'Refresh models' }).click();
	await added.getByTestId('provider-models').getByText(/^\d+ models/).waitFor();
	await added.getByRole('button', { name: 'Edit' }).click();
	await form.getByLabel('Retries').fill('0');
	await form.getByRole('button', { name: 'Save changes' }).click();
	await added.getByText('0 retries').waitFor();
	const storage = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
	assert.ok(!storage.includes(FAKE_KEY), 'no provider key in the browser storage');
	await page.getByLabel('Alias').fill('cheap');
	await page.getByLabel('Targets').fill('house/fake-echo, openai/fake-echo');
	await page.getByRole('button', { name: 'Save alias' }).click();
	const alias = page.getByTestId('alias-row').filter({ hasText: 'cheap' });
	await alias.getByText('house/fake-echo → openai/fake-echo').waitFor();
	await shot(page, 'config');
	await alias.getByRole('button', { name: 'Remove' }).click();
	await alias.waitFor({ state: 'detached' });

	// A subscription provider signs in from here: the CLI's own device sign-in
	// (a stand-in, since the real one needs OpenAI's servers) shows its URL and
	// code, and the page follows it until connected.
	const subscription = page.getByTestId('provider').filter({ hasText: 'chatgpt' });
	await subscription.getByText('Not signed in').waitFor();
	await subscription.getByRole('button', { name: 'Sign in' }).click();
	await subscription.getByTestId('sign-in-code').getByText('K7QP-2XWB').waitFor();
	assert.equal(await subscription.getByTestId('sign-in-url').getAttribute('href'), 'https://auth.openai.com/codex/device');
	await subscription.getByTestId('sign-in-result').getByText('Connected ✓ (acct-ui)').waitFor({ timeout: 20000 });
	await subscription.getByRole('button', { name: 'Sign in again' }).waitFor();
	page.once('dialog', (dialog) => dialog.accept());
	await added.getByRole('button', { name: 'Remove' }).click();
	await added.waitFor({ state: 'detached' });

	// Skills: one made from the template, edited, listed, deleted.
	await page.getByRole('link', { name: 'Skills' }).click();
	await page.getByLabel('New skill name').fill('pdf-forms');
	await page.getByRole('button', { name: 'New skill' }).click();
	const editor = page.getByTestId('skill-editor');
	await editor.getByLabel('SKILL.md').fill('---\nname: pdf-forms\ndescription: Fill in PDF forms\n---\nUse qpdf.\n');
	await editor.getByRole('button', { name: 'Save skill' }).click();
	const skillRow = page.getByTestId('skill-row').filter({ hasText: 'pdf-forms' });
	await skillRow.getByText('Fill in PDF forms').waitFor();
	await skillRow.getByRole('button', { name: 'Edit' }).click();
	await editor.getByLabel('SKILL.md').fill('---\nname: pdf-forms\ndescription: Fill and merge PDF forms\n---\nUse qpdf.\n');
	await editor.getByRole('button', { name: 'Save skill' }).click();
	await skillRow.getByText('Fill and merge PDF forms').waitFor();
	const stored = await (await api('/v1/skills/_shared/pdf-forms')).json();
	assert.match(stored.content, /Use qpdf\./);
	await shot(page, 'skills');
	page.once('dialog', (dialog) => dialog.accept());
	await skillRow.getByRole('button', { name: 'Delete' }).click();
	await skillRow.waitFor({ state: 'detached' });

	// MCP: the real time server is up with its tools; the broken one says why not.
	await page.getByRole('link', { name: 'MCP' }).click();
	const timeRow = page.getByTestId('mcp-server-time');
	await timeRow.getByTestId('mcp-state').getByText('ready').waitFor();
	await timeRow.getByRole('button', { name: /tools/ }).click();
	await page.getByTestId('mcp-tools-time').getByText('mcp__time__get_current_time').waitFor();
	const brokenRow = page.getByTestId('mcp-server-broken');
	await brokenRow.getByTestId('mcp-state').getByText('failed').waitFor();
	await brokenRow.getByTestId('mcp-error').getByText(/cannot start/).waitFor();
	await shot(page, 'mcp');

	// Logs: live lines, filtered by level.
	await page.getByRole('link', { name: 'Logs' }).click();
	await page.getByText('live', { exact: true }).waitFor();
	await page.getByTestId('log-lines').getByText('UI login').first().waitFor();
	await page.getByLabel('Level').selectOption('warn');
	await fetch(`${onyx.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"password": "oops"}' });
	await page.getByTestId('log-lines').getByText('failed UI login').first().waitFor();
	const levels = await page.getByTestId('log-lines').locator('div > span:nth-child(2)').allInnerTexts();
	assert.ok(levels.length > 0 && levels.every((l) => /WARN|ERROR/.test(l)), `levels: ${levels}`);
	await shot(page, 'logs');

	// Status: dependencies, version, counters.
	await page.getByRole('link', { name: 'Status' }).click();
	await page.getByTestId('dependencies').getByText('openai', { exact: true }).waitFor();
	await page.getByTestId('counters').getByText('Requests').waitFor();
	await shot(page, 'status');

	// Sign out: back to the login form, and the old cookie no longer opens the API.
	const cookie = (await context.cookies()).find((c) => c.name === 'onyx_session');
	const before = await fetch(`${onyx.url}/v1/models`, { headers: { cookie: `onyx_session=${cookie.value}` } });
	assert.equal(before.status, 200);
	await page.getByRole('button', { name: 'Sign out' }).click();
	await page.getByLabel('Password').waitFor();
	await shot(page, 'login');
	const after = await fetch(`${onyx.url}/v1/models`, { headers: { cookie: `onyx_session=${cookie.value}` } });
	assert.equal(after.status, 401);
	await context.close();
});

test('the Operations page approves a proposal, follows its mission live, edits a policy and reviews an agent', async () => {
	const { context, page } = await signedInPage();
	await page.getByRole('link', { name: 'Operations' }).click();
	await page.getByTestId('event-feed').getByText('live').waitFor();
	const proposed = await (
		await api('/v1/proposals', {
			method: 'POST',
			body: JSON.stringify({ agent: 'operator', title: 'UI mission', steps: [{ kind: 'write', input: 'script: say written from the UI' }] })
		})
	).json();
	assert.equal(proposed.status, 'pending', JSON.stringify(proposed));
	const pending = page.getByTestId('pending-proposal').filter({ hasText: 'UI mission' });
	await pending.getByRole('button', { name: 'Approve' }).click();
	const mission = page.getByTestId('mission').filter({ hasText: 'UI mission' });
	await mission.getByTestId('mission-status').getByText('succeeded').waitFor({ timeout: 30000 });
	await mission.getByRole('button').first().click();
	await mission.getByTestId('mission-steps').getByText('written from the UI').waitFor();
	await page.getByTestId('event-feed').getByText('mission.succeeded').first().waitFor();

	await page.getByRole('textbox', { name: 'auto_approve', exact: true }).fill('{"enabled": true, "allowed_step_kinds": ["write"]}');
	await page.getByRole('button', { name: 'Save auto_approve' }).click();
	await page.getByTestId('policies').getByText('saved').waitFor();
	const policy = await (await api('/v1/policy/auto_approve')).json();
	assert.deepEqual(policy.value.allowed_step_kinds, ['write']);
	await page.getByRole('textbox', { name: 'auto_approve', exact: true }).fill('{"enabled": "yes"}');
	await page.getByRole('button', { name: 'Save auto_approve' }).click();
	await page.getByTestId('policies').getByText(/enabled must be true or false/).waitFor();

	const row = page.getByTestId('trust-operator');
	await row.getByLabel('Trust level of operator').selectOption('3');
	await row.getByRole('button', { name: 'Reviews' }).click();
	await page.getByLabel('Review summary').fill('Shipped the UI mission');
	await page.getByLabel('Decision').selectOption('down');
	await page.getByRole('button', { name: 'Record review' }).click();
	await page.getByTestId('reviews').getByText(/L3 → L2/).waitFor();
	const standing = await (await api('/v1/agents/standing')).json();
	assert.equal(standing.agents.find((a) => a.id === 'operator').trust.level, 2);
	await shot(page, 'operations');
	await context.close();
});

test('the Usage page shows spend, unknown prices and what is left of a budget', async () => {
	const created = await (await api('/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'budgeted', scope: 'chat', limits: { dailyUsd: 5, rpm: 100 } }) })).json();
	for (const model of ['openai/fake-echo', 'openai/fake-script']) {
		const answer = await fetch(`${onyx.url}/v1/chat/completions`, {
			method: 'POST',
			headers: { authorization: `Bearer ${created.key}`, 'content-type': 'application/json' },
			body: JSON.stringify({ model, max_tokens: 20, messages: [{ role: 'user', content: 'script: say spent a little' }] })
		});
		assert.equal(answer.status, 200, await answer.text());
	}
	await eventually('/v1/usage?group_by=key', (r) => r.data.some((row) => row.group === created.id && row.requests === 2));
	const { context, page } = await signedInPage();
	await page.getByRole('link', { name: 'Usage' }).click();
	await page.getByTestId('total-cost').waitFor();
	assert.match(await page.getByTestId('total-cost').innerText(), /^\$\d/);
	assert.equal(await page.getByTestId('chart').count(), 4);
	await page.getByText('Spend per model').waitFor();
	// fake-script has no price: shown as unknown, not as $0.
	await page.getByTestId('chart').filter({ hasText: 'openai/fake-script' }).getByText('unknown').first().waitFor();
	const budget = page.getByTestId('budget-row').filter({ hasText: 'budgeted' });
	await budget.waitFor();
	assert.match(await budget.innerText(), /of \$5\.00 \(\$4\.\d\d left\)/);
	assert.match(await budget.innerText(), /\/100 requests/);
	await shot(page, 'usage');
	await context.close();
});

test('two people editing one memory file: the second save gets a conflict, not an overwrite', async () => {
	const put = await api('/v1/memory/files/main/MEMORY.md', { method: 'PUT', body: JSON.stringify({ content: '# Memory\n\nShared notes.' }) });
	assert.equal(put.status, 200);
	const first = await signedInPage();
	const second = await signedInPage();
	for (const { page } of [first, second]) {
		await page.getByRole('link', { name: 'Memory' }).click();
		await page.getByRole('button', { name: 'MEMORY.md' }).click();
		await page.waitForFunction(() => document.querySelector('#content')?.value.includes('Shared notes.'));
	}
	await first.page.getByLabel('Content').fill('# Memory\n\nThe first editor wrote this.');
	await first.page.getByRole('button', { name: 'Save' }).click();
	await first.page.getByText('Saved and indexed.').waitFor();
	// The first editor saves again: its own earlier save is no conflict.
	await first.page.getByLabel('Content').fill('# Memory\n\nThe first editor wrote this, twice.');
	await first.page.getByRole('button', { name: 'Save' }).click();
	await first.page.getByText('Saved and indexed.').waitFor();

	await second.page.getByLabel('Content').fill('# Memory\n\nThe second editor would overwrite.');
	await second.page.getByRole('button', { name: 'Save' }).click();
	const conflict = second.page.getByTestId('memory-conflict');
	await conflict.getByText('Someone else changed this file').waitFor();
	await shot(second.page, 'memory-conflict');
	const stored = await (await api('/v1/memory/files/main/MEMORY.md')).json();
	assert.match(stored.content, /first editor wrote this, twice/, 'nothing was overwritten');
	await conflict.getByRole('button', { name: 'Reload' }).click();
	await second.page.waitForFunction(() => document.querySelector('#content')?.value.includes('first editor wrote this, twice'));
	await conflict.waitFor({ state: 'detached' });
	await first.context.close();
	await second.context.close();
});

test('phone width: the menu folds away and opens', async () => {
	const { context, page } = await signedInPage({ width: 390, height: 800 });
	const nav = page.locator('nav[aria-label=Main]');
	assert.equal(await nav.isVisible(), false);
	await page.getByRole('button', { name: 'Menu' }).click();
	await nav.getByRole('link', { name: 'Tasks' }).click();
	await page.getByRole('heading', { name: 'Tasks' }).waitFor();
	await shot(page, 'phone-tasks');
	await context.close();
});

test('the login survives a restart, and without a password the UI says how to set one', async () => {
	const { context, page } = await signedInPage();
	await stopOnyx(onyx);
	onyx = await startOnyx(config);
	// Same cookie (cookies ignore the port), new process: still signed in.
	await page.goto(onyx.url);
	await page.getByRole('navigation', { name: 'Main' }).waitFor();
	await context.close();

	const bare = mkdtempSync(join(tmpdir(), 'onyx-ui-bare-'));
	const withoutPassword = await startOnyx(`{ gateway: { auth: { apiKeys: ["${KEY}"] } } }`, bare);
	const fresh = await newContext();
	const view = await fresh.newPage();
	await view.goto(withoutPassword.url);
	await view.getByTestId('no-password').getByText('onyx hash-password').waitFor();
	await fresh.close();
});

test('the UI is served with a strict CSP and security headers, and no page broke it', async () => {
	const response = await fetch(`${onyx.url}/sessions`);
	const csp = response.headers.get('content-security-policy');
	assert.ok(csp, 'a Content-Security-Policy header');
	assert.match(csp, /script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
	assert.match(csp, /frame-ancestors 'none'/);
	assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
	assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
	assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
	assert.equal(response.headers.get('x-frame-options'), 'DENY');
	// Every page the tests above opened ran under that policy without a violation.
	assert.deepEqual(cspViolations, []);
});

test('five failed logins a minute from one address get 429', async () => {
	const statuses = [];
	for (let i = 0; i < 6; i++) {
		const r = await fetch(`${onyx.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ password: `guess ${i}` }) });
		statuses.push(r.status);
	}
	assert.ok(statuses.includes(429), `got ${statuses}`);
	assert.equal(statuses.at(-1), 429);
	assert.ok(statuses.slice(0, 3).every((s) => s === 401), `got ${statuses}`);
});
