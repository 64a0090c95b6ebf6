// /v1/providers and /v1/aliases (admin): providers and aliases added here take
// effect at once on every replica; those from the config file are read-only.
// Keys and header values are write-only: the API answers with hints.
import { del, get, patch, post, put, segment } from './client';
import type { AliasView, DependencyHealth, Deleted, List, ProviderView } from './types';

/** The provider types the gateway speaks (the config file's `type`). */
export type ProviderType =
	| 'openai'
	| 'anthropic'
	| 'ollama'
	| 'azure'
	| 'gemini'
	| 'vertex'
	| 'bedrock'
	| 'claude-subscription'
	| 'codex'
	| 'copilot';

/** A provider's fields as the config file writes them (`POST /v1/providers`). */
export type ProviderInput = {
	name?: string;
	type?: ProviderType;
	baseUrl?: string | null;
	apiKey?: string | null;
	headers?: Record<string, string | null> | null;
	timeoutSeconds?: number;
	connectTimeoutSeconds?: number;
	maxRetries?: number;
	models?: string[];
	apiVersion?: string | null;
	/** Azure: model name → deployment. */
	deployments?: Record<string, string | null> | null;
	/** Vertex: the Google Cloud project, location and service-account key file. */
	project?: string | null;
	location?: string | null;
	credentialsFile?: string | null;
	/** Bedrock: the AWS region. */
	region?: string | null;
	/** Subscriptions: the vendor CLI to run (blank: its name on PATH). */
	command?: string | null;
	contextWindow?: number | null;
	responses?: boolean;
};

export const listProviders = () => get<List<ProviderView>>('/v1/providers');

/** A subscription provider's sign-in, read from its CLI's credential files (`GET /v1/subscriptions`). */
export type SubscriptionView = {
	provider: string;
	type: string;
	cli: string;
	connected: boolean;
	expired: boolean;
	account: string | null;
};

export const listSubscriptions = () => get<List<SubscriptionView>>('/v1/subscriptions');

/** A subscription CLI's own sign-in, started from the Config page. */
export type SignInView = {
	provider: string;
	cli: string;
	state: 'waiting' | 'connected' | 'failed' | 'cancelled';
	url: string | null;
	code: string | null;
	accepts_code: boolean;
	message: string | null;
	output: string[];
};

const loginPath = (provider: string) => `/v1/subscriptions/${segment(provider)}/login`;
export const startSignIn = (provider: string) => post<SignInView>(loginPath(provider), {});
export const signInState = (provider: string) => get<SignInView>(loginPath(provider));
export const sendSignInCode = (provider: string, code: string) =>
	post<SignInView>(`${loginPath(provider)}/code`, { code });
export const cancelSignIn = (provider: string) => del<void>(loginPath(provider));

export const addProvider = (input: ProviderInput) => post<ProviderView>('/v1/providers', input);

export const editProvider = (name: string, changes: ProviderInput) =>
	patch<ProviderView>(`/v1/providers/${segment(name)}`, changes);

export const removeProvider = (name: string) => del<Deleted>(`/v1/providers/${segment(name)}`);

export const testProvider = (name: string) => post<DependencyHealth>(`/v1/providers/${segment(name)}/test`);

export const refreshModels = (name: string) => post<List<string>>(`/v1/providers/${segment(name)}/refresh-models`);

export const listAliases = () => get<List<AliasView>>('/v1/aliases');

export const putAlias = (name: string, targets: string[]) => put<AliasView>(`/v1/aliases/${segment(name)}`, { targets });

export const removeAlias = (name: string) => del<Deleted>(`/v1/aliases/${segment(name)}`);

/** Header lines (`Name: value`, one per line) as an object; blank lines skipped. */
export function parseHeaders(text: string): Record<string, string> {
	const headers: Record<string, string> = {};
	for (const line of text.split('\n')) {
		const at = line.indexOf(':');
		if (!line.trim()) continue;
		if (at <= 0) throw new Error(`header line ${JSON.stringify(line.trim())} needs the form Name: value`);
		headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
	}
	return headers;
}

/** A comma- or newline-separated list, trimmed, without empties. */
export const parseList = (text: string) =>
	text
		.split(/[,\n]/)
		.map((s) => s.trim())
		.filter(Boolean);
