import { describe, expect, it } from 'vitest';
import type { Notification } from './api/types';
import { sessionOf } from './notifications.svelte';

const item = (kind: Notification['kind'], link: string): Notification => ({
	id: '1', kind, agent: 'main', title: 't', body: 'b', link, created_at: '2026-11-27T00:00:00Z', read: false
});

describe('sessionOf', () => {
	it('reads the session a message was sent into from its link', () => {
		expect(sessionOf(item('message', '/sessions/01a2-b3'))).toBe('01a2-b3');
	});

	it('is null for other kinds and other links', () => {
		expect(sessionOf(item('approval', '/sessions/01a2'))).toBeNull();
		expect(sessionOf(item('message', '/tasks'))).toBeNull();
		expect(sessionOf(item('message', '/sessions/01a2/evil'))).toBeNull();
	});
});
