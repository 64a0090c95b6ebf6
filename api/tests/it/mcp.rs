//! Onyx's MCP server at `/mcp` at the JSON-RPC level: lifecycle messages,
//! notifications, batches, errors, and agent scopes (a key scoped to an agent
//! works as that agent and cannot name another). The official SDK clients
//! drive it in tests/sdk (Python and TypeScript).

use crate::harness::*;
use serde_json::{Value, json};

async fn rpc(onyx: &Onyx, key: &str, body: Value) -> (u16, Value) {
    reply(onyx.with_key("POST", "/mcp", key).json(&body)).await
}

#[tokio::test]
async fn mcp_speaks_json_rpc_and_respects_agent_scopes() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .agent(json!({"id": "main", "default": true}))
        .agent(json!({"id": "ops"}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let (status, init) = rpc(&onyx, ONYX_KEY, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})).await;
    assert_eq!(status, 200, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    let (status, _) = rpc(
        &onyx,
        ONYX_KEY,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202);
    let (_, batch) = rpc(&onyx, ONYX_KEY, json!([
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "id": "b", "method": "resources/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "exec", "arguments": {}}},
    ])).await;
    assert_eq!(batch[0]["result"], json!({}), "{batch}");
    assert_eq!(batch[1]["error"]["code"], -32601, "{batch}");
    assert_eq!(
        batch[2]["error"]["code"], -32602,
        "only the agent tools are offered: {batch}"
    );
    assert_eq!(reply(onyx.get("/mcp")).await.0, 405);

    let (_, created) = reply(
        onyx.post("/v1/keys")
            .json(&json!({"name": "ops", "agents": ["ops"]})),
    )
    .await;
    let ops_key = created["key"].as_str().unwrap();
    let write = |agent: Option<&str>| {
        let mut arguments = json!({"path": "MEMORY.md", "mode": "append", "content": "ops rotates the backup disks on Fridays"});
        if let Some(agent) = agent {
            arguments["agent"] = json!(agent);
        }
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_write", "arguments": arguments}})
    };
    let (status, wrote) = rpc(&onyx, ops_key, write(None)).await;
    assert_eq!(status, 200, "{wrote}");
    assert_eq!(wrote["result"]["isError"], false, "{wrote}");
    let file = onyx.get_json("/v1/memory/files/ops/MEMORY.md").await;
    assert!(
        file["content"].as_str().unwrap().contains("backup disks"),
        "the scoped key's own agent: {file}"
    );
    let (status, refused) = rpc(&onyx, ops_key, write(Some("main"))).await;
    assert_eq!(status, 403, "{refused}");
    let (status, _) = rpc(&onyx, ops_key, write(Some("ops"))).await;
    assert_eq!(status, 200);
}
