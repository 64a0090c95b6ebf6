// /v1/notifications: what agents told the owner outside a watched turn, and
// the stream the layout follows (server-sent events, resumed by the browser
// with Last-Event-ID when it reconnects).
import { get, post } from './client';
import type { MarkedRead, NotificationList } from './types';

export const listNotifications = (limit = 20) =>
	get<NotificationList>(`/v1/notifications?limit=${limit}`);

/** Marks these read, or every one without `ids`. */
export const markRead = (ids?: string[]) =>
	post<MarkedRead>('/v1/notifications/read', ids ? { ids } : {});

export const STREAM = '/v1/notifications/stream';
