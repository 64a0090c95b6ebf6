// The UI's one door to Onyx: the public /v1 API and the /auth routes, with
// the login cookie. Every failure becomes an ApiError carrying the fields of
// OpenAI's error body ({"error": {"message", "type", "param", "code"}}), and
// pages show it one way (ErrorNotice, fed by a Problem).

/** The OpenAI-shaped error body Onyx answers with. */
export type ErrorBody = {
	error?: { message?: string; type?: string; param?: string | null; code?: string | null };
};

export class ApiError extends Error {
	constructor(
		message: string,
		/** The HTTP status; 0 when Onyx could not be reached. */
		public status: number,
		public type: string | null = null,
		public code: string | null = null,
		public param: string | null = null
	) {
		super(message);
		this.name = 'ApiError';
	}

	/** Any thrown value as an ApiError (network errors and bugs included). */
	static from(err: unknown): ApiError {
		if (err instanceof ApiError) return err;
		return new ApiError(err instanceof Error ? err.message : String(err), 0);
	}

	/** Someone else changed what this client read (`If-Match` failed). */
	get isConflict(): boolean {
		return this.status === 412 || this.code === 'etag_mismatch';
	}

	get isNotFound(): boolean {
		return this.status === 404;
	}
}

/** Reads an error response into an ApiError; a 401 tells the layout to show the login. */
export async function errorOf(response: Response): Promise<ApiError> {
	let message = `${response.status} ${response.statusText}`.trim();
	let error: ErrorBody['error'];
	try {
		error = ((await response.json()) as ErrorBody)?.error;
	} catch {
		// not JSON: keep the status line
	}
	if (response.status === 401 && typeof window !== 'undefined') {
		window.dispatchEvent(new CustomEvent('onyx:logged-out'));
	}
	return new ApiError(
		error?.message ?? message,
		response.status,
		error?.type ?? null,
		error?.code ?? null,
		error?.param ?? null
	);
}

export type RequestOptions = { headers?: Record<string, string> };

export async function request<T>(
	method: string,
	path: string,
	body?: unknown,
	options: RequestOptions = {}
): Promise<T> {
	let response: Response;
	try {
		response = await fetch(path, {
			method,
			credentials: 'same-origin',
			headers: {
				...(body === undefined ? {} : { 'content-type': 'application/json' }),
				...options.headers
			},
			body: body === undefined ? undefined : JSON.stringify(body)
		});
	} catch (err) {
		throw new ApiError(`Onyx cannot be reached (${(err as Error).message})`, 0);
	}
	if (!response.ok) throw await errorOf(response);
	const text = await response.text();
	return (text ? JSON.parse(text) : null) as T;
}

export const get = <T>(path: string) => request<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => request<T>('POST', path, body ?? {});
export const patch = <T>(path: string, body: unknown) => request<T>('PATCH', path, body);
export const put = <T>(path: string, body: unknown, options?: RequestOptions) =>
	request<T>('PUT', path, body, options);
export const del = <T>(path: string) => request<T>('DELETE', path);

/** `?a=1&b=2` from the given values, leaving out empty ones. */
export function query(params: Record<string, string | number | undefined | null>): string {
	const search = new URLSearchParams();
	for (const [key, value] of Object.entries(params)) {
		if (value !== undefined && value !== null && String(value) !== '') search.set(key, String(value));
	}
	const text = search.toString();
	return text ? `?${text}` : '';
}

/** A path segment, escaped (`/` kept for memory paths with folders). */
export const segment = (text: string) => encodeURIComponent(text);
export const pathOf = (text: string) => text.split('/').map(encodeURIComponent).join('/');
