// Starts the fake upstreams and the real `onyx` binary for a JS SDK test file,
// and an `openai` client pointed at it. Binaries come from $ONYX_BIN and
// $FAKE_UPSTREAM_BIN (set by tests/run).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

function firstLine(proc) {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout });
    rl.once('line', (line) => resolve(line));
    proc.once('exit', (code) => reject(new Error(`exited ${code} before printing`)));
  });
}

/**
 * Starts the stack; `stop()` ends it. Providers: openai, openai_resp (its Responses API), anthropic, ollama, azure, gemini, vertex, bedrock,
 * plus `extra.providers(urls)` (more provider entries) and `extra.gateway` (more gateway keys).
 */
export async function startStack(key, extra = {}) {
  const procs = [];
  const fake = spawn(process.env.FAKE_UPSTREAM_BIN, [], { stdio: ['ignore', 'pipe', 'inherit'] });
  procs.push(fake);
  const urls = JSON.parse(await firstLine(fake));
  const dir = mkdtempSync(join(tmpdir(), 'onyx-js-'));
  const config = join(dir, 'onyx.json5');
  writeFileSync(config, `{
    gateway: { auth: { apiKeys: ["${key}"] }, ${extra.gateway ?? ''} },
    providers: {
      openai: { type: "openai", baseUrl: "${urls.openai}", apiKey: "${urls.key}", maxRetries: 0 },
      openai_resp: { type: "openai", baseUrl: "${urls.openai}", apiKey: "${urls.key}", maxRetries: 0, responses: true },
      anthropic: { type: "anthropic", baseUrl: "${urls.anthropic}", apiKey: "${urls.key}" },
      ollama: { type: "ollama", baseUrl: "${urls.ollama}" },
      azure: { type: "azure", baseUrl: "${urls.azure}", apiKey: "${urls.key}", maxRetries: 0, deployments: { "gpt-4o-mini": "fake-echo" } },
      gemini: { type: "gemini", baseUrl: "${urls.gemini}", apiKey: "${urls.key}", maxRetries: 0 },
      vertex: { type: "vertex", baseUrl: "${urls.gemini}", project: "demo", apiKey: "${urls.key}", maxRetries: 0 },
      bedrock: { type: "bedrock", baseUrl: "${urls.bedrock}", region: "us-east-1", maxRetries: 0, models: ["fake-echo"] },
      ${extra.providers ? extra.providers(urls) : ''}
    },
  }`);
  const env = { ...process.env, HOME: dir, ONYX_DATA_DIR: join(dir, 'data') };
  for (const name of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENROUTER_API_KEY', 'OLLAMA_HOST', 'ONYX_CONFIG']) delete env[name];
  for (const name of Object.keys(env).filter((n) => n.startsWith('AWS_'))) delete env[name];
  // Bedrock signs with the AWS chain's first link: these credentials, for the fake.
  Object.assign(env, { AWS_ACCESS_KEY_ID: urls.awsAccessKeyId, AWS_SECRET_ACCESS_KEY: urls.awsSecretAccessKey, AWS_EC2_METADATA_DISABLED: 'true' });
  const onyx = spawn(process.env.ONYX_BIN, ['serve', '--config', config, '--listen', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  procs.push(onyx);
  const line = await firstLine(onyx);
  assert.match(line, /^listening on /);
  const base = line.replace('listening on ', '').trim();
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
  return { base, client, onyx, dir, urls, stop: () => procs.forEach((p) => p.kill('SIGTERM')) };
}
