// /v1/mcp/servers: the MCP servers whose tools agents use, as this replica's clients see them.
import { get } from './client';
import type { List, McpServerView } from './types';

export const listMcpServers = () => get<List<McpServerView>>('/v1/mcp/servers');
