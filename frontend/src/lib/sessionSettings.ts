// What a session may override of its agent, in the UI's terms: the permission
// modes in order of trust, the choices a session may pick (never a mode above
// its agent's: the server refuses those), the form's blank-means-default draft
// and the overrides that differ from the agent's own.
import type { ReasoningEffort, SessionSettings, SessionSettingsPatch } from './api/types';

export type PermissionMode = NonNullable<SessionSettings['permission_mode']>;

/** From the most careful to the most trusting (the server's `stricter` order). */
export const PERMISSION_MODES: PermissionMode[] = ['safe', 'ask', 'allow-all'];

export const REASONING_EFFORTS: ReasoningEffort[] = ['minimal', 'low', 'medium', 'high'];

const rank = (mode: string) => PERMISSION_MODES.indexOf(mode as PermissionMode);

/**
 * The modes a session of an agent with `agentMode` may pick besides the
 * agent's default: the stricter ones. An unknown agent mode offers only `safe`.
 */
export function modesBelow(agentMode: string): PermissionMode[] {
	const top = rank(agentMode);
	return top < 0 ? ['safe'] : PERMISSION_MODES.slice(0, top);
}

/** The form's values: `''` is the agent's default. */
export type SettingsDraft = { model: string; reasoning_effort: ReasoningEffort | ''; permission_mode: PermissionMode | '' };

export const draftOf = (settings: SessionSettings): SettingsDraft => ({
	model: settings.model ?? '',
	reasoning_effort: settings.reasoning_effort ?? '',
	permission_mode: settings.permission_mode ?? ''
});

/** The PATCH body's `settings`: every field sent, a default as `null` (cleared). */
export const patchOf = (draft: SettingsDraft): SessionSettingsPatch => ({
	model: draft.model || null,
	reasoning_effort: draft.reasoning_effort || null,
	permission_mode: draft.permission_mode || null
});

export const sameDraft = (a: SettingsDraft, b: SettingsDraft) =>
	a.model === b.model && a.reasoning_effort === b.reasoning_effort && a.permission_mode === b.permission_mode;

/** What the agent itself runs with (its model may be unknown to this key). */
export type AgentDefaults = { model: string | null; permission_mode: string };

/**
 * The overrides that change something, as short labels for the header's
 * badge: a setting equal to the agent's own is not one. Agents have no
 * reasoning effort of their own, so a set effort always is.
 */
export function differences(settings: SessionSettings, agent: AgentDefaults): string[] {
	const out: string[] = [];
	if (settings.model && settings.model !== agent.model) out.push(`model ${settings.model}`);
	if (settings.reasoning_effort) out.push(`effort ${settings.reasoning_effort}`);
	if (settings.permission_mode && settings.permission_mode !== agent.permission_mode) out.push(`mode ${settings.permission_mode}`);
	return out;
}
