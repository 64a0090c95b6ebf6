//! OAuth 2.1 sign-in for a remote MCP server, through the real binary,
//! against the stand-in authorization server and the MCP server it protects
//! (`onyx_test_fakes::mcp_oauth`): the server waits in `needs_sign_in`, the
//! sign-in is followed as a browser would, the tools work with the token,
//! a tampered or replayed state is refused, the short-lived token is
//! refreshed, and no answer ever carries a token.

use serde_json::{Value, json};

use crate::harness::*;

const MASTER_KEY: &str = "4b1c0b6a9e8d7c6b5a4938271605f4e3d2c1b0a99887766554433221100ffe07";

async fn server(onyx: &Onyx, name: &str) -> Option<Value> {
    let list = onyx.get_json("/v1/mcp/servers").await;
    list["data"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

async fn stats(servers: &onyx_test_fakes::mcp_oauth::OAuthServers) -> Value {
    reqwest::get(format!("{}/_fake/oauth/stats", servers.auth_server.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_remote_server_signs_in_with_oauth_and_its_token_is_refreshed() {
    let fakes = Fakes::start().await;
    // Access tokens live 8 s: Onyx refreshes them about 2 s before they expire.
    let oauth = onyx_test_fakes::mcp_oauth::start(8).await.unwrap();
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": { "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                        "list": [ { "id": "main", "default": true } ] },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[("ONYX_MASTER_KEY", MASTER_KEY)]).await;

    let (status, created) = reply(
        onyx.post("/v1/mcp/servers")
            .json(&json!({"name": "guarded", "url": oauth.mcp_url(), "trust": "read"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let waiting = wait_until(secs(30), "the server asks for a sign-in", async || {
        server(&onyx, "guarded")
            .await
            .filter(|s| s["state"] == "needs_sign_in")
    })
    .await;
    assert!(
        waiting["lastError"].as_str().unwrap().contains("sign-in"),
        "{waiting}"
    );

    let (status, started) = reply(onyx.post("/v1/mcp/servers/guarded/oauth/start")).await;
    assert_eq!(status, 200, "{started}");
    let authorization = url::Url::parse(started["authorizationUrl"].as_str().unwrap()).unwrap();
    let query: std::collections::HashMap<String, String> = authorization.query_pairs().into_owned().collect();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["resource"], oauth.mcp_url());
    assert!(query["state"].len() >= 22, "{query:?}");
    assert_eq!(
        started["redirectUri"],
        format!("{}/v1/mcp/oauth/callback", onyx.url)
    );

    // The browser: the authorization server approves and sends it back to Onyx.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let approved = browser.get(authorization.clone()).send().await.unwrap();
    assert_eq!(approved.status(), 302);
    let callback = url::Url::parse(approved.headers()["location"].to_str().unwrap()).unwrap();
    assert!(
        callback
            .as_str()
            .starts_with(&format!("{}/v1/mcp/oauth/callback?", onyx.url)),
        "{callback}"
    );

    // A tampered state is refused, and does not use up the real one.
    let mut tampered = callback.clone();
    let pairs: Vec<(String, String)> = callback.query_pairs().into_owned().collect();
    tampered
        .query_pairs_mut()
        .clear()
        .extend_pairs(pairs.iter().map(|(k, v)| {
            if k == "state" {
                (k.clone(), format!("{v}x"))
            } else {
                (k.clone(), v.clone())
            }
        }));
    let refused = browser
        .get(tampered)
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("unknown or was already used")
    );

    // The real answer, from the authorization server's page (another site).
    let signed = browser
        .get(callback.clone())
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), 200);
    assert_eq!(signed.headers()["referrer-policy"], "no-referrer");
    assert!(
        signed
            .text()
            .await
            .unwrap()
            .contains("signed in to the MCP server guarded")
    );

    // Replayed: refused, and no second code exchange happened.
    let replayed = browser.get(callback.clone()).send().await.unwrap();
    assert_eq!(replayed.status(), 400);
    assert_eq!(stats(&oauth).await["codeExchanges"], 1);

    let ready = wait_until(secs(30), "the server is ready with its token", async || {
        server(&onyx, "guarded").await.filter(|s| s["state"] == "ready")
    })
    .await;
    assert_eq!(ready["tools"][0]["exposedAs"], "mcp__guarded__whoami", "{ready}");
    let answer = onyx
        .agent_answer("main", "script: mcp__guarded__whoami {} ; answer")
        .await;
    assert!(answer.contains("signed in as OAuth client client-"), "{answer}");

    // The short-lived token is refreshed before it expires, and the tools still work.
    wait_until(secs(30), "the access token is refreshed", async || {
        (stats(&oauth).await["refreshes"].as_u64() >= Some(1)).then_some(())
    })
    .await;
    wait_until(
        secs(30),
        "the server reconnects with the fresh token",
        async || server(&onyx, "guarded").await.filter(|s| s["state"] == "ready"),
    )
    .await;
    let before = stats(&oauth).await["toolCalls"].as_u64().unwrap();
    let answer = onyx
        .agent_answer("main", "script: mcp__guarded__whoami {} ; answer")
        .await;
    assert!(answer.contains("signed in as OAuth client"), "{answer}");
    let after = stats(&oauth).await;
    assert!(after["toolCalls"].as_u64().unwrap() > before, "{after}");
    // The token went only to the MCP server, never to the authorization server.
    assert_eq!(after["bearerAtAuthServer"], 0, "{after}");
    assert_eq!(after["refusedGrants"], 0, "{after}");

    // No answer names a token.
    let view = onyx.get_json("/v1/mcp/servers").await.to_string();
    assert!(!view.to_lowercase().contains("token\""), "{view}");

    // Removing the server deletes its sign-in: added again, it asks again.
    assert_eq!(reply(onyx.delete("/v1/mcp/servers/guarded")).await.0, 200);
    let (status, _) = reply(
        onyx.post("/v1/mcp/servers")
            .json(&json!({"name": "guarded", "url": oauth.mcp_url(), "trust": "read"})),
    )
    .await;
    assert_eq!(status, 201);
    wait_until(
        secs(30),
        "the re-added server asks for a sign-in again",
        async || {
            server(&onyx, "guarded")
                .await
                .filter(|s| s["state"] == "needs_sign_in")
        },
    )
    .await;

    // An unknown server is named as such.
    let (status, body) = reply(onyx.post("/v1/mcp/servers/nobody/oauth/start")).await;
    assert_eq!(status, 404, "{body}");
}

/// Waits until `name` is ready, then has the agent call its `whoami`: the
/// server must see `client`'s token.
async fn ready_and_signed_in(onyx: &Onyx, name: &str, client: &str) {
    wait_until(secs(30), &format!("{name} is ready"), async || {
        server(onyx, name).await.filter(|s| s["state"] == "ready")
    })
    .await;
    let answer = onyx
        .agent_answer("main", &format!("script: mcp__{name}__whoami {{}} ; answer"))
        .await;
    assert!(
        answer.contains(&format!("signed in as OAuth client {client}")),
        "{answer}"
    );
}

#[tokio::test]
async fn a_configured_client_signs_in_without_registration_keeps_its_tokens_over_a_restart_and_a_revocation_asks_again()
 {
    let fakes = Fakes::start().await;
    // Tokens live an hour: only a refused call can reveal the revocation below.
    let oauth = onyx_test_fakes::mcp_oauth::start_with(onyx_test_fakes::mcp_oauth::Options {
        ttl_seconds: 3600,
        registration: false,
    })
    .await
    .unwrap();
    let secret = "by-hand-secret-5f3a9c";
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": { "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                        "list": [ { "id": "main", "default": true } ] },
            "mcp": { "servers": {
                "byhand": { "url": oauth.mcp_url(), "trust": "read",
                            "oauth": { "clientId": "onyx-by-hand", "clientSecret": secret } },
                "unconfigured": { "url": oauth.mcp_url(), "trust": "read" },
            } },
        }))
        .build();
    let env = [("ONYX_MASTER_KEY", MASTER_KEY)];
    let onyx = Onyx::start(Some(&config), &env).await;
    let waiting = wait_until(secs(30), "the server asks for a sign-in", async || {
        server(&onyx, "byhand")
            .await
            .filter(|s| s["state"] == "needs_sign_in")
    })
    .await;
    assert_eq!(waiting["oauthClientId"], "onyx-by-hand", "{waiting}");
    let listed = onyx.get_json("/v1/mcp/servers").await.to_string();
    assert!(!listed.contains(secret), "{listed}");

    // Without a configured client, the server with no registration is named as the reason.
    let (status, body) = reply(onyx.post("/v1/mcp/servers/unconfigured/oauth/start")).await;
    assert_eq!(status, 502, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no dynamic client registration") && message.contains("oauth.clientId"),
        "{message}"
    );

    let redirect = format!("{}/v1/mcp/oauth/callback", onyx.url);
    oauth.fake.add_client("onyx-by-hand", Some(secret), &redirect);
    let (status, started) = reply(onyx.post("/v1/mcp/servers/byhand/oauth/start")).await;
    assert_eq!(status, 200, "{started}");
    let authorization = url::Url::parse(started["authorizationUrl"].as_str().unwrap()).unwrap();
    assert!(
        authorization
            .query_pairs()
            .any(|(k, v)| k == "client_id" && v == "onyx-by-hand"),
        "{authorization}"
    );
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let approved = browser.get(authorization).send().await.unwrap();
    assert_eq!(approved.status(), 302);
    let callback = approved.headers()["location"].to_str().unwrap().to_string();
    let signed = browser.get(&callback).send().await.unwrap();
    assert_eq!(signed.status(), 200, "{}", signed.text().await.unwrap());
    ready_and_signed_in(&onyx, "byhand", "onyx-by-hand").await;
    let counted = stats(&oauth).await;
    assert_eq!(counted["registrations"], 0, "{counted}");
    assert_eq!(counted["codeExchanges"], 1, "{counted}");

    // A restart keeps the sign-in: ready again with no second code exchange.
    let (dir, _) = onyx.stop().await;
    let onyx = Onyx::start_in(dir, Some(&config), &env).await;
    ready_and_signed_in(&onyx, "byhand", "onyx-by-hand").await;
    assert_eq!(stats(&oauth).await["codeExchanges"], 1);

    // The owner revokes Onyx at the authorization server: the next call is
    // refused, the refresh too, and the server asks for a sign-in again.
    assert!(
        reqwest::Client::new()
            .post(format!("{}/_fake/oauth/revoke", oauth.auth_server.url()))
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let answer = onyx
        .agent_answer("main", "script: mcp__byhand__whoami {} ; answer")
        .await;
    assert!(!answer.contains("signed in as OAuth client"), "{answer}");
    let asked = wait_until(secs(30), "the revoked server asks for a sign-in", async || {
        server(&onyx, "byhand")
            .await
            .filter(|s| s["state"] == "needs_sign_in")
    })
    .await;
    assert!(
        asked["lastError"].as_str().unwrap().contains("sign in"),
        "{asked}"
    );
    let after = stats(&oauth).await;
    assert!(after["refusedGrants"].as_u64().unwrap() >= 1, "{after}");
    assert_eq!(after["bearerAtAuthServer"], 0, "{after}");
}
