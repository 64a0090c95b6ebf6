// /v1/runs: agent runs, whatever started them. Cancel one (the UI's Stop),
// or find the one still answering in a session (to re-attach after a reload).
import { get, post, query, segment } from './client';
import type { AgentRun, AgentRunStatus, List } from './types';

export const listRuns = (filter: { session?: string; agent?: string; status?: AgentRunStatus; limit?: number }) =>
	get<List<AgentRun>>(`/v1/runs${query(filter)}`);

export const cancelRun = (id: string) => post<AgentRun>(`/v1/runs/${segment(id)}/cancel`);
