// The colours of a state, one table for every page.

export type Tone = 'good' | 'bad' | 'warn' | 'busy' | 'neutral' | 'accent';

export const toneClass: Record<Tone, string> = {
	good: 'bg-green-100 text-green-800',
	bad: 'bg-red-100 text-red-800',
	warn: 'bg-amber-100 text-amber-800',
	busy: 'bg-indigo-100 text-indigo-800',
	neutral: 'bg-zinc-200 text-zinc-700',
	accent: 'bg-indigo-100 text-indigo-800'
};

const tones: Record<string, Tone> = {
	up: 'good',
	ok: 'good',
	ready: 'good',
	active: 'good',
	enabled: 'good',
	succeeded: 'good',
	live: 'good',
	done: 'good',
	down: 'bad',
	failed: 'bad',
	error: 'bad',
	degraded: 'bad',
	paused: 'warn',
	restarting: 'warn',
	pending: 'warn',
	approval: 'warn',
	running: 'busy',
	starting: 'busy'
};

/** The tone a state word reads as (`neutral` for anything else). */
export const toneOf = (state: string | null | undefined): Tone => tones[state ?? ''] ?? 'neutral';
