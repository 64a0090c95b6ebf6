//! The real binary as an unprivileged user (`nobody`, through `setpriv`),
//! the way the sandbox's attacks were confirmed: its home and data dir owned
//! by that user, the binary linked (or copied) into a fresh 0755 folder it
//! can reach.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Onyx, Stderr};

pub const NOBODY_UID: u32 = 65534;
pub const NOBODY_GID: u32 = 65534;

/// Who runs the gateway in a sandbox test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    Root,
    Nobody,
    /// Root of a user namespace that may make no namespace at all (its
    /// `max_user_namespaces` is 0, its capabilities are dropped) and join no
    /// cgroup: a host where neither a PID nor a network namespace can be had.
    WithoutNamespaces,
}

/// Hands `path` (and everything beneath it) to `nobody`.
pub fn give_to_nobody(path: &Path) {
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{NOBODY_UID}:{NOBODY_GID}")])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "chown {}", path.display());
}

/// The onyx binary in a fresh 0755 folder beneath `home` that `nobody` can reach.
fn reachable_binary(home: &Path) -> PathBuf {
    let binary = std::env::var("ONYX_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_onyx").into());
    let dir = home.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("onyx");
    if std::fs::hard_link(&binary, &copy).is_err() {
        std::fs::copy(&binary, &copy).unwrap();
    }
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

impl Onyx {
    /// Starts `onyx serve` as `who` (see [`Onyx::start`]).
    pub async fn start_as(who: RunAs, config: Option<&str>, env: &[(&str, &str)]) -> Self {
        if who == RunAs::Root {
            return Self::start(config, env).await;
        }
        let dir = tempfile::tempdir().unwrap();
        let plain = Self::command(dir.path(), env);
        let mut cmd = match who {
            RunAs::Root | RunAs::Nobody => {
                let binary = reachable_binary(dir.path());
                std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
                give_to_nobody(dir.path());
                let mut cmd = tokio::process::Command::new("setpriv");
                cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
                    .arg(&binary);
                cmd
            }
            RunAs::WithoutNamespaces => {
                let binary = plain.as_std().get_program().to_owned();
                let mut cmd = tokio::process::Command::new("unshare");
                cmd.args([
                    "--user",
                    "--map-root-user",
                    "sh",
                    "-c",
                    r#"echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --inh-caps=-all --bounding-set=-all -- "$0" "$@""#,
                ])
                .arg(binary);
                cmd
            }
        };
        // The environment `command` prepared, for the binary under the wrapper.
        for (name, value) in plain.as_std().get_envs() {
            match value {
                Some(value) => cmd.env(name, value),
                None => cmd.env_remove(name),
            };
        }
        // The config file `launch` writes as root is readable by nobody (0644).
        Self::launch(dir, config, cmd, Stderr::Drained)
            .await
            .unwrap_or_else(|(code, stderr)| panic!("onyx ({who:?}) failed to start ({code:?}): {stderr}"))
    }

    /// The agent `agent`'s workspace folder.
    pub fn workspace(&self, agent: &str) -> PathBuf {
        self.dir.path().join("data/workspaces").join(agent)
    }
}
