import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from './client';
import { writeFile } from './memory';

afterEach(() => vi.unstubAllGlobals());

describe('writeFile', () => {
	it('sends If-Match with the etag the editor loaded', async () => {
		const fetch = vi.fn(async () => new Response('{"agent":"main","path":"MEMORY.md","size":2,"etag":"v2","chunks":1,"pending":0}', { status: 200 }));
		vi.stubGlobal('fetch', fetch);
		const outcome = await writeFile('main', 'memory/2026-01-02.md', 'hi', 'v1');
		expect(outcome.etag).toBe('v2');
		const [path, init] = fetch.mock.calls[0] as unknown as [string, RequestInit];
		expect(path).toBe('/v1/memory/files/main/memory/2026-01-02.md');
		expect(init.method).toBe('PUT');
		expect((init.headers as Record<string, string>)['if-match']).toBe('"v1"');
		expect(init.body).toBe('{"content":"hi"}');
	});

	it('rejects with a conflict when someone else saved the file since', async () => {
		const body = {
			error: { message: 'main/MEMORY.md changed since it was read', type: 'invalid_request_error', param: 'If-Match', code: 'etag_mismatch' }
		};
		vi.stubGlobal('fetch', vi.fn(async () => new Response(JSON.stringify(body), { status: 412 })));
		const error = (await writeFile('main', 'MEMORY.md', 'mine', 'v1').catch((e) => e)) as ApiError;
		expect(error).toBeInstanceOf(ApiError);
		expect(error.status).toBe(412);
		expect(error.code).toBe('etag_mismatch');
		expect(error.param).toBe('If-Match');
		expect(error.isConflict).toBe(true);
	});
});
