import { describe, expect, it } from 'vitest';
import { describeCron, describeSchedule } from './cron';

describe('describeCron', () => {
	it.each([
		['0 9 * * *', 'every day at 09:00'],
		['30 9 * * 1-5', 'at 09:30 on Monday to Friday'],
		['0 8 * * 0', 'at 08:00 on Sunday'],
		['*/15 * * * *', 'every 15 minutes'],
		['0 0 1 * *', 'at 00:00 on day 1 of the month'],
		['*/10 * * * * *', 'every 10 seconds'],
		['@daily', 'every day at 00:00'],
		['0 12 * 1 *', 'at 12:00 in January']
	])('%s reads as "%s"', (expression, reading) => {
		expect(describeCron(expression)).toBe(reading);
	});

	it('gives up on what it cannot read', () => {
		expect(describeCron('0 9 * *')).toBeNull();
	});
});

describe('describeSchedule', () => {
	it('reads intervals and one-off times', () => {
		expect(describeSchedule('interval', '3600000')).toBe('every 3600s');
		expect(describeSchedule('interval', '30m')).toBe('every 30m');
		expect(describeSchedule('once', '+10m')).toBe('once, 10m from now');
		expect(describeSchedule('once', '2026-12-01T09:00')).toBe('once, at 2026-12-01T09:00');
	});
});
