// A single-page app: rendered in the browser, served by the gateway as static files.
export const ssr = false;
export const prerender = false;
