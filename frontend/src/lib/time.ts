// Times as people read them: "3m ago", "in 2h".

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
