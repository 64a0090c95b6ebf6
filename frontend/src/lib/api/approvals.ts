// /v1/approvals: tool calls waiting for a human, and the decision.
import { get, post, segment } from './client';
import type { Approval, ApprovalDecision, List } from './types';

export type Verdict = 'approve' | 'deny';

export const listApprovals = () => get<List<Approval>>('/v1/approvals');

export const decide = (id: string, decision: Verdict) =>
	post<ApprovalDecision>(`/v1/approvals/${segment(id)}`, { decision });
