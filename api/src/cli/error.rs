//! Why an offline command (`onyx keys`, `onyx reindex`, `onyx backup`) failed: each
//! domain's own error, composed; `main` prints the message (with a hint
//! where one helps) and exits non-zero.

use crate::auth::KeyError;
use crate::config::ConfigError;
use crate::memory::MemoryError;
use crate::providers::ProviderError;
use crate::sessions::SessionError;
use crate::storage::{DbError, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The embedded database is held by a running `onyx serve`.
    #[error("{0}\n(the embedded database is in use: stop `onyx serve`, or use the HTTP API)")]
    DatabaseInUse(DbError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    ObjectKey(#[from] crate::storage::InvalidKey),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// Boxed: a provider's error is large, and every `CliError` would carry its size.
    #[error("memory.embedder: {0}")]
    Embedder(Box<ProviderError>),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Secret(#[from] crate::secrets::SecretError),
    #[error("{0}")]
    Io(String),
    #[error("stored providers: {0}")]
    Providers(#[from] crate::storage::SpecError),
}

impl From<ProviderError> for CliError {
    fn from(err: ProviderError) -> Self {
        Self::Embedder(Box::new(err))
    }
}

/// The exit status of an offline command; its error on stderr, named.
pub fn exit_code(command: &str, result: Result<(), CliError>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("onyx {command}: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Connecting failed: says so plainly when `onyx serve` holds the lock.
pub fn connect_error(err: DbError) -> CliError {
    if err.to_string().contains("locked") {
        CliError::DatabaseInUse(err)
    } else {
        CliError::Db(err)
    }
}
