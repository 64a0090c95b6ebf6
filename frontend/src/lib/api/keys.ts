// /v1/keys (admin): create (the key is shown once), list, revoke.
import { del, get, post, segment } from './client';
import type { CreateKey, CreatedKey, KeyRevoked, List, StoredKey } from './types';

export const listKeys = () => get<List<StoredKey>>('/v1/keys');

export const createKey = (key: CreateKey) => post<CreatedKey>('/v1/keys', key);

export const revokeKey = (id: string) => del<KeyRevoked>(`/v1/keys/${segment(id)}`);
