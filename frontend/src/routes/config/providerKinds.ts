// What the provider form asks for each provider type: the config file's
// fields that type reads (docs/configuration.md), and what they mean there.

import type { ProviderType } from '$lib/api/providers';

/** Fields only some types read; the rest (models, timeout, retries) every type has. */
export type KindField = 'baseUrl' | 'apiKey' | 'headers' | 'apiVersion' | 'deployments' | 'vertex' | 'region' | 'command';

export type ProviderKind = {
	type: ProviderType;
	label: string;
	fields: KindField[];
	/** Whether `baseUrl` must be given (it has no default). */
	needsBaseUrl?: boolean;
	/** What the key box holds for this type. */
	keyLabel?: string;
	baseUrlHint?: string;
	/** A subscription signs in through its vendor CLI instead of a key. */
	subscription?: boolean;
};

export const PROVIDER_KINDS: ProviderKind[] = [
	{ type: 'openai', label: 'OpenAI-compatible', fields: ['baseUrl', 'apiKey', 'headers'], baseUrlHint: 'https://api.example.com/v1 (blank: the type\'s default)' },
	{ type: 'anthropic', label: 'Anthropic', fields: ['baseUrl', 'apiKey', 'headers', 'apiVersion'], baseUrlHint: 'blank: https://api.anthropic.com' },
	{ type: 'ollama', label: 'Ollama', fields: ['baseUrl', 'apiKey', 'headers'], baseUrlHint: 'blank: OLLAMA_HOST or http://127.0.0.1:11434' },
	{
		type: 'azure',
		label: 'Azure OpenAI',
		fields: ['baseUrl', 'apiKey', 'headers', 'apiVersion', 'deployments'],
		needsBaseUrl: true,
		baseUrlHint: 'https://<resource>.openai.azure.com'
	},
	{ type: 'gemini', label: 'Google Gemini API', fields: ['baseUrl', 'apiKey', 'headers'], baseUrlHint: 'blank: https://generativelanguage.googleapis.com' },
	{
		type: 'vertex',
		label: 'Google Vertex AI',
		fields: ['baseUrl', 'apiKey', 'headers', 'vertex'],
		keyLabel: 'Access token (blank with a key file)',
		baseUrlHint: 'blank: the location\'s endpoint'
	},
	{
		type: 'bedrock',
		label: 'AWS Bedrock',
		fields: ['baseUrl', 'apiKey', 'region'],
		keyLabel: 'Bedrock API key (blank: the AWS credential chain)',
		baseUrlHint: 'blank: the region\'s endpoint'
	},
	{ type: 'claude-subscription', label: 'Claude subscription (Claude Code)', fields: ['command'], subscription: true },
	{ type: 'codex', label: 'ChatGPT subscription (Codex)', fields: ['command'], subscription: true },
	{ type: 'copilot', label: 'GitHub Copilot subscription', fields: ['command'], subscription: true }
];

export const kindOf = (type: string): ProviderKind =>
	PROVIDER_KINDS.find((k) => k.type === type) ?? PROVIDER_KINDS[0];

export const isSubscription = (type: string) => !!PROVIDER_KINDS.find((k) => k.type === type)?.subscription;

/** `model = deployment` lines (Azure) as an object; blank lines skipped. */
export function parseDeployments(text: string): Record<string, string> {
	const deployments: Record<string, string> = {};
	for (const line of text.split('\n')) {
		if (!line.trim()) continue;
		const at = line.indexOf('=');
		if (at <= 0) throw new Error(`deployment line ${JSON.stringify(line.trim())} needs the form model = deployment`);
		deployments[line.slice(0, at).trim()] = line.slice(at + 1).trim();
	}
	return deployments;
}

export const formatDeployments = (deployments: Record<string, string>) =>
	Object.entries(deployments)
		.map(([model, deployment]) => `${model} = ${deployment}`)
		.join('\n');
