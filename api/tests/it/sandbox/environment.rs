//! Issue 37, point 11: what a command inherits. The gateway runs with
//! credentials under names no suffix rule knows (`PGPASSWORD`, `MYSQL_PWD`,
//! `*_APIKEY`, `DATABASE_URL`, a proxy URL with a password) and the sockets
//! of the user's session; `exec` and an MCP stdio server (its environment
//! read from `/proc`) get the allow list only, plus what the server's config
//! names.

use std::collections::BTreeMap;

use super::*;
use crate::harness::services::binary;

const CREDENTIALS: &[(&str, &str)] = &[
    ("PGPASSWORD", "pg-secret-1"),
    ("MYSQL_PWD", "mysql-secret-2"),
    ("PAYMENTS_APIKEY", "apikey-secret-3"),
    ("DATABASE_URL", "postgres://app:db-secret-4@db/app"),
    ("HTTPS_PROXY", "http://user:proxy-secret-5@proxy:3128"),
    ("SSH_AUTH_SOCK", "/tmp/ssh-secret-6/agent.1"),
    ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus-secret-7"),
    ("XDG_RUNTIME_DIR", "/run/user/0-secret-8"),
];
const KEPT: &[(&str, &str)] = &[("LANG", "C.UTF-8"), ("TZ", "Europe/Berlin"), ("LC_TIME", "C")];

/// `/proc/{pid}/environ` as a map.
fn environ(pid: u64) -> BTreeMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            String::from_utf8_lossy(kv)
                .split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

#[tokio::test]
async fn commands_and_mcp_servers_get_the_allow_listed_environment() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                "list": [{ "id": "main", "default": true }],
            },
            "mcp": { "servers": { "everything": {
                "command": binary("MCP_EVERYTHING_BIN"), "args": ["stdio"],
                "env": { "NAMED_FOR_SERVER": "named-value" },
            } } },
        }))
        .build();
    let env: Vec<(&str, &str)> = CREDENTIALS.iter().chain(KEPT).copied().collect();
    let onyx = Onyx::start(Some(&config), &env).await;

    let out = exec(&onyx, "env").await;
    assert!(out.contains("exit code 0") && out.contains("PATH="), "{out}");
    for (name, value) in KEPT {
        assert!(out.contains(&format!("{name}={value}")), "{name} is kept: {out}");
    }
    for (name, value) in CREDENTIALS {
        assert!(
            !out.contains(name) && !out.contains(value),
            "{name} reached exec: {out}"
        );
    }

    // The MCP server, started on the first run that offers its tools.
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: mcp__everything__echo {"message": "up"} ; answer"#,
        )
        .await;
    assert!(answer.contains("up"), "{answer}");
    let servers = onyx.get_json("/v1/mcp/servers").await;
    let pid = servers["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "everything")
        .and_then(|s| s["pid"].as_u64())
        .unwrap_or_else(|| panic!("{servers}"));
    let server_env = environ(pid);
    assert_eq!(
        server_env.get("NAMED_FOR_SERVER").map(String::as_str),
        Some("named-value")
    );
    for (name, value) in KEPT {
        assert_eq!(server_env.get(*name).map(String::as_str), Some(*value), "{name}");
    }
    for (name, _) in CREDENTIALS {
        assert!(
            !server_env.contains_key(*name),
            "{name} reached the MCP server: {server_env:?}"
        );
    }
    assert!(
        !server_env.keys().any(|k| k.starts_with("ONYX_")),
        "{server_env:?}"
    );
}
