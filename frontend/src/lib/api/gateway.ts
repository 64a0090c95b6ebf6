// What the UI reads about the gateway itself: /health, /v1/status,
// /v1/providers (with a live test), /v1/models, and the login routes.
import { get, post, segment } from './client';
import type { DependencyHealth, GatewayStatus, Health, List, Me, ModelView, ProviderSummary } from './types';

export const health = () => get<Health>('/health');

export const gatewayStatus = () => get<GatewayStatus>('/v1/status');

export const listProviders = () => get<List<ProviderSummary>>('/v1/providers');

export const testProvider = (name: string) => post<DependencyHealth>(`/v1/providers/${segment(name)}/test`);

export const listModels = () => get<List<ModelView>>('/v1/models');

export const me = () => get<Me>('/auth/me');

export const login = (password: string) => post<{ ok: boolean }>('/auth/login', { password });

export const logout = () => post<{ ok: boolean }>('/auth/logout');
