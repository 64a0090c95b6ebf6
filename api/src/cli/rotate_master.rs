//! `onyx keys rotate-master`: seals every stored credential (provider and
//! MCP server secrets in the database, subscription credential files in the data dir)
//! under a new master key. With the key file in the data dir, the new key is written to
//! `master.key.next` first, everything is re-sealed, then the file replaces
//! `master.key` (a crash in between leaves both keys readable, and running the
//! command again finishes the job). With `ONYX_MASTER_KEY`, the new key is
//! printed on stdout for the operator to deploy.

use secrecy::ExposeSecret;

use super::error::CliError;
use crate::config::Config;
use crate::providers::api_added::ProviderStore;
use crate::secrets::{KeySource, MasterKey, MasterKeyFiles, vault_from_env};
use crate::storage::Db;

pub async fn rotate(config: &Config, db: &Db) -> Result<(), CliError> {
    db.migrate().await?;
    let old = vault_from_env(&config.storage.data_dir)?;
    let new_key = MasterKey::generate()?;
    let files = MasterKeyFiles::in_dir(&config.storage.data_dir);
    let from_file = matches!(old.source(), KeySource::File(_));
    if from_file {
        files.write_next(&new_key)?;
    }
    let printable = new_key.encoded().expose_secret().to_string();
    let new_id = new_key.id().to_string();
    let old_id = old.key_id().to_string();
    let vault = old.rotated(new_key);
    let store = ProviderStore::new(db.clone());
    let resealed = store.reseal_all(&vault).await?;
    let mcp_resealed = crate::mcp_client::api_added::server_store(db.clone())
        .reseal_all(&vault)
        .await
        .map_err(|err| CliError::Io(format!("MCP servers: {err}")))?;
    let files_resealed = crate::providers::subscription::sealed::reseal_all(&vault, &config.storage.data_dir)
        .map_err(|err| CliError::Io(err.to_string()))?;
    crate::audit::record(
        db,
        crate::audit::NewEvent {
            action: crate::audit::Action::MasterKeyRotated,
            actor: "cli",
            target: Some(&new_id),
            ip: None,
            detail: Some(format!(
                "from key {old_id} ({resealed} providers, {mcp_resealed} MCP servers and {files_resealed} subscription credential files re-sealed)"
            )),
        },
    )
    .await;
    if from_file {
        files.promote_next()?;
        eprintln!(
            "re-sealed {resealed} stored providers and {files_resealed} subscription credential files (and {mcp_resealed} MCP servers) under master key {new_id}; {} now holds it",
            files.current.display()
        );
    } else {
        println!("{printable}");
        eprintln!(
            "re-sealed {resealed} stored providers and {files_resealed} subscription credential files (and {mcp_resealed} MCP servers) under master key {new_id} (printed above).\n\
             Set ONYX_MASTER_KEY to it on every replica; until they have all restarted, \
             give them the old key as ONYX_MASTER_KEY_PREVIOUS."
        );
    }
    Ok(())
}
