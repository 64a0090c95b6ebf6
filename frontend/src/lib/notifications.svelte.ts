// The notifications the layout shows on every page: the newest few and the
// unread count, read once and then kept current from the server's stream
// (no reload). Once the owner allows it (a button; never asked on load),
// each new one is also shown by the browser's Notification API. Pages that
// show some of them in place (the Chat page, a message into its open
// session) subscribe with `onArrival`; the layout hands the one instance
// down as a context (`followed`).
import { getContext, setContext } from 'svelte';
import { listNotifications, markRead, STREAM } from './api/notifications';
import type { Notification as Item } from './api/types';

const KEPT = 20;

export type Permission = NotificationPermission | 'unsupported';

function permissionNow(): Permission {
	return typeof window !== 'undefined' && 'Notification' in window
		? window.Notification.permission
		: 'unsupported';
}

export class Notifications {
	items = $state<Item[]>([]);
	unread = $state(0);
	permission = $state<Permission>(permissionNow());
	#source: EventSource | null = null;
	#listeners = new Set<(item: Item) => void>();

	/** Reads the newest, then follows the stream; returns the way to stop. */
	start(): () => void {
		this.#load();
		const source = new EventSource(STREAM);
		source.onmessage = (event) => this.#arrived(JSON.parse(event.data) as Item);
		// After a drop the browser reconnects by itself (Last-Event-ID); the
		// count may have moved meanwhile (read elsewhere), so read it again.
		source.onopen = () => this.#load();
		this.#source = source;
		return () => {
			source.close();
			this.#source = null;
		};
	}

	async #load() {
		const list = await listNotifications(KEPT).catch(() => null);
		if (!list) return;
		this.items = list.data;
		this.unread = list.unread;
	}

	#arrived(item: Item) {
		if (this.items.some((i) => i.id === item.id)) return;
		this.items = [item, ...this.items].slice(0, KEPT);
		if (!item.read) this.unread += 1;
		for (const listener of this.#listeners) listener(item);
		if (this.permission === 'granted') {
			const shown = new window.Notification(item.title, { body: item.body, tag: item.id });
			shown.onclick = () => {
				window.focus();
				window.location.assign(item.link);
			};
		}
	}

	/** Calls `listener` with each notification that arrives live; returns the way to stop. */
	onArrival(listener: (item: Item) => void): () => void {
		this.#listeners.add(listener);
		return () => {
			this.#listeners.delete(listener);
		};
	}

	/** Asks the browser for permission (only when the owner clicks). */
	async allow() {
		if (this.permission === 'unsupported') return;
		this.permission = await window.Notification.requestPermission();
	}

	async readAll() {
		const marked = await markRead().catch(() => null);
		if (!marked) return;
		this.items = this.items.map((i) => ({ ...i, read: true }));
		this.unread = marked.unread;
	}

	async read(item: Item) {
		if (item.read) return;
		const marked = await markRead([item.id]).catch(() => null);
		if (!marked) return;
		this.items = this.items.map((i) => (i.id === item.id ? { ...i, read: true } : i));
		this.unread = marked.unread;
	}
}

const KEY = Symbol('notifications');

/** Makes the layout's instance the one its pages reach with `followed`. */
export const provide = (notifications: Notifications) => setContext(KEY, notifications);

/** The layout's instance (undefined outside it, as in a unit test). */
export const followed = () => getContext<Notifications | undefined>(KEY);

/** The web session a `message` notification was sent into (its link is `/sessions/{id}`). */
export function sessionOf(item: Item): string | null {
	const match = item.kind === 'message' ? /^\/sessions\/([^/?#]+)$/.exec(item.link) : null;
	return match ? decodeURIComponent(match[1]) : null;
}
