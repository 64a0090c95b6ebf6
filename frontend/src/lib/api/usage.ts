// /v1/usage (tokens and cost per key, agent, model, provider, day or session)
// and /v1/usage/limits (budgets and what each has spent).
import { get } from './client';
import type { List, UsageGroupBy, UsageLimitStatus, UsageReport } from './types';

export const usageReport = (groupBy: UsageGroupBy, from?: string, to?: string) => {
	const query = new URLSearchParams({ group_by: groupBy });
	if (from) query.set('from', from);
	if (to) query.set('to', to);
	return get<UsageReport>(`/v1/usage?${query}`);
};

export const usageLimits = () => get<List<UsageLimitStatus>>('/v1/usage/limits');

/** USD for people: `$0.00` (nothing spent), `$0.0123`, or `unknown` when calls had no price. */
export function usd(value: number | null | undefined): string {
	if (value === null || value === undefined) return 'unknown';
	if (value === 0) return '$0.00';
	return value < 0.01 ? `$${value.toPrecision(3)}` : `$${value.toFixed(2)}`;
}
