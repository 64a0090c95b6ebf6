// The UI's only door to Onyx: the public /v1 API and the /auth routes, with
// the login cookie. Errors come back in OpenAI's shape and are thrown as
// ApiError with the server's words.

export class ApiError extends Error {
	constructor(
		message: string,
		public status: number
	) {
		super(message);
	}
}

async function errorOf(response: Response): Promise<ApiError> {
	let message = `${response.status} ${response.statusText}`;
	try {
		const body = await response.json();
		message = body?.error?.message ?? message;
	} catch {
		// not JSON: keep the status line
	}
	if (response.status === 401 && typeof window !== 'undefined') {
		window.dispatchEvent(new CustomEvent('onyx:logged-out'));
	}
	return new ApiError(message, response.status);
}

export async function request<T = any>(method: string, path: string, body?: unknown): Promise<T> {
	let response: Response;
	try {
		response = await fetch(path, {
			method,
			credentials: 'same-origin',
			headers: body === undefined ? {} : { 'content-type': 'application/json' },
			body: body === undefined ? undefined : JSON.stringify(body)
		});
	} catch (err) {
		throw new ApiError(`Onyx cannot be reached (${(err as Error).message})`, 0);
	}
	if (!response.ok) throw await errorOf(response);
	const text = await response.text();
	return (text ? JSON.parse(text) : null) as T;
}

export const get = <T = any>(path: string) => request<T>('GET', path);
export const post = <T = any>(path: string, body?: unknown) => request<T>('POST', path, body ?? {});
export const patch = <T = any>(path: string, body: unknown) => request<T>('PATCH', path, body);
export const del = <T = any>(path: string) => request<T>('DELETE', path);
export const put = <T = any>(path: string, body: unknown) => request<T>('PUT', path, body);

export type ToolEvent = {
	type: 'tool_call_started' | 'tool_call_finished' | 'approval_required';
	id?: string;
	approval_id?: string;
	name: string;
	arguments?: unknown;
	result_summary?: string;
	is_error?: boolean;
};

export type StreamHandlers = {
	onText: (delta: string) => void;
	onTool: (event: ToolEvent) => void;
	onSession: (id: string) => void;
};

/** Streams a chat completion; resolves when it ends, rejects with the server's error. */
export async function streamChat(
	body: Record<string, unknown>,
	headers: Record<string, string>,
	handlers: StreamHandlers,
	signal: AbortSignal
): Promise<void> {
	const response = await fetch('/v1/chat/completions', {
		method: 'POST',
		credentials: 'same-origin',
		headers: { 'content-type': 'application/json', ...headers },
		body: JSON.stringify({ ...body, stream: true }),
		signal
	});
	if (!response.ok || !response.body) throw await errorOf(response);
	const session = response.headers.get('x-onyx-session-id');
	if (session) handlers.onSession(session);
	const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
	let buffer = '';
	for (;;) {
		const { value, done } = await reader.read();
		if (done) break;
		buffer += value;
		let end: number;
		while ((end = buffer.indexOf('\n\n')) >= 0) {
			const event = buffer.slice(0, end);
			buffer = buffer.slice(end + 2);
			for (const line of event.split('\n')) {
				if (!line.startsWith('data:')) continue;
				const data = line.slice(5).trim();
				if (data === '[DONE]') return;
				const chunk = JSON.parse(data);
				if (chunk.error) throw new ApiError(chunk.error.message ?? 'the stream failed', 502);
				if (chunk.x_onyx) handlers.onTool(chunk.x_onyx as ToolEvent);
				const delta = chunk.choices?.[0]?.delta?.content;
				if (delta) handlers.onText(delta);
			}
		}
	}
}

export function timeAgo(iso?: string | null): string {
	if (!iso) return '—';
	const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
	const future = seconds < 0;
	const s = Math.abs(seconds);
	const [n, unit] =
		s < 60 ? [s, 's'] : s < 3600 ? [s / 60, 'm'] : s < 86400 ? [s / 3600, 'h'] : [s / 86400, 'd'];
	const text = `${Math.floor(n)}${unit}`;
	return future ? `in ${text}` : `${text} ago`;
}
