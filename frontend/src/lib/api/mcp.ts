// /v1/mcp/servers: the MCP servers whose tools agents use, as this replica's clients see them;
// (admin) servers added, edited, removed and restarted live. Env and header values are
// write-only: the API answers with their names.
import { del, get, patch, post, segment } from './client';
import type { Deleted, List, McpServerView } from './types';

/** A server's fields as the config file writes them (`POST /v1/mcp/servers`). */
export type McpServerInput = {
	name?: string;
	type?: 'stdio' | 'http' | 'sse';
	command?: string | null;
	args?: string[] | null;
	cwd?: string | null;
	env?: Record<string, string | null> | null;
	url?: string | null;
	headers?: Record<string, string | null> | null;
	trust?: 'read' | 'write' | 'dangerous';
	startup?: 'eager' | 'lazy';
	callTimeoutSeconds?: number | null;
	/** A client registered by hand, for an authorization server without dynamic registration. */
	oauth?: { clientId: string; clientSecret?: string } | null;
};

export const listMcpServers = () => get<List<McpServerView>>('/v1/mcp/servers');

export const addMcpServer = (input: McpServerInput) => post<McpServerView>('/v1/mcp/servers', input);

export const editMcpServer = (name: string, changes: McpServerInput) =>
	patch<McpServerView>(`/v1/mcp/servers/${segment(name)}`, changes);

export const removeMcpServer = (name: string) => del<Deleted>(`/v1/mcp/servers/${segment(name)}`);

/** What the owner opens to sign in to a remote server with OAuth. */
export type McpSignIn = { authorizationUrl: string; redirectUri: string; expiresAt: string };

export const startMcpSignIn = (name: string) => post<McpSignIn>(`/v1/mcp/servers/${segment(name)}/oauth/start`);

export const restartMcpServer = (name: string) => post<McpServerView>(`/v1/mcp/servers/${segment(name)}/restart`);

/** `NAME=value` lines (an environment) as an object; blank lines skipped. */
export function parseEnv(text: string): Record<string, string> {
	const env: Record<string, string> = {};
	for (const line of text.split('\n')) {
		if (!line.trim()) continue;
		const at = line.indexOf('=');
		if (at <= 0) throw new Error(`environment line ${JSON.stringify(line.trim())} needs the form NAME=value`);
		env[line.slice(0, at).trim()] = line.slice(at + 1);
	}
	return env;
}
