//! The data dir's control socket: how `onyx backup` reaches a running
//! `onyx serve` whose embedded database it cannot open (SurrealKV lets one
//! process hold it). `onyx serve` on embedded storage listens on
//! `{dataDir}/control.sock` (mode 0600) and answers only peers running as its
//! own user (`SO_PEERCRED`, checked against the socket file's owner): whoever
//! can connect could read the data dir anyway. One JSON request per line, one
//! JSON answer per line.
//!
//! The one request is an export: the server dumps the database, in one read
//! transaction, to a file the client names, and answers with the counts the
//! backup's manifest carries, read after the dump.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::storage::Db;

/// The socket's file name in the data dir.
pub const SOCKET: &str = "control.sock";
/// The longest line either side reads: requests and answers are small.
const MAX_LINE: usize = 64 * 1024;

/// What a client asks.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlRequest {
    /// Dump the database to `to` (an absolute path that does not exist yet).
    Export { to: PathBuf },
}

/// What the server answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlAnswer {
    Exported(Exported),
    Failed { error: String },
}

/// The database as it was dumped: its schema version and what it holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Exported {
    pub schema_version: u32,
    pub sessions: u64,
    pub memory_files: u64,
    pub memory_chunks: u64,
    pub tasks: u64,
    pub providers: u64,
}

impl Exported {
    /// Dumps `db` to `to` and counts what it holds.
    pub async fn export(db: &Db, to: &Path) -> Result<Self, crate::storage::DbError> {
        db.export_to(to).await?;
        Ok(Self {
            schema_version: db.schema_version().await?,
            sessions: db.count("session").await?,
            memory_files: db.count("memory_file").await?,
            memory_chunks: db.count("memory_chunk").await?,
            tasks: db.count("task").await?,
            providers: db.count("provider").await?,
        })
    }
}

/// A listening control socket; the file goes when this is dropped.
pub struct ControlSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listens on the data dir's control socket for `db`, when `db` is embedded
/// (a database server needs no help: `onyx backup` connects to it itself).
/// A socket left by a process that died is replaced: this process holds the
/// database, so no other `onyx serve` of this data dir is alive.
pub fn listen(db: &Db, data_dir: &Path) -> std::io::Result<Option<ControlSocket>> {
    if db.embedded_dir().is_none() {
        return Ok(None);
    }
    let path = data_dir.join(SOCKET);
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
        _ => {}
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let owner = std::fs::metadata(&path)?.uid();
    let db = db.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let peer = stream.peer_cred().map(|cred| cred.uid()).ok();
            if peer != Some(owner) {
                tracing::warn!(?peer, "control socket: refused a peer of another user");
                continue;
            }
            let db = db.clone();
            tokio::spawn(async move {
                if let Err(err) = answer(stream, &db).await {
                    tracing::warn!(error = %err, "control socket: a request failed");
                }
            });
        }
    });
    Ok(Some(ControlSocket { path, task }))
}

async fn answer(stream: UnixStream, db: &Db) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let line = read_line(read).await?;
    let answer = match serde_json::from_str::<ControlRequest>(&line) {
        Err(err) => ControlAnswer::Failed {
            error: format!("not a control request: {err}"),
        },
        Ok(ControlRequest::Export { to }) if !to.is_absolute() => ControlAnswer::Failed {
            error: format!("export: {} is not an absolute path", to.display()),
        },
        Ok(ControlRequest::Export { to }) => {
            tracing::info!(to = %to.display(), "control socket: exporting the database for a backup");
            match Exported::export(db, &to).await {
                Ok(exported) => ControlAnswer::Exported(exported),
                Err(err) => ControlAnswer::Failed {
                    error: err.to_string(),
                },
            }
        }
    };
    let mut text = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
    text.push('\n');
    write.write_all(text.as_bytes()).await?;
    write.shutdown().await
}

async fn read_line(read: impl tokio::io::AsyncRead + Unpin) -> std::io::Result<String> {
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_LINE as u64));
    reader.read_line(&mut line).await?;
    Ok(line)
}

/// Asks the `onyx serve` holding `data_dir`'s database to dump it to `to`.
pub async fn export_through(data_dir: &Path, to: &Path) -> Result<Exported, String> {
    let path = data_dir.join(SOCKET);
    let stream = UnixStream::connect(&path).await.map_err(|err| {
        format!(
            "the embedded database is in use and the running `onyx serve` did not answer on {}: {err}",
            path.display()
        )
    })?;
    let (read, mut write) = stream.into_split();
    let request = ControlRequest::Export { to: to.to_path_buf() };
    let mut text = serde_json::to_string(&request).map_err(|err| err.to_string())?;
    text.push('\n');
    write
        .write_all(text.as_bytes())
        .await
        .map_err(|err| err.to_string())?;
    let line = read_line(read).await.map_err(|err| err.to_string())?;
    match serde_json::from_str::<ControlAnswer>(&line) {
        Ok(ControlAnswer::Exported(exported)) => Ok(exported),
        Ok(ControlAnswer::Failed { error }) => {
            Err(format!("the running `onyx serve` could not export: {error}"))
        }
        Err(err) => Err(format!("the running `onyx serve` answered {line:?}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_read_back() {
        let text = serde_json::to_string(&ControlRequest::Export {
            to: "/b/x.surql".into(),
        })
        .unwrap();
        assert_eq!(text, r#"{"op":"export","to":"/b/x.surql"}"#);
        let answer = ControlAnswer::Exported(Exported {
            schema_version: 3,
            sessions: 2,
            ..Exported::default()
        });
        let back: ControlAnswer = serde_json::from_str(&serde_json::to_string(&answer).unwrap()).unwrap();
        assert!(matches!(back, ControlAnswer::Exported(e) if e.schema_version == 3 && e.sessions == 2));
    }
}
