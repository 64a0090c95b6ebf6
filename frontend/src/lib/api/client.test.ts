import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError, get, post } from './client';
import { streamChat } from './chat';
import { timeAgo } from '../time';

function respond(status: number, body: string, headers: Record<string, string> = {}) {
	return vi.fn(async () => new Response(body, { status, headers }));
}

afterEach(() => vi.unstubAllGlobals());

describe('request', () => {
	it('returns parsed JSON and sends JSON bodies with the cookie', async () => {
		const fetch = respond(200, '{"ok": true}');
		vi.stubGlobal('fetch', fetch);
		expect(await post('/v1/tasks', { prompt: 'x' })).toEqual({ ok: true });
		const [path, init] = fetch.mock.calls[0] as unknown as [string, RequestInit];
		expect(path).toBe('/v1/tasks');
		expect(init.credentials).toBe('same-origin');
		expect(init.body).toBe('{"prompt":"x"}');
		expect((init.headers as Record<string, string>)['content-type']).toBe('application/json');
	});

	it("throws the server's OpenAI-shaped message with the status", async () => {
		vi.stubGlobal('fetch', respond(400, '{"error": {"message": "schedule_value: bad", "type": "invalid_request_error"}}'));
		const error = (await get('/v1/tasks').catch((e) => e)) as ApiError;
		expect(error).toBeInstanceOf(ApiError);
		expect(error.message).toBe('schedule_value: bad');
		expect(error.status).toBe(400);
		expect(error.type).toBe('invalid_request_error');
		expect(error.isConflict).toBe(false);
	});

	it('says when Onyx cannot be reached, and keeps the status line for non-JSON errors', async () => {
		vi.stubGlobal('fetch', vi.fn(async () => { throw new TypeError('Failed to fetch'); }));
		await expect(get('/v1/x')).rejects.toThrow('Onyx cannot be reached');
		vi.stubGlobal('fetch', respond(502, '<html>bad gateway</html>'));
		await expect(get('/v1/x')).rejects.toThrow('502');
	});
});

describe('streamChat', () => {
	const sse = (events: string[]) =>
		new Response(
			new ReadableStream({
				start(controller) {
					// Split mid-event, as networks do.
					const text = events.map((e) => `data: ${e}\n\n`).join('');
					const encoder = new TextEncoder();
					controller.enqueue(encoder.encode(text.slice(0, 37)));
					controller.enqueue(encoder.encode(text.slice(37)));
					controller.close();
				}
			}),
			{ status: 200, headers: { 'x-onyx-session-id': 'abc' } }
		);

	it('hands out text deltas, tool events and the session, in order', async () => {
		const chunk = (delta: object) => JSON.stringify({ choices: [{ index: 0, delta }] });
		vi.stubGlobal('fetch', vi.fn(async () => sse([
			chunk({ role: 'assistant', content: '' }),
			JSON.stringify({ choices: [], x_onyx: { type: 'tool_call_started', id: 't1', name: 'memory_search', arguments: { query: 'dog' } } }),
			chunk({ content: 'Hello' }),
			chunk({ content: ' there' }),
			'[DONE]'
		])));
		const seen: string[] = [];
		await streamChat({ model: 'onyx:main', messages: [] }, {}, {
			onText: (t) => seen.push(`text:${t}`),
			onTool: (e) => seen.push(`tool:${e.type}:${"name" in e ? e.name : ""}`),
			onSession: (id) => seen.push(`session:${id}`)
		}, new AbortController().signal);
		expect(seen).toEqual(['session:abc', 'tool:tool_call_started:memory_search', 'text:Hello', 'text: there']);
	});

	it('rejects with the error a stream carries', async () => {
		vi.stubGlobal('fetch', vi.fn(async () => sse([JSON.stringify({ error: { message: 'upstream broke' } })])));
		const handlers = { onText: () => {}, onTool: () => {}, onSession: () => {} };
		await expect(streamChat({ model: 'm', messages: [] }, {}, handlers, new AbortController().signal)).rejects.toThrow('upstream broke');
	});
});

describe('timeAgo', () => {
	it('reads past and future times', () => {
		expect(timeAgo(null)).toBe('—');
		expect(timeAgo(new Date(Date.now() - 90_000).toISOString())).toBe('1m ago');
		expect(timeAgo(new Date(Date.now() + 3 * 3600_000 + 5000).toISOString())).toBe('in 3h');
	});
});
