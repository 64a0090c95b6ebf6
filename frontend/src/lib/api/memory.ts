// /v1/memory: files (list, read, write with If-Match), search, index status.
import { get, pathOf, put, query } from './client';
import type { FileContent, FileInfo, List, MemoryStatus, SearchMode, SearchResults, WriteOutcome } from './types';

export const listFiles = (agent: string) => get<List<FileInfo>>(`/v1/memory/files${query({ agent })}`);

export const readFile = (agent: string, path: string) =>
	get<FileContent>(`/v1/memory/files/${pathOf(agent)}/${pathOf(path)}`);

/**
 * Replaces a file only if it is still the version `etag` names: when someone
 * else saved it since, the server answers 412 and this rejects with an
 * ApiError whose `isConflict` is true (nothing is overwritten).
 */
export const writeFile = (agent: string, path: string, content: string, etag: string) =>
	put<WriteOutcome>(
		`/v1/memory/files/${pathOf(agent)}/${pathOf(path)}`,
		{ content },
		{ headers: { 'if-match': `"${etag}"` } }
	);

export const search = (params: { q: string; mode: SearchMode; agent: string; limit?: number }) =>
	get<SearchResults>(`/v1/memory/search${query({ limit: 10, ...params })}`);

export const memoryStatus = () => get<MemoryStatus>('/v1/memory/status');
