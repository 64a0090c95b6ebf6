//! `onyx keys create|list|revoke`: API keys in the database; `onyx keys
//! rotate-master` (in `rotate_master`) re-seals stored credentials. With the embedded
//! database, stop `onyx serve` first (or use `/v1/keys` with an admin key).
//! Only `create` migrates the schema (it may be the first thing ever stored,
//! before any `onyx serve`); `list` and `revoke` only read what is there.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::error::{CliError, connect_error};
use crate::auth::{ApiKeys, Authenticator, KeyError, Scope, StoredKey};
use crate::config;
use crate::storage::Db;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (shown once).
    Create {
        #[arg(long)]
        name: String,
        /// `chat` (use models, agents, sessions, memory) or `admin` (also manage keys and config).
        #[arg(long, default_value = "chat")]
        scope: Scope,
        /// Only these agents (comma-separated; a `chat` key).
        #[arg(long, value_delimiter = ',')]
        agents: Option<Vec<String>>,
        /// When the key stops working (RFC 3339, e.g. 2027-01-31T00:00:00Z).
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// List active keys (prefix, scope, last use).
    List,
    /// Revoke a key by id.
    Revoke { id: String },
    /// Seal every stored credential under a new master key. With the key in
    /// the data dir, the file is replaced; with ONYX_MASTER_KEY, the new key is
    /// printed (set it on every replica, with the old one as
    /// ONYX_MASTER_KEY_PREVIOUS until they have all restarted).
    RotateMaster,
}

pub async fn run(config_path: Option<PathBuf>, command: KeysCommand) -> ExitCode {
    match keys(config_path, command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("onyx keys: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn keys(config_path: Option<PathBuf>, command: KeysCommand) -> Result<(), CliError> {
    let path = config::locate(config_path.as_deref());
    let config = config::load(path.as_deref())?;
    let db = Db::connect(&config.storage.surrealdb)
        .await
        .map_err(connect_error)?;
    if let KeysCommand::RotateMaster = command {
        return super::rotate_master::rotate(&config, &db).await;
    }
    if let KeysCommand::Create { .. } = command {
        db.migrate().await?;
    } else if db.schema_version().await? == 0 {
        // A database nothing was ever stored in has no keys (and no tables to read).
        return match command {
            KeysCommand::Revoke { id } => Err(KeyError::NotFound(id).into()),
            _ => {
                print_keys(Vec::new());
                Ok(())
            }
        };
    }
    let auth = Authenticator::new(ApiKeys::new([]), db.clone(), false).await?;
    let audit = |action, target: String, detail| {
        let db = db.clone();
        async move {
            let event = crate::audit::NewEvent {
                action,
                actor: "cli",
                target: Some(&target),
                ip: None,
                detail,
            };
            crate::audit::record(&db, event).await;
        }
    };
    match command {
        KeysCommand::Create {
            name,
            scope,
            agents,
            expires_at,
        } => {
            let bounds = crate::auth::KeyBounds { agents, expires_at };
            let (stored, secret) = auth.create(&name, scope, None, bounds).await?;
            let detail = format!("name {:?}, scope {scope:?}", stored.name);
            audit(crate::audit::Action::KeyCreated, stored.id.clone(), Some(detail)).await;
            println!("{secret}");
            eprintln!(
                "created key {} ({:?}, id {}); it is shown only this once",
                stored.name, stored.scope, stored.id
            );
        }
        KeysCommand::List => print_keys(auth.list().await?),
        KeysCommand::Revoke { id } => {
            auth.revoke(&id).await?;
            audit(crate::audit::Action::KeyRevoked, id.clone(), None).await;
            eprintln!("revoked {id}");
        }
        KeysCommand::RotateMaster => unreachable!("handled before the keys are read"),
    }
    Ok(())
}

fn print_keys(keys: Vec<StoredKey>) {
    println!(
        "{:<36}  {:<20}  {:<6}  {:<16}  LAST USED",
        "ID", "NAME", "SCOPE", "PREFIX"
    );
    for key in keys {
        let scope = if key.scope == Scope::Admin {
            "admin"
        } else {
            "chat"
        };
        let last = key.last_used_at.unwrap_or_else(|| "never".into());
        println!(
            "{:<36}  {:<20}  {:<6}  {:<16}  {last}",
            key.id, key.name, scope, key.prefix
        );
    }
}
