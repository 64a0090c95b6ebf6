// What the browser suites share: starting the real `onyx` binary (and other
// processes) and reading the address it listens on, hashing a UI password,
// Debian's Chromium through playwright-core, browser contexts that report
// Content-Security-Policy violations, and signing in through the login form.
// Not a test file itself (node --test runs only `*.test.mjs`).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

export const ONYX = process.env.ONYX_BIN;
export const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

const children = [];

/** Starts a process and resolves with the first stdout line matching `pattern`. */
export function startProcess(command, args, env, pattern) {
	const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
	children.push(child);
	let stderr = '';
	child.stderr.on('data', (d) => (stderr += d));
	return new Promise((resolve, reject) => {
		const lines = createInterface({ input: child.stdout });
		lines.on('line', (line) => {
			const match = line.match(pattern);
			if (match) resolve({ child, match, stderr: () => stderr });
		});
		child.on('exit', (code) => reject(new Error(`${command} exited ${code}: ${stderr}`)));
	});
}

/** Kills every process `startProcess` started. */
export function killAll() {
	for (const child of children) child.kill('SIGKILL');
}

/** The argon2id hash of `password`, from `onyx hash-password`. */
export function hashPassword(password) {
	const out = spawnSync(ONYX, ['hash-password'], { input: `${password}\n`, encoding: 'utf8' });
	assert.equal(out.status, 0, out.stderr);
	return out.stdout.trim().split('\n').pop();
}

/**
 * Writes `configText` to `dir/onyx.json5` and serves it on a free loopback
 * port, with `dir` as home and data dir and no provider found in the
 * environment; `{ child, url }`.
 */
export async function startOnyx(configText, dir, env = {}) {
	assert.ok(ONYX, 'ONYX_BIN must be set (tests/run does)');
	writeFileSync(join(dir, 'onyx.json5'), configText);
	const { child, match } = await startProcess(
		ONYX,
		['serve', '--config', join(dir, 'onyx.json5'), '--listen', '127.0.0.1:0'],
		{ HOME: dir, ONYX_DATA_DIR: join(dir, 'data'), ONYX_LOG: 'info', OPENAI_API_KEY: '', ANTHROPIC_API_KEY: '', OLLAMA_HOST: '', ...env },
		/^listening on (http:\/\/\S+)/
	);
	return { child, url: match[1] };
}

export async function stopOnyx(server) {
	const exited = new Promise((resolve) => server.child.on('exit', resolve));
	server.child.kill('SIGTERM');
	await exited;
}

/** Debian's Chromium, headless, never reaching out on its own. */
export function launchBrowser() {
	return chromium.launch({
		executablePath: CHROMIUM,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
	});
}

/**
 * A browser context whose pages report Content-Security-Policy violations
 * (console and the DOM event) into `violations`.
 */
export async function newContext(browser, violations, options = {}) {
	const context = await browser.newContext(options);
	await context.addInitScript(() => {
		document.addEventListener('securitypolicyviolation', (e) =>
			console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`)
		);
	});
	context.on('console', (message) => {
		const text = message.text();
		if (/Content Security Policy|CSP violation/i.test(text)) violations.push(`${message.location().url}: ${text}`);
	});
	return context;
}

/** Signs in through the login form shown on `page`, and waits for the app. */
export async function signIn(page, password) {
	await page.getByLabel('Password').fill(password);
	await page.getByRole('button', { name: 'Sign in' }).click();
	await page.locator('nav[aria-label=Main]').waitFor({ state: 'attached' });
}

/** Starts the fake upstreams (`FAKE_UPSTREAM_BIN`), which want `key`; their base URLs by protocol. */
export async function startFakes(key) {
	const bin = process.env.FAKE_UPSTREAM_BIN;
	assert.ok(bin, 'FAKE_UPSTREAM_BIN must be set (tests/run does)');
	const started = await startProcess(bin, ['--key', key], {}, /^(\{.*\})$/);
	return JSON.parse(started.match[1]);
}

/** A fresh directory for one suite's Onyx (its home, with `data/` made). */
export function scratchHome(prefix) {
	const home = mkdtempSync(join(tmpdir(), prefix));
	mkdirSync(join(home, 'data'), { recursive: true });
	return home;
}

/** A suite's end: the browser closed, Onyx stopped, every started process killed, the home removed. */
export async function finish({ browser, onyx, home }) {
	await browser?.close();
	if (onyx) await stopOnyx(onyx);
	killAll();
	if (home) rmSync(home, { recursive: true, force: true });
}
