import { describe, expect, it } from 'vitest';
import { differences, draftOf, modesBelow, patchOf, sameDraft } from './sessionSettings';

describe('modesBelow', () => {
	it('offers only modes stricter than the agent’s own', () => {
		expect(modesBelow('allow-all')).toEqual(['safe', 'ask']);
		expect(modesBelow('ask')).toEqual(['safe']);
		expect(modesBelow('safe')).toEqual([]);
	});

	it('offers only safe for a mode it does not know (fails closed)', () => {
		expect(modesBelow('yolo')).toEqual(['safe']);
	});
});

describe('patchOf', () => {
	it('sends every field, a default as null so the server clears it', () => {
		expect(patchOf({ model: 'openai/gpt-4o-mini', reasoning_effort: '', permission_mode: 'safe' })).toEqual({
			model: 'openai/gpt-4o-mini',
			reasoning_effort: null,
			permission_mode: 'safe'
		});
	});

	it('round-trips through the draft', () => {
		const draft = draftOf({ reasoning_effort: 'high' });
		expect(draft).toEqual({ model: '', reasoning_effort: 'high', permission_mode: '' });
		expect(sameDraft(draft, draftOf({ reasoning_effort: 'high' }))).toBe(true);
		expect(sameDraft(draft, draftOf({}))).toBe(false);
	});
});

describe('differences', () => {
	const agent = { model: 'openai/fake-script', permission_mode: 'ask' };

	it('is empty when the session keeps its agent’s settings', () => {
		expect(differences({}, agent)).toEqual([]);
		expect(differences({ model: 'openai/fake-script', permission_mode: 'ask' }, agent)).toEqual([]);
	});

	it('names each setting that differs', () => {
		expect(differences({ model: 'openai/fake-echo', reasoning_effort: 'low', permission_mode: 'safe' }, agent)).toEqual([
			'model openai/fake-echo',
			'effort low',
			'mode safe'
		]);
	});
});
