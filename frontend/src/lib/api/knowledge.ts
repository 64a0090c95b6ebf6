// /v1/knowledge (admin): the knowledge sources (menos) with what /health
// leaves out: the address, the key Onyx signs with, what menos last said.
import { get } from './client';
import type { KnowledgeSources } from './types';

export const knowledgeSources = () => get<KnowledgeSources>('/v1/knowledge');
