// The one way a page handles a failed call: run it through a Problem, which
// keeps the last ApiError (reactive) for an <ErrorNotice> to show, and clears
// it when a later call succeeds.
import { ApiError } from './client';

export class Problem {
	current = $state<ApiError | null>(null);

	/** Runs `call`; on failure keeps the error and resolves to `undefined`. */
	async run<T>(call: () => Promise<T>): Promise<T | undefined> {
		try {
			const value = await call();
			this.current = null;
			return value;
		} catch (err) {
			this.current = ApiError.from(err);
			return undefined;
		}
	}

	set(err: unknown) {
		this.current = err === null ? null : ApiError.from(err);
	}

	clear() {
		this.current = null;
	}
}
