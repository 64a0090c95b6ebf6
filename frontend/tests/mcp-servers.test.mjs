// MCP servers added, edited, restarted and removed from the MCP page, in
// Chromium against the real `onyx` binary and the real PyPI `mcp-server-time`
// (stdio): the server comes up with its tools without restarting Onyx, its
// environment is shown only as names that are set (the value never reaches the
// page or the API's answers), an edit and a restart give it a new process, a
// config-file server offers no edit, and a removed one stops. A remote server
// behind OAuth 2.1 (the fake authorization server of `onyx-fake-upstream`)
// waits for a sign-in, and the page's Sign in button takes the owner through
// it in a new tab. Needs ONYX_BIN, MCP_TIME_BIN, FAKE_UPSTREAM_BIN (set by
// tests/run) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { hashPassword, killAll, launchBrowser, newContext, signIn, startFakes, startOnyx, stopOnyx } from './harness.mjs';

const TIME = process.env.MCP_TIME_BIN;
const KEY = 'onyx_sk_mcp_page_test_key_0123456789';
const PASSWORD = 'servers from the page';
const SECRET = 'tz-token-never-shown-71c4e09d';

let browser, home, onyx, fakes;
const violations = [];

const api = (path) => fetch(`${onyx.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });

/** The server `name` as the API shows it once `done(server)` holds (15 s at most). */
async function serverWhen(name, done) {
	for (let i = 0; i < 150; i++) {
		const server = (await (await api('/v1/mcp/servers')).json()).data.find((s) => s.name === name);
		if (done(server)) return server;
		await new Promise((resolve) => setTimeout(resolve, 100));
	}
	assert.fail(`MCP server ${name} never reached the expected state`);
}

before(async () => {
	assert.ok(TIME, 'MCP_TIME_BIN (a real MCP server) must be set (tests/run does)');
	fakes = await startFakes('fake-key-not-used-here');
	home = mkdtempSync(join(tmpdir(), 'onyx-mcp-page-'));
	mkdirSync(join(home, 'data'));
	onyx = await startOnyx(
		`{
			gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hashPassword(PASSWORD)}" } },
			mcp: { servers: { filed: { command: "${TIME}", trust: "read" } } },
		}`,
		home
	);
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	if (onyx) await stopOnyx(onyx);
	killAll();
	if (home) rmSync(home, { recursive: true, force: true });
});

test('an MCP server is added, edited, restarted and removed from the MCP page', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	await page.goto(`${onyx.url}/mcp-servers`);
	await signIn(page, PASSWORD);

	const filed = page.getByTestId('mcp-server-filed');
	await filed.getByTestId('mcp-state').getByText('ready').waitFor();
	assert.equal(await filed.getByRole('button', { name: 'Edit' }).count(), 0, 'the config file\'s server is read-only here');

	await page.getByRole('button', { name: 'Add server' }).click();
	const form = page.getByTestId('mcp-form');
	await form.getByLabel(/^Name/).fill('clock');
	await form.getByLabel('Command', { exact: true }).fill(TIME);
	await form.getByLabel('Arguments').fill('--local-timezone=UTC');
	await form.getByLabel('Environment').fill(`CLOCK_TOKEN=${SECRET}`);
	await form.getByLabel('Trust').selectOption('read');
	await form.getByRole('button', { name: 'Add server' }).click();
	const row = page.getByTestId('mcp-server-clock');
	await row.getByTestId('mcp-state').getByText('ready').waitFor({ timeout: 30000 });
	await row.getByText('added here').waitFor();
	await row.getByTestId('mcp-secret').getByText('CLOCK_TOKEN: set').waitFor();
	await row.getByRole('button', { name: /tools/ }).click();
	await page.getByTestId('mcp-tools-clock').getByText('mcp__clock__get_current_time').waitFor();
	assert.ok(!(await page.content()).includes(SECRET), 'the value never reaches the page');
	const listed = await (await api('/v1/mcp/servers')).text();
	assert.ok(!listed.includes(SECRET), 'nor the API');
	const first = await serverWhen('clock', (s) => s?.state === 'ready');

	// An edit (the environment box left blank keeps the value) gives it a new process.
	await row.getByRole('button', { name: 'Edit' }).click();
	await form.getByLabel('Arguments').fill('--local-timezone=Europe/Paris');
	await form.getByRole('button', { name: 'Save changes' }).click();
	const edited = await serverWhen('clock', (s) => s?.state === 'ready' && s.pid !== first.pid);
	assert.deepEqual(edited.args, ['--local-timezone=Europe/Paris']);
	assert.deepEqual(edited.env, ['CLOCK_TOKEN']);

	// A restart, of an added server and of the file's.
	await row.getByRole('button', { name: 'Restart' }).click();
	await serverWhen('clock', (s) => s?.state === 'ready' && s.pid !== edited.pid);
	const filedBefore = await serverWhen('filed', (s) => s?.state === 'ready');
	await filed.getByRole('button', { name: 'Restart' }).click();
	await serverWhen('filed', (s) => s?.state === 'ready' && s.pid !== filedBefore.pid);

	page.once('dialog', (dialog) => dialog.accept());
	await row.getByRole('button', { name: 'Remove' }).click();
	await row.waitFor({ state: 'detached' });
	await serverWhen('clock', (s) => s === undefined);

	assert.deepEqual(violations, [], 'no Content-Security-Policy violation');
	await context.close();
});

test('a remote MCP server behind OAuth signs in from the MCP page', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	await page.goto(`${onyx.url}/mcp-servers`);
	await signIn(page, PASSWORD);

	await page.getByRole('button', { name: 'Add server' }).click();
	const form = page.getByTestId('mcp-form');
	await form.getByLabel(/^Name/).fill('guarded');
	await form.getByLabel('Transport').selectOption('http');
	await form.getByLabel('URL').fill(fakes.mcpOAuth.mcp);
	await form.getByLabel('Trust').selectOption('read');
	await form.getByRole('button', { name: 'Add server' }).click();
	const row = page.getByTestId('mcp-server-guarded');
	await row.getByTestId('mcp-state').getByText('needs_sign_in').waitFor({ timeout: 30000 });

	// Sign in opens the authorization server in a new tab, which comes back to Onyx's callback.
	const [tab] = await Promise.all([context.waitForEvent('page'), row.getByTestId('mcp-sign-in').click()]);
	await tab.getByText('Onyx is signed in to the MCP server guarded').waitFor({ timeout: 30000 });
	assert.match(tab.url(), /\/v1\/mcp\/oauth\/callback\?/);
	await tab.close();

	await row.getByTestId('mcp-state').getByText('ready').waitFor({ timeout: 30000 });
	await row.getByRole('button', { name: /tools/ }).click();
	await page.getByTestId('mcp-tools-guarded').getByText('mcp__guarded__whoami').waitFor();
	const stats = await (await fetch(`${fakes.mcpOAuth.authServer}/_fake/oauth/stats`)).json();
	assert.equal(stats.codeExchanges, 1);
	assert.equal(stats.bearerAtAuthServer, 0, 'the token goes only to the MCP server');
	const listed = await (await api('/v1/mcp/servers')).text();
	assert.ok(!/access_token|refresh_token/i.test(listed), 'no answer carries a token');

	assert.deepEqual(violations, [], 'no Content-Security-Policy violation');
	await context.close();
});
