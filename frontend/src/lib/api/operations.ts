// The orchestration loop: proposals (to approve or reject), missions with their steps,
// the event trail (and its live feed), policies as data, triggers, agents' trust and reviews.
import { del, get, post, put, query, segment } from './client';
import type { OpsEvent, List, Mission, Proposal, Review, Step, TriggerRule } from './types';

export type MissionWithSteps = Mission & { steps: Step[] };
export type PolicyRow = { key: string; value: unknown; updated_at: string };
export type Standing = {
	agents: { id: string; name: string; model: string | null; enabled: boolean; trust: { level: number; name: string } | null; running_steps: number }[];
};

export const listProposals = (status?: string) => get<List<Proposal>>(`/v1/proposals${query({ status, limit: 50 })}`);
export const decideProposal = (key: string, approve: boolean, reason?: string) =>
	post<Proposal>(`/v1/proposals/${segment(key)}/${approve ? 'approve' : 'reject'}`, reason ? { reason } : {});
export const listMissions = () => get<List<MissionWithSteps>>(`/v1/missions${query({ limit: 30 })}`);
export const cancelMission = (key: string) => post<Mission>(`/v1/missions/${segment(key)}/cancel`);
export const listEvents = (limit = 50) => get<List<OpsEvent>>(`/v1/events${query({ limit })}`);
export const listPolicies = () => get<{ data: PolicyRow[]; keys: string[] }>('/v1/policy');
export const savePolicy = (key: string, value: unknown) => put<{ key: string; value: unknown }>(`/v1/policy/${segment(key)}`, value);
export const deletePolicy = (key: string) => del<unknown>(`/v1/policy/${segment(key)}`);
export const listTriggers = () => get<List<TriggerRule>>('/v1/triggers');
export type TriggerInput = Pick<TriggerRule, 'name' | 'condition' | 'proposal' | 'cooldown_seconds' | 'enabled'>;
export const createTrigger = (input: TriggerInput) => post<TriggerRule>('/v1/triggers', input);
export const updateTrigger = (key: string, input: TriggerInput) => put<TriggerRule>(`/v1/triggers/${segment(key)}`, input);
export const deleteTrigger = (key: string) => del<unknown>(`/v1/triggers/${segment(key)}`);
export const readStanding = () => get<Standing>('/v1/agents/standing');
export const setTrust = (agent: string, level: number) => put<unknown>(`/v1/agents/${segment(agent)}/trust`, { level });
export const listReviews = (agent: string) => get<List<Review>>(`/v1/agents/${segment(agent)}/reviews`);
export const addReview = (agent: string, review: { summary: string; rating: number; decision: string; feedback: string }) =>
	post<Review>(`/v1/agents/${segment(agent)}/reviews`, review);

/** The live event feed (the login cookie authenticates it); returns a closer. */
export function followEvents(onEvent: (event: OpsEvent) => void, onState: (live: boolean) => void): () => void {
	const source = new EventSource('/v1/events/stream');
	source.onopen = () => onState(true);
	source.onerror = () => onState(false);
	source.onmessage = (message) => {
		const data = JSON.parse(message.data);
		if (data.type !== 'ready' && data.key) onEvent(data as OpsEvent);
	};
	return () => source.close();
}
