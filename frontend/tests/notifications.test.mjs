// Agent messages reach the browser without a reload, in Chromium against the
// real `onyx` binary and the fake upstream: `send_message` into a web
// session, a scheduled task's result with no chat bound, and an approval
// that starts waiting each raise the layout's unread badge and appear in its
// panel, on whatever page is open; once the owner allows it (a button, never
// a prompt on load) each also becomes a browser notification; marking all
// read clears the badge. A message into the conversation open on the Chat
// page shows in its transcript as it arrives (in full, and read), and a
// message's link opens that conversation. Needs ONYX_BIN and FAKE_UPSTREAM_BIN (set by
// tests/run) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ONYX, finish, hashPassword, launchBrowser, newContext, scratchHome, signIn, startFakes, startOnyx } from './harness.mjs';

const KEY = 'onyx_sk_notifications_test_key_01234';
const FAKE_KEY = 'sk-fake-upstream-key-0001';
const PASSWORD = 'agents that speak first';

let browser, home, onyx;
const violations = [];

before(async () => {
	assert.ok(ONYX, 'ONYX_BIN must be set (tests/run does)');
	const fakes = await startFakes(FAKE_KEY);
	home = scratchHome('onyx-notifications-');
	onyx = await startOnyx(
		`{
		gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hashPassword(PASSWORD)}" } },
		providers: { openai: { type: "openai", baseUrl: "${fakes.openai}", apiKey: "${FAKE_KEY}" } },
		agents: {
			defaults: { model: "openai/fake-script", permissionMode: "allow-all" },
			list: [{ id: "main", default: true }, { id: "careful", permissionMode: "ask" }],
		},
	}`,
		home
	);
	browser = await launchBrowser();
});

after(async () => {
	await finish({ browser, onyx, home });
});

