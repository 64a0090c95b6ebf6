// What the UI reads about the gateway itself: /health, /v1/status,
// /v1/models, and the login routes (providers: providers.ts).
import { get, post } from './client';
import type { GatewayStatus, Health, List, Me, ModelView } from './types';

export const health = () => get<Health>('/health');

export const gatewayStatus = () => get<GatewayStatus>('/v1/status');

export const listModels = () => get<List<ModelView>>('/v1/models');

export const me = () => get<Me>('/auth/me');

export const login = (password: string) => post<{ ok: boolean }>('/auth/login', { password });

export const logout = () => post<{ ok: boolean }>('/auth/logout');
