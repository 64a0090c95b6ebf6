//! Real services for storage tests: an S3 server (`tests/s3-server`: s3s-fs,
//! which checks SigV4 signatures and conditional writes, with its writes
//! taking turns so conditions are atomic as on S3) and a SurrealDB server,
//! each started on a free port from binaries the workspace builds. Their
//! paths come from `S3_TEST_SERVER_BIN` and `SURREAL_TEST_SERVER_BIN`.

use std::process::Stdio;

use tokio::process::{Child, Command};

use super::wait::{secs, wait_until};

pub const S3_ACCESS_KEY: &str = "onyx-test-access";
pub const S3_SECRET_KEY: &str = "onyx-test-secret-key-0123456789";

pub struct Service {
    pub child: Child,
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
}

fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A program `tests/run` installs, named by an environment variable.
pub fn binary(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run the suite through ./tests/run"))
}

impl Service {
    /// Starts `command` (output discarded) and waits until `name` listens on `addr`.
    async fn spawn(
        mut command: Command,
        name: &str,
        addr: std::net::SocketAddr,
        dir: tempfile::TempDir,
    ) -> Self {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        wait_until(secs(30), &format!("{name} listens on {addr}"), async || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{name} exited early: {status}");
            }
            tokio::net::TcpStream::connect(addr).await.ok().map(drop)
        })
        .await;
        Self { child, addr, dir }
    }

    /// The reference MCP server (`@modelcontextprotocol/server-everything`,
    /// installed by `tests/run`) over HTTP: `streamableHttp` (at `/mcp`) or
    /// `sse` (the older transport, at `/sse`).
    pub async fn mcp_everything(mode: &str) -> Self {
        let addr = free_addr();
        let mut command = Command::new(binary("MCP_EVERYTHING_BIN"));
        command.arg(mode).env("PORT", addr.port().to_string());
        let name = format!("server-everything ({mode})");
        Self::spawn(command, &name, addr, tempfile::tempdir().unwrap()).await
    }

    pub async fn s3() -> Self {
        Self::s3_at(tempfile::tempdir().unwrap(), free_addr()).await
    }

    /// Stops the server, keeping its data dir and address for [`Service::s3_at`].
    pub async fn stop(mut self) -> (tempfile::TempDir, std::net::SocketAddr) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
        (self.dir, self.addr)
    }

    pub async fn s3_at(dir: tempfile::TempDir, addr: std::net::SocketAddr) -> Self {
        let mut command = Command::new(binary("S3_TEST_SERVER_BIN"));
        command
            .args(["--host", "127.0.0.1", "--port", &addr.port().to_string()])
            .args(["--access-key", S3_ACCESS_KEY, "--secret-key", S3_SECRET_KEY])
            .arg(dir.path());
        Self::spawn(command, "s3", addr, dir).await
    }

    pub async fn surreal() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let addr = free_addr();
        let mut command = Command::new(binary("SURREAL_TEST_SERVER_BIN"));
        command
            .args([
                "start",
                "--bind",
                &addr.to_string(),
                "--user",
                "root",
                "--pass",
                "root",
                "memory",
            ])
            .env("SURREAL_LOG", "warn");
        let server = Self::spawn(command, "surreal", addr, dir).await;
        // It accepts connections before it serves them (503 meanwhile).
        let health = format!("http://{addr}/health");
        wait_until(secs(30), &format!("surreal answers at {health}"), async || {
            let response = reqwest::get(&health).await.ok()?;
            response.status().is_success().then_some(())
        })
        .await;
        server
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}
