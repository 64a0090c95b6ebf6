//! `onyx-fake-upstream`: runs the fake OpenAI (and Azure OpenAI), Anthropic, Ollama, Gemini (and Vertex AI) and Bedrock servers for
//! SDK tests and benchmarks, prints their base URLs as one JSON line, and runs
//! until killed. Ports: `--openai-port`, `--anthropic-port`, `--ollama-port`, `--gemini-port`,
//! `--bedrock-port` (0 = any free port); the API key: `--key` (default the fakes' default key).
//! `--menos-authorized-keys FILE` (and `--menos-port`) also starts the menos
//! stand-in, trusting the ed25519 keys of that authorized_keys file. The
//! OAuth-protected MCP server and its authorization server (`mcp_oauth`,
//! with dynamic registration, tokens for an hour) always run.

use std::process::ExitCode;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn port(name: &str) -> u16 {
    arg(name).and_then(|p| p.parse().ok()).unwrap_or(0)
}

#[tokio::main]
async fn main() -> ExitCode {
    let key = arg("--key").unwrap_or_else(|| onyx_test_fakes::DEFAULT_KEY.to_string());
    let started = async {
        let openai = onyx_test_fakes::openai::start(Some(key.clone()), port("--openai-port")).await?;
        let anthropic =
            onyx_test_fakes::anthropic::start(Some(key.clone()), port("--anthropic-port")).await?;
        let ollama = onyx_test_fakes::ollama::start(port("--ollama-port")).await?;
        let gemini = onyx_test_fakes::gemini::start(Some(key.clone()), port("--gemini-port")).await?;
        let bedrock = onyx_test_fakes::bedrock::start(Some(key.clone()), port("--bedrock-port")).await?;
        let oauth = onyx_test_fakes::mcp_oauth::start(3600).await?;
        Ok::<_, std::io::Error>((openai, anthropic, ollama, gemini, bedrock, oauth))
    };
    // The menos stand-in, trusting the keys of an authorized_keys file.
    let menos = match arg("--menos-authorized-keys") {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(keys) => match onyx_test_fakes::menos::start(&keys, port("--menos-port")).await {
                Ok(server) => Some(server),
                Err(err) => {
                    eprintln!("onyx-fake-upstream: menos: {err}");
                    return ExitCode::FAILURE;
                }
            },
            Err(err) => {
                eprintln!("onyx-fake-upstream: {path}: {err}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let (openai, anthropic, ollama, gemini, bedrock, oauth) = match started.await {
        Ok(servers) => servers,
        Err(err) => {
            eprintln!("onyx-fake-upstream: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{}",
        serde_json::json!({
            "openai": format!("{}/v1", openai.url()),
            // The same server as an Azure OpenAI resource endpoint.
            "azure": openai.url(),
            "anthropic": anthropic.url(),
            "ollama": ollama.url(),
            // The Gemini API and Vertex AI (whose static access token is the key).
            "gemini": gemini.url(),
            // Bedrock: SigV4 with these credentials, or the key as a Bedrock API key.
            "bedrock": bedrock.url(),
            "awsAccessKeyId": onyx_test_fakes::bedrock::ACCESS_KEY_ID,
            "awsSecretAccessKey": onyx_test_fakes::bedrock::SECRET_ACCESS_KEY,
            "key": key,
            // With --menos-authorized-keys: the menos stand-in.
            "menos": menos.as_ref().map(|m| m.url()),
            // An MCP server behind OAuth 2.1, and the authorization server that signs in to it.
            "mcpOAuth": { "mcp": oauth.mcp_url(), "authServer": oauth.auth_server.url() },
        })
    );
    let _ = tokio::signal::ctrl_c().await;
    ExitCode::SUCCESS
}
