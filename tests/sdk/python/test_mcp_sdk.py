"""Onyx's /mcp driven by the official MCP Python SDK client (streamable HTTP):
list the tools, write memory, search it, and see the write through the REST API."""

import asyncio

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import ONYX_KEY

AUTH = {"Authorization": f"Bearer {ONYX_KEY}"}


async def session_calls(base):
    async with (
        httpx.AsyncClient(headers=AUTH) as http,
        # SDK 1.x yields (read, write, session id), 2.x (read, write).
        streamable_http_client(f"{base}/mcp", http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        init = await session.initialize()
        assert init.server_info.name == "onyx"
        tools = await session.list_tools()
        names = {t.name for t in tools.tools}
        written = await session.call_tool(
            "memory_write",
            {"content": "The boiler service is booked for March 3rd with Keller Heating."},
        )
        found = await session.call_tool("memory_search", {"query": "boiler service Keller"})
        missing = await session.call_tool("memory_get", {"path": "memory/none.md", "agent": "main"})
        unknown_agent = await session.call_tool("list_tasks", {"agent": "ghost"})
        return names, tools, written, found, missing, unknown_agent


def test_mcp_sdk_lists_tools_writes_and_searches_memory(stack):
    names, tools, written, found, missing, unknown_agent = asyncio.run(session_calls(stack))
    assert names == {
        "memory_search", "memory_get", "memory_write", "sessions_list",
        "sessions_history", "send_to_agent", "schedule_task", "list_tasks",
    }
    search = next(t for t in tools.tools if t.name == "memory_search")
    assert "agent" in search.input_schema["properties"]
    assert not written.is_error, written
    assert not found.is_error, found
    assert "Keller" in found.content[0].text
    assert missing.is_error
    assert unknown_agent.is_error and "ghost" in unknown_agent.content[0].text
    # The write is the same memory the REST API (and every other client) sees.
    hits = httpx.get(f"{stack}/v1/memory/search", params={"q": "boiler Keller"}, headers=AUTH).json()
    assert any("Keller" in hit["snippet"] for hit in hits["data"]), hits


def test_mcp_needs_a_key(stack):
    response = httpx.post(f"{stack}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    # A body not sent as JSON never reaches the endpoint (no form post without preflight).
    untyped = httpx.post(f"{stack}/mcp", content=b"{not json", headers=AUTH)
    assert untyped.status_code == 415
    bad = httpx.post(f"{stack}/mcp", content=b"{not json", headers={**AUTH, "content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32700
