// /v1/agents: list, one agent, create from the templates, change, workspace files.
import { get, patch, post, put, segment } from './client';
import type { AgentDetail, AgentView, CreateAgent, FileContent, List, PatchAgent, WriteOutcome } from './types';

export const listAgents = () => get<List<AgentView>>('/v1/agents');

export const getAgent = (id: string) => get<AgentDetail>(`/v1/agents/${segment(id)}`);

export const createAgent = (agent: CreateAgent) => post<AgentView>('/v1/agents', agent);

export const updateAgent = (id: string, change: PatchAgent) => patch<AgentView>(`/v1/agents/${segment(id)}`, change);

export const readAgentFile = (id: string, name: string) =>
	get<FileContent>(`/v1/agents/${segment(id)}/files/${segment(name)}`);

export const writeAgentFile = (id: string, name: string, content: string) =>
	put<WriteOutcome>(`/v1/agents/${segment(id)}/files/${segment(name)}`, { content });

/** The agents' ids, for pickers (empty when they cannot be read). */
export const agentIds = async () => (await listAgents()).data.map((a) => a.id);
