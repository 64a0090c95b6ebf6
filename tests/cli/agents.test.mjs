// The coding agents people point at a gateway, unmodified: one non-interactive
// turn of the Codex CLI (Responses API) and of Claude Code (Messages API)
// through Onyx, each to a model that speaks its protocol (passed through) and
// to one that does not (translated). Upstreams are the fake servers; nothing
// reaches the internet.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startStack } from '../sdk/js/stack.mjs';

const KEY = 'onyx_sk_cli_test_key_000000';
const bin = (name) => join(dirname(fileURLToPath(import.meta.url)), 'node_modules', '.bin', name);
let stack;

before(async () => {
  stack = await startStack(KEY);
});
after(() => stack.stop());

/** Runs `command` in a fresh home and project directory; resolves with its output. */
function run(command, args, env, home) {
  const project = join(home, 'project');
  mkdirSync(project, { recursive: true });
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      { cwd: project, env: { PATH: process.env.PATH, HOME: home, ...env }, timeout: 120_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout)),
    );
    // Both read a prompt from stdin until it closes.
    child.stdin.end();
  });
}

async function codexTurn(model) {
  const home = mkdtempSync(join(tmpdir(), 'onyx-codex-'));
  mkdirSync(join(home, '.codex'));
  writeFileSync(
    join(home, '.codex', 'config.toml'),
    `model = "${model}"
model_provider = "onyx"

[model_providers.onyx]
name = "Onyx"
base_url = "${stack.base}/v1"
env_key = "ONYX_KEY"
wire_api = "responses"
`,
  );
  return run(bin('codex'), ['exec', '--skip-git-repo-check', 'Say hello'], { ONYX_KEY: KEY }, home);
}

async function claudeTurn(model) {
  const home = mkdtempSync(join(tmpdir(), 'onyx-claude-'));
  return run(bin('claude'), ['-p', 'Say hello', '--model', model], {
    ANTHROPIC_BASE_URL: stack.base,
    ANTHROPIC_API_KEY: KEY,
    ANTHROPIC_SMALL_FAST_MODEL: model,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
  }, home);
}

// The fake upstream's `fake-echo` answers "echo: " and the last user text
// (Claude Code's last text block is its own context when translated).
for (const model of ['openai/fake-echo', 'openai_resp/fake-echo']) {
  test(`codex exec answers through Onyx (${model})`, async () => {
    const out = await codexTurn(model);
    assert.match(out, /echo: Say hello/);
  });
}

for (const model of ['anthropic/fake-echo', 'openai/fake-echo']) {
  test(`claude -p answers through Onyx (${model})`, async () => {
    const out = await claudeTurn(model);
    assert.match(out, /^echo: /);
  });
}
