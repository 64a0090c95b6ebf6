// /v1/skills: skill folders (a SKILL.md and its files), shared (`_shared`) or one agent's.
import { del, get, put, query, segment } from './client';
import type { Deleted, List, Skill, SkillSummary } from './types';

export const listSkills = (agent?: string) => get<List<SkillSummary>>(`/v1/skills${query({ agent })}`);

export const readSkill = (scope: string, name: string) => get<Skill>(`/v1/skills/${segment(scope)}/${segment(name)}`);

/** Saves a skill's SKILL.md (front matter `name` and `description`, then instructions). */
export const saveSkill = (scope: string, name: string, content: string) =>
	put<Skill>(`/v1/skills/${segment(scope)}/${segment(name)}`, { content });

export const deleteSkill = (scope: string, name: string) => del<Deleted>(`/v1/skills/${segment(scope)}/${segment(name)}`);

/** A new skill's SKILL.md, to be filled in. */
export const skillTemplate = (name: string) =>
	`---\nname: ${name}\ndescription: When to use this skill, in one line (the prompt lists it)\n---\n# ${name}\n\nSteps the agent follows.\n`;
