import { describe, expect, it } from 'vitest';
import { tokenSummary } from './tokens';

describe('tokenSummary', () => {
	it('shows cached prompt tokens only when there are any', () => {
		expect(tokenSummary(1234, 0)).toBe('1,234 tokens');
		expect(tokenSummary(20500, 18000)).toBe('20,500 tokens · 18,000 from the prompt cache');
	});
});
