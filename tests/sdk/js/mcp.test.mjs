// Onyx's /mcp driven by the official MCP TypeScript SDK client over streamable
// HTTP: list the tools, write memory for an agent, search it back, and see a
// tool error as the SDK reports it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startStack } from './stack.mjs';

const KEY = 'onyx_sk_js_mcp_test_key_0123456';
let stack;
let client;

before(async () => {
  stack = await startStack(KEY);
  client = new Client({ name: 'onyx-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${KEY}` } },
  });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  stack?.stop();
});

test('the TypeScript MCP client lists Onyx tools, writes memory and finds it', async () => {
  assert.equal(client.getServerVersion()?.name, 'onyx');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [
    'list_tasks', 'memory_get', 'memory_search', 'memory_write',
    'schedule_task', 'send_to_agent', 'sessions_history', 'sessions_list',
  ]);
  const written = await client.callTool({
    name: 'memory_write',
    arguments: { content: 'Passport renewal appointment on June 9 at the town hall.', agent: 'main' },
  });
  assert.equal(written.isError, false, JSON.stringify(written));
  const found = await client.callTool({ name: 'memory_search', arguments: { query: 'passport renewal' } });
  assert.match(found.content[0].text, /town hall/);
  const refused = await client.callTool({ name: 'memory_get', arguments: { path: '../etc/passwd' } });
  assert.equal(refused.isError, true);
});
