import { defineConfig } from 'vitest/config';

// Unit tests of the UI's plain TypeScript (API client, schedule reading);
// the pages are tested in Chromium by tests/ui.test.mjs.
export default defineConfig({
	test: { include: ['src/**/*.test.ts'], environment: 'node' }
});
