// POST /v1/chat/completions with `stream: true`: text deltas, Onyx's tool
// activity (`x_onyx`), the session and the run, as the SSE stream arrives.
// `followRun` reads a run's events the same way (GET /v1/runs/{id}/events:
// the answer so far, then the rest), after a reload.
import { ApiError, errorOf, type ErrorBody } from './client';
import type { Chunk, ToolActivity } from './types';

/** One `data:` event: an OpenAI chunk, perhaps with Onyx's extra or an error. */
export type StreamEvent = Partial<Chunk> & {
	x_onyx?: ToolActivity | { type: 'run_started'; run_id: string } | { type: 'run_finished' };
	error?: ErrorBody['error'];
};

export type ChatMessage = { role: 'system' | 'user' | 'assistant'; content: string };

export type StreamHandlers = {
	onText: (delta: string) => void;
	onTool: (event: ToolActivity) => void;
	onSession: (id: string) => void;
	/** The server-side run answering; Stop cancels it. */
	onRun?: (id: string) => void;
};

const isToolActivity = (extra: StreamEvent['x_onyx']): extra is ToolActivity =>
	extra?.type === 'tool_call_started' ||
	extra?.type === 'tool_call_finished' ||
	extra?.type === 'approval_required' ||
	extra?.type === 'compacted';

/** Streams a chat completion; resolves when it ends, rejects with the server's error. */
export async function streamChat(
	body: { model: string; messages: ChatMessage[] },
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
	const session = response.headers.get('x-onyx-session-id');
	if (session && response.ok) handlers.onSession(session);
	await readEvents(response, handlers);
}

/** Follows a run that is already under way, from its first event. */
export async function followRun(id: string, handlers: StreamHandlers, signal: AbortSignal): Promise<void> {
	const response = await fetch(`/v1/runs/${encodeURIComponent(id)}/events`, { credentials: 'same-origin', signal });
	await readEvents(response, handlers);
}

async function readEvents(response: Response, handlers: StreamHandlers): Promise<void> {
	if (!response.ok || !response.body) throw await errorOf(response);
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
				const chunk = JSON.parse(data) as StreamEvent;
				if (chunk.error) {
					const { message, type, code, param } = chunk.error;
					throw new ApiError(message ?? 'the stream failed', 502, type ?? null, code ?? null, param ?? null);
				}
				if (chunk.x_onyx?.type === 'run_started') handlers.onRun?.(chunk.x_onyx.run_id);
				if (isToolActivity(chunk.x_onyx)) handlers.onTool(chunk.x_onyx);
				const delta = chunk.choices?.[0]?.delta?.content;
				if (delta) handlers.onText(delta);
			}
		}
	}
}
