/** How a session's or the gateway's token counts read: the total, and how many of the prompt tokens the provider read from its prompt cache. */
export function tokenSummary(tokens: number, cached: number): string {
	const total = `${tokens.toLocaleString('en-US')} tokens`;
	if (cached <= 0) return total;
	return `${total} · ${cached.toLocaleString('en-US')} from the prompt cache`;
}
