// A human reading of a schedule, for the task form and list.

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const SHORTHANDS: Record<string, string> = {
	'@hourly': 'every hour, on the hour',
	'@daily': 'every day at 00:00',
	'@midnight': 'every day at 00:00',
	'@weekly': 'every Sunday at 00:00',
	'@monthly': 'on the 1st of every month at 00:00',
	'@yearly': 'every January 1st at 00:00',
	'@annually': 'every January 1st at 00:00'
};

const pad = (n: string) => n.padStart(2, '0');

function list(field: string, names?: string[], offset = 0): string {
	return field
		.split(',')
		.map((part) => {
			const [range, step] = part.split('/');
			const name = (v: string) => (names && /^\d+$/.test(v) ? names[(Number(v) - offset) % names.length] ?? v : v);
			const base = range === '*' ? 'every' : range.includes('-') ? range.split('-').map(name).join(' to ') : name(range);
			return step ? `${base === 'every' ? 'every' : base + ', every'} ${step}` : base;
		})
		.join(', ');
}

/** "every day at 09:00", "at minute 30 of every hour", …; null when it cannot be read. */
export function describeCron(expression: string): string | null {
	const text = expression.trim();
	if (SHORTHANDS[text]) return SHORTHANDS[text];
	const fields = text.split(/\s+/);
	if (fields.length !== 5 && fields.length !== 6) return null;
	const [sec, min, hour, dom, mon, dow] = fields.length === 6 ? fields : ['0', ...fields];
	const simple = (f: string) => /^\d+$/.test(f);
	let when: string;
	if (simple(min) && simple(hour)) {
		when = `at ${pad(hour)}:${pad(min)}${sec !== '0' && simple(sec) ? ':' + pad(sec) : ''}`;
	} else if (min.startsWith('*/') && hour === '*') {
		when = `every ${min.slice(2)} minutes`;
	} else if (simple(min) && hour === '*') {
		when = `at minute ${min} of every hour`;
	} else if (sec.startsWith('*/') && min === '*' && hour === '*') {
		when = `every ${sec.slice(2)} seconds`;
	} else if (sec === '*' && min === '*' && hour === '*') {
		when = 'every second';
	} else if (min === '*' && hour === '*') {
		when = 'every minute';
	} else {
		when = `at minute ${list(min)} past hour ${list(hour)}`;
	}
	const days: string[] = [];
	if (dow !== '*' && dow !== '?') days.push(`on ${list(dow, DAYS)}`);
	if (dom !== '*' && dom !== '?') days.push(`on day ${list(dom)} of the month`);
	if (mon !== '*') days.push(`in ${list(mon, MONTHS, 1)}`);
	const prefix = days.length || when.startsWith('every') ? '' : 'every day';
	return [prefix, when, ...days].filter(Boolean).join(' ');
}

export function describeSchedule(type: string, value: string): string {
	if (type === 'cron') return describeCron(value) ?? value;
	if (type === 'interval') return /^\d+$/.test(value) ? `every ${Number(value) / 1000}s` : `every ${value}`;
	return value.startsWith('+') ? `once, ${value.slice(1)} from now` : `once, at ${value}`;
}
