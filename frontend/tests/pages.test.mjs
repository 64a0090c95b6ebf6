// Every page of the control UI opens from its own address: typed (or from a
// bookmark) and reloaded, in Chromium against the real `onyx` binary, each
// shows its own heading and marks itself in the menu. The pages are read from
// the route folders (src/routes), each one's heading from its `PageHeader`, so
// a new page is covered without editing this file. The MCP page's old
// address, /mcp (now only Onyx's MCP endpoint), still opens the page in a
// browser. Needs ONYX_BIN (set by tests/run) and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { hashPassword, killAll, launchBrowser, newContext, signIn, startOnyx, stopOnyx } from './harness.mjs';

const ROUTES = fileURLToPath(new URL('../src/routes/', import.meta.url));
const KEY = 'onyx_sk_pages_test_key_0123456789';
const PASSWORD = 'every page by its address';

/**
 * The pages under `dir`: each folder with a `+page.svelte` is one, at its
 * address (route groups `(name)` take no part of it), with the title its
 * `PageHeader` shows.
 */
function pages(dir = ROUTES, address = '') {
	const found = [];
	for (const entry of readdirSync(dir, { withFileTypes: true })) {
		const path = join(dir, entry.name);
		if (entry.isDirectory()) {
			const part = /^\(.*\)$/.test(entry.name) ? '' : `/${entry.name}`;
			found.push(...pages(path, address + part));
		} else if (entry.name === '+page.svelte') {
			assert.doesNotMatch(address, /\[/, `${path}: a page with parameters needs a sample address here`);
			const title = readFileSync(path, 'utf8').match(/<PageHeader\s+title="([^"]+)"/)?.[1];
			assert.ok(title, `${path} shows no <PageHeader title="…">, so it has no heading to find`);
			found.push({ address: address || '/', title });
		}
	}
	return found;
}

let browser, home, onyx;
const violations = [];

before(async () => {
	home = mkdtempSync(join(tmpdir(), 'onyx-pages-'));
	mkdirSync(join(home, 'data'), { recursive: true });
	onyx = await startOnyx(
		`{ gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hashPassword(PASSWORD)}" } } }`,
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

/** Waits for `page` to show the page titled `title`, marked as current in the menu at `address`. */
async function showsPage(page, title, address) {
	await page.getByRole('heading', { level: 1, name: title, exact: true }).waitFor();
	const current = page.locator('nav[aria-label=Main] a[aria-current=page]');
	assert.equal(await current.count(), 1, `${address}: one menu entry is current`);
	assert.equal(await current.getAttribute('href'), address, `${address}: the menu marks this page`);
	assert.equal(new URL(page.url()).pathname, address);
}

/** The document answer of a navigation: the UI's HTML, not an API's JSON. */
function assertHtml(response, address) {
	assert.ok(response, `${address}: no response`);
	assert.equal(response.status(), 200, `${address}: status`);
	assert.match(response.headers()['content-type'], /^text\/html/, `${address}: content type`);
}

test('the pages are read from the route folders', () => {
	const found = pages();
	assert.ok(found.length > 1, `pages found under ${ROUTES}: ${JSON.stringify(found)}`);
	assert.ok(found.some((p) => p.address === '/' && p.title === 'Chat'), JSON.stringify(found));
	assert.ok(found.some((p) => p.address === '/mcp-servers'), JSON.stringify(found));
	assert.ok(!found.some((p) => p.address === '/mcp'), 'the MCP endpoint\'s address is no page');
});

test('every page opens by its address and by reload, and shows its heading', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	await page.goto(onyx.url);
	await signIn(page, PASSWORD);
	for (const { address, title } of pages()) {
		assertHtml(await page.goto(`${onyx.url}${address}`), address);
		await showsPage(page, title, address);
		assertHtml(await page.reload(), address);
		await showsPage(page, title, address);
	}
	await context.close();
});

test('a page opened by its address before signing in is the page after it', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	assertHtml(await page.goto(`${onyx.url}/mcp-servers`), '/mcp-servers');
	await signIn(page, PASSWORD);
	await showsPage(page, 'MCP servers', '/mcp-servers');
	await context.close();
});

test('the old /mcp address opens the MCP page in a browser, and MCP clients still get the endpoint', async () => {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	await page.goto(onyx.url);
	await signIn(page, PASSWORD);
	assertHtml(await page.goto(`${onyx.url}/mcp`), '/mcp');
	await showsPage(page, 'MCP servers', '/mcp-servers');
	assertHtml(await page.reload(), '/mcp-servers');
	await showsPage(page, 'MCP servers', '/mcp-servers');
	// A script on the page asking for HTML is no navigation: it reaches the endpoint.
	const fromScript = await page.evaluate(async () => {
		const response = await fetch('/mcp', { headers: { accept: 'text/html' } });
		return { status: response.status, body: await response.text() };
	});
	assert.equal(fromScript.status, 405, JSON.stringify(fromScript));
	assert.equal(JSON.parse(fromScript.body).error.code, 'method_not_allowed');
	await context.close();

	// An MCP client's GET gets the streamable-HTTP answer of a server without a stream.
	const stream = await fetch(`${onyx.url}/mcp`, { headers: { authorization: `Bearer ${KEY}`, accept: 'text/event-stream' } });
	assert.equal(stream.status, 405);
	assert.equal(stream.headers.get('allow'), 'POST');
	const initialize = await fetch(`${onyx.url}/mcp`, {
		method: 'POST',
		headers: { authorization: `Bearer ${KEY}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
		body: JSON.stringify({
			jsonrpc: '2.0', id: 1, method: 'initialize',
			params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pages-test', version: '1' } }
		})
	});
	assert.equal(initialize.status, 200);
	assert.equal((await initialize.json()).result.protocolVersion, '2025-06-18');
});

test('no page opened here broke the Content-Security-Policy', () => {
	assert.deepEqual(violations, []);
});
