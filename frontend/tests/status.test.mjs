// The Status and Usage pages of a fresh gateway that knows menos, in Chromium
// against the real `onyx` binary and the menos stand-in (which verifies
// every request's ed25519 signature): with no traffic the Usage page shows
// $0.00, not "unknown"; the Status page shows menos up, the key id menos
// knows Onyx by and the authorized_keys line to give menos, and a key menos
// does not know shows it down with the key to add. Needs ONYX_BIN,
// FAKE_UPSTREAM_BIN (set by tests/run), ssh-keygen and /usr/bin/chromium.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { hashPassword, killAll, launchBrowser, newContext, signIn, startOnyx, startProcess, stopOnyx } from './harness.mjs';

const FAKES = process.env.FAKE_UPSTREAM_BIN;
const KEY = 'onyx_sk_status_test_key_0123456789';
const PASSWORD = 'menos and the money';

let browser, home, menosUrl;
const gateways = [];
const violations = [];

/** A fresh ed25519 key from ssh-keygen: its path and public key line. */
function sshKey(name) {
	const path = join(home, name);
	const made = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', path], { encoding: 'utf8' });
	assert.equal(made.status, 0, made.stderr);
	return { path, public: readFileSync(`${path}.pub`, 'utf8').trim() };
}

async function gateway(keyFile) {
	const dir = mkdtempSync(join(home, 'onyx-'));
	mkdirSync(join(dir, 'data'));
	const onyx = await startOnyx(
		`{
			gateway: { auth: { apiKeys: ["${KEY}"], passwordHash: "${hashPassword(PASSWORD)}" } },
			knowledge: { menos: { url: "${menosUrl}", keyFile: "${keyFile}" } },
		}`,
		dir
	);
	gateways.push(onyx);
	return onyx;
}

async function signedIn(onyx, address) {
	const context = await newContext(browser, violations);
	const page = await context.newPage();
	await page.goto(`${onyx.url}${address}`);
	await signIn(page, PASSWORD);
	return { context, page };
}

let owner, stranger;

before(async () => {
	assert.ok(FAKES, 'FAKE_UPSTREAM_BIN must be set (tests/run does)');
	home = mkdtempSync(join(tmpdir(), 'onyx-status-'));
	owner = sshKey('onyx');
	stranger = sshKey('stranger');
	writeFileSync(join(home, 'authorized_keys'), `${owner.public}\n`);
	const started = await startProcess(FAKES, ['--menos-authorized-keys', join(home, 'authorized_keys')], {}, /^(\{.*\})$/);
	menosUrl = JSON.parse(started.match[1]).menos;
	assert.match(menosUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	for (const onyx of gateways) await stopOnyx(onyx);
	killAll();
	if (home) rmSync(home, { recursive: true, force: true });
});

test('with no traffic the Usage page shows $0.00, not unknown', async () => {
	const onyx = await gateway(owner.path);
	const { context, page } = await signedIn(onyx, '/usage');
	const total = page.getByTestId('total-cost');
	await total.waitFor();
	assert.equal(await total.innerText(), '$0.00');
	// (the page's own note explains "unknown"; the figures never say it)
	assert.doesNotMatch(await page.getByTestId('usage-totals').innerText(), /unknown/);
	await context.close();
});

test('the Status page shows menos accepting Onyx\'s key, and the key to give menos', async () => {
	const onyx = await gateway(owner.path);
	const { context, page } = await signedIn(onyx, '/status');
	const row = page.getByTestId('dependencies').getByRole('row').filter({ hasText: 'knowledge:menos' });
	await row.getByText('signed requests accepted').waitFor();
	assert.match(await row.innerText(), /menos\s+knowledge:menos\s+up/);
	const card = page.getByTestId('menos');
	await card.waitFor();
	const [, blob] = owner.public.split(' ');
	assert.ok((await page.getByTestId('menos-public-key').innerText()).startsWith(`ssh-ed25519 ${blob}`));
	assert.match(await page.getByTestId('menos-key-id').innerText(), /^SHA256:[0-9a-f]{16}$/);
	await context.close();
});

test('a key menos does not know shows menos down, naming the key to authorize', async () => {
	const onyx = await gateway(stranger.path);
	const { context, page } = await signedIn(onyx, '/status');
	const card = page.getByTestId('menos');
	await card.getByText(/menos refused Onyx's signature \(401\)/).waitFor();
	const keyId = await page.getByTestId('menos-key-id').innerText();
	assert.match(await card.innerText(), new RegExp(`add key ${keyId} to menos's authorized keys: Unknown key: ${keyId}`));
	const row = page.getByTestId('dependencies').getByRole('row').filter({ hasText: 'knowledge:menos' });
	assert.match(await row.innerText(), /down/);
	await context.close();
});

test('no page opened here broke the Content-Security-Policy', () => {
	assert.deepEqual(violations, []);
});
