import { describe, expect, it } from 'vitest';
import { usd } from './api/usage';

describe('usd', () => {
	it('keeps unknown apart from zero', () => {
		expect(usd(null)).toBe('unknown');
		expect(usd(undefined)).toBe('unknown');
		expect(usd(0)).toBe('$0.00');
	});
	it('shows small amounts with significant digits', () => {
		expect(usd(0.000123)).toBe('$0.000123');
		expect(usd(12.345)).toBe('$12.35');
	});
});
