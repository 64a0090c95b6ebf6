// /v1/sessions: list (filters, text search), one session with its messages,
// rename/archive, delete.
import { del, get, patch, query, segment } from './client';
import type { Deleted, SessionDetail, SessionMeta, SessionPage, SessionPatch, SessionStatus } from './types';

export type SessionFilter = { agent?: string; status?: SessionStatus | ''; q?: string; limit?: number };

export const listSessions = (filter: SessionFilter = {}) =>
	get<SessionPage>(`/v1/sessions${query({ limit: 100, ...filter, q: filter.q?.trim() })}`);

export const getSession = (id: string, limit = 1000) =>
	get<SessionDetail>(`/v1/sessions/${segment(id)}${query({ limit })}`);

export const updateSession = (id: string, change: SessionPatch) =>
	patch<SessionMeta>(`/v1/sessions/${segment(id)}`, change);

export const deleteSession = (id: string) => del<Deleted>(`/v1/sessions/${segment(id)}`);

export const exportUrl = (id: string) => `/v1/sessions/${segment(id)}/export`;