/** `method path` on Onyx with the test key; the response. */
function api(method, path, body) {
	return fetch(`${onyx.url}${path}`, {
		method,
		headers: { authorization: `Bearer ${KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
		body: body ? JSON.stringify(body) : undefined
	});
}

/** One turn of `agent` on `script` (not awaited by callers that must decide an approval first). */
async function turn(agent, script) {
	const response = await api('POST', '/v1/chat/completions', {
		model: `onyx:${agent}`,
		messages: [{ role: 'user', content: script }]
	});
	assert.equal(response.status, 200, await response.clone().text());
	return response;
}

/** Records what the page asks of the browser's Notification API. */
function recordNotifications() {
	const Real = window.Notification;
	window.__shown = [];
	window.__asked = 0;
	class Recording extends Real {
		constructor(title, options) {
			super(title, options);
			window.__shown.push(title);
		}
	}
	Object.defineProperty(Recording, 'permission', { get: () => Real.permission });
	Recording.requestPermission = () => {
		window.__asked += 1;
		return Real.requestPermission();
	};
	window.Notification = Recording;
}

const visible = (page, testId) => page.locator(`[data-testid=${testId}]:visible`);

/** Waits until the visible unread badge says `count`. */
async function badgeSays(page, count) {
	await page.waitForFunction(
		(count) => [...document.querySelectorAll('[data-testid=notifications-unread]')].some((b) => b.offsetParent && b.textContent === String(count)),
		count,
		{ timeout: 30_000 }
	);
}

test('messages, task results and approvals raise the badge and appear without a reload', async () => {
	const context = await newContext(browser, violations);
	await context.grantPermissions(['notifications'], { origin: onyx.url });
	await context.addInitScript(recordNotifications);
	const page = await context.newPage();
	let reloads = 0;
	page.on('load', () => (reloads += 1));
	await page.goto(onyx.url);
	await signIn(page, PASSWORD);
	assert.equal(await visible(page, 'notifications-unread').count(), 0, 'nothing unread yet');

	// send_message into a web session, with the Chat page open.
	const session = (await turn('main', 'script: say hello')).headers.get('x-onyx-session-id');
	assert.ok(session);
	await turn('main', `script: send_message {"to": "session:${session}", "text": "the build is green"} ; answer`);
	await badgeSays(page, 1);

	// A task's result with no chat bound, with the Tasks page open (reached by the menu).
	await page.locator('nav[aria-label=Main]').getByRole('link', { name: 'Tasks' }).click();
	const made = await api('POST', '/v1/tasks', {
		agent: 'main', name: 'nightly report', prompt: 'script: say 3 new issues',
		schedule_type: 'cron', schedule_value: '0 3 * * *'
	});
	assert.equal(made.status, 201, await made.clone().text());
	const task = await made.json();
	assert.equal((await api('POST', `/v1/tasks/${task.id}/run`)).status, 202);
	await badgeSays(page, 2);

	// An approval that starts waiting.
	const asking = turn('careful', 'script: exec {"command": "echo hi"} ; answer');
	await badgeSays(page, 3);
	const pending = await (await api('GET', '/v1/approvals')).json();
	assert.equal(pending.data.length, 1);
	assert.equal((await api('POST', `/v1/approvals/${pending.data[0].id}`, { decision: 'deny' })).status, 200);
	await asking;

	// The panel lists all three, newest first, each linking to where it happened.
	await visible(page, 'notifications-button').click();
	const items = visible(page, 'notification');
	assert.deepEqual(await items.evaluateAll((els) => els.map((e) => e.dataset.kind)), ['approval', 'task_result', 'message']);
	assert.match(await items.nth(2).innerText(), /the build is green/);
	assert.match(await items.nth(1).innerText(), /nightly report[\s\S]*3 new issues/);
	assert.match(await items.nth(0).innerText(), /careful wants to run exec/);
	assert.equal(await items.nth(2).locator('a').getAttribute('href'), `/sessions/${session}`);

	// Allowed before the page loaded: the browser showed each one.
	const shown = await page.evaluate(() => window.__shown);
	assert.deepEqual(shown, ['main sent a message', 'main: nightly report', 'careful wants to run exec']);
	assert.equal(await page.evaluate(() => window.__asked), 0, 'never asked on load');

	// Mark all read: the badge goes, and stays gone after a reload.
	await page.getByRole('button', { name: 'Mark all read' }).click();
	await page.waitForFunction(() => !document.querySelector('[data-testid=notifications-unread]'));
	assert.equal(reloads, 1, 'no reload until now');
	await page.reload();
	await page.locator('nav[aria-label=Main]').waitFor();
	await visible(page, 'notifications-button').waitFor();
	assert.equal(await visible(page, 'notifications-unread').count(), 0);
	await context.close();
	assert.deepEqual(violations, []);
});

test('the browser is asked only when the owner clicks the button', async () => {
	const context = await newContext(browser, violations);
	await context.addInitScript(recordNotifications);
	const page = await context.newPage();
	await page.goto(onyx.url);
	await signIn(page, PASSWORD);
	await visible(page, 'notifications-button').click();
	const allow = page.getByRole('button', { name: 'Show them as browser notifications' });
	await allow.waitFor();
	assert.equal(await page.evaluate(() => window.__asked), 0, 'not asked on load');
	await allow.click();
	await page.waitForFunction(() => window.__asked === 1);
	await context.close();
	assert.deepEqual(violations, []);
});

test('a message into the conversation open on the Chat page shows there in full, read, and its link opens it', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	let reloads = 0;
	page.on('load', () => (reloads += 1));
	await page.goto(onyx.url);
	await signIn(page, PASSWORD);
	await page.getByLabel('Agent or model').selectOption('onyx:main');
	await page.getByLabel('Message').fill('keep me posted');
	await page.getByRole('button', { name: 'Send' }).click();
	await page.locator('[data-role=assistant]').filter({ hasText: 'echo: keep me posted' }).waitFor();
	await page.waitForURL(/\?session=/);
	const session = new URL(page.url()).searchParams.get('session');

	// Into another session: not this conversation's.
	const other = (await turn('main', 'script: say elsewhere')).headers.get('x-onyx-session-id');
	await turn('main', `script: send_message {"to": "session:${other}", "text": "for the other chat"} ; answer`);
	// Into this one, longer than a notification's body keeps.
	const long = `the deploy finished. ${'All checks green. '.repeat(40)}End of report.`;
	await turn('main', `script: send_message {"to": "session:${session}", "text": "${long}"} ; answer`);
	const shown = page.locator('[data-role=assistant]').filter({ hasText: 'the deploy finished.' });
	await shown.waitFor();
	assert.match(await shown.innerText(), /End of report\.$/m, 'the whole message, not the cut notification body');
	assert.equal(await page.locator('[data-role=assistant]').filter({ hasText: 'for the other chat' }).count(), 0);
	assert.equal(reloads, 1, 'arrived without a reload');

	// Seen where it was sent: read, so only the other session's message stays unread.
	await badgeSays(page, 1);
	const list = await (await api('GET', '/v1/notifications?limit=2')).json();
	assert.deepEqual(
		list.data.map((n) => [n.link, n.read]),
		[[`/sessions/${session}`, true], [`/sessions/${other}`, false]]
	);

	// The notification's link opens the conversation on the Chat page.
	await page.goto(`${onyx.url}/sessions/${session}`);
	await page.waitForURL(`${onyx.url}/?session=${session}`);
	await page.locator('[data-role=assistant]').filter({ hasText: 'End of report.' }).waitFor();
	await page.locator('[data-role=assistant]').filter({ hasText: 'echo: keep me posted' }).waitFor();
	await context.close();
	assert.deepEqual(violations, []);
});
