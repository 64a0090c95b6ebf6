import { sveltekit } from '@sveltejs/kit/vite';
import tailwindcss from '@tailwindcss/vite';
import { defineConfig } from 'vite';

// `npm run dev` proxies the API to a gateway on the default port.
const gateway = process.env.ONYX_URL ?? 'http://127.0.0.1:18790';

export default defineConfig({
	plugins: [tailwindcss(), sveltekit()],
	server: {
		proxy: { '/v1': gateway, '/auth': gateway, '/health': gateway }
	}
});
