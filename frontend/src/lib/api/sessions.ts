// /v1/sessions: list (filters, text search), one session with its messages,
// rename/archive, delete.
import { del, get, patch, query, segment } from './client';
import type { Deleted, LogMessage, SessionDetail, SessionMeta, SessionPage, SessionPatch, SessionStatus } from './types';

export type SessionFilter = { agent?: string; status?: SessionStatus | ''; q?: string; limit?: number };

export const listSessions = (filter: SessionFilter = {}) =>
	get<SessionPage>(`/v1/sessions${query({ limit: 100, ...filter, q: filter.q?.trim() })}`);

export const getSession = (id: string, limit = 1000, offset = 0) =>
	get<SessionDetail>(`/v1/sessions/${segment(id)}${query({ limit, offset: offset || undefined })}`);

/** The session's newest message (pages count from the oldest); `null` for an empty one. */
export async function lastMessage(id: string): Promise<LogMessage | null> {
	const { total_messages } = await getSession(id, 1);
	if (!total_messages) return null;
	return (await getSession(id, 1, total_messages - 1)).messages[0] ?? null;
}

export const updateSession = (id: string, change: SessionPatch) =>
	patch<SessionMeta>(`/v1/sessions/${segment(id)}`, change);

export const deleteSession = (id: string) => del<Deleted>(`/v1/sessions/${segment(id)}`);

export const exportUrl = (id: string) => `/v1/sessions/${segment(id)}/export`;
