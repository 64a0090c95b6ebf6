//! A table of named, revisioned specs (`{table}:{name}` with `name`, `spec`
//! as JSON text, `revision`, `created_at`, `updated_at`): how the providers
//! and MCP servers added through the API are kept, their secret values
//! sealed under the master key ([`crate::secrets`]). A write names the
//! revision it read, so of two edits made at once only one lands; replicas
//! compare revisions to rebuild only what changed.

use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Db, DbError};
use crate::config::ConfigError;
use crate::secrets::{SecretError, Vault};

const NAME_TAKEN: &str = "onyx:name-exists";
const CHANGED_MEANWHILE: &str = "onyx:changed-meanwhile";

/// A stored row, its spec still JSON text.
#[derive(Debug, Deserialize)]
struct SpecRow {
    pub name: String,
    pub spec: String,
    pub revision: u64,
    pub created_at: String,
    pub updated_at: String,
}

/// Why a write did not land.
#[derive(Debug, thiserror::Error)]
enum SpecWriteError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("the name is taken")]
    Exists,
    #[error("it changed since it was read")]
    Changed,
}

#[derive(Clone)]
struct NamedSpecs {
    db: Db,
    /// A fixed table name (never user input: it goes into the query text).
    table: &'static str,
}

impl NamedSpecs {
    fn new(db: Db, table: &'static str) -> Self {
        Self { db, table }
    }

    async fn list(&self) -> Result<Vec<SpecRow>, DbError> {
        let query = format!("SELECT * OMIT id FROM {} ORDER BY name", self.table);
        self.db.rows(&query, json!({}), 0).await
    }

    async fn get(&self, name: &str) -> Result<Option<SpecRow>, DbError> {
        let rows: Vec<SpecRow> = self
            .db
            .rows(
                "SELECT * OMIT id FROM type::record($table, $name)",
                json!({"table": self.table, "name": name}),
                0,
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    /// Stores `spec` under a new name at revision 1; its creation time.
    async fn create(&self, name: &str, spec: &str) -> Result<String, SpecWriteError> {
        let now = crate::clock::now_stamp();
        let result = self
            .db
            .execute(
                &format!(
                    "BEGIN TRANSACTION;
                     IF (SELECT VALUE name FROM type::record($table, $name)) != [] {{ THROW '{NAME_TAKEN}' }};
                     CREATE type::record($table, $name) SET name = $name, spec = $spec,
                         revision = 1, created_at = $now, updated_at = $now;
                     COMMIT TRANSACTION;"
                ),
                json!({"table": self.table, "name": name, "spec": spec, "now": now}),
            )
            .await;
        match result {
            Err(DbError::Surreal(message)) if message.contains(NAME_TAKEN) => Err(SpecWriteError::Exists),
            other => other.map(|_| now).map_err(Into::into),
        }
    }

    /// Replaces the spec if nobody else changed it since `revision`.
    async fn write(&self, name: &str, spec: &str, revision: u64) -> Result<(), SpecWriteError> {
        let result = self
            .db
            .execute(
                &format!(
                    "BEGIN TRANSACTION;
                     IF (SELECT VALUE revision FROM type::record($table, $name)) != [$revision]
                         {{ THROW '{CHANGED_MEANWHILE}' }};
                     UPDATE type::record($table, $name) SET spec = $spec, revision = $revision + 1,
                         updated_at = $now;
                     COMMIT TRANSACTION;"
                ),
                json!({"table": self.table, "name": name, "spec": spec, "revision": revision,
                       "now": crate::clock::now_stamp()}),
            )
            .await;
        match result {
            Err(DbError::Surreal(message)) if message.contains(CHANGED_MEANWHILE) => {
                Err(SpecWriteError::Changed)
            }
            other => other.map(drop).map_err(Into::into),
        }
    }

    /// Removes a row; `false` when there was none.
    async fn delete(&self, name: &str) -> Result<bool, DbError> {
        let gone: Vec<Value> = self
            .db
            .rows(
                "DELETE type::record($table, $name) RETURN BEFORE",
                json!({"table": self.table, "name": name}),
                0,
            )
            .await?;
        Ok(!gone.is_empty())
    }

    /// A signal per change to the table.
    async fn changes(&self) -> Result<futures::stream::BoxStream<'static, ()>, DbError> {
        self.db.changes(self.table).await
    }
}

/// A spec stored with its secret values sealed under the master key, each
/// bound to its record and place (a sealed value copied elsewhere does not open).
pub trait SealedSpec: Serialize + DeserializeOwned + Clone {
    /// What messages call one (`provider`, `MCP server`).
    const KIND: &'static str;
    /// The spec with every secret value of record `name` passed through `each(value, context)`.
    fn map_secrets(
        self,
        name: &str,
        each: &mut dyn FnMut(&str, &str) -> Result<String, SecretError>,
    ) -> Result<Self, SecretError>;
    /// Its secret values as they are now (sealed, when stored).
    fn secret_values(&self) -> Vec<&str>;
    /// Checks it as the config file's entry `name` would be checked.
    fn check(&self, name: &str) -> Result<(), ConfigError>;
}

/// Why a sealed spec could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("{0}")]
    Secret(#[from] SecretError),
    #[error("{0}")]
    Invalid(#[from] ConfigError),
    #[error("{0} {1:?} already exists")]
    Exists(&'static str, String),
    #[error("no {0} {1:?} was added through the API")]
    NotFound(&'static str, String),
    #[error("{0} {1:?} changed while this edit was made; try again")]
    Conflict(&'static str, String),
}

/// A stored spec, its secrets still sealed.
#[derive(Debug, Clone)]
pub struct Stored<S> {
    pub name: String,
    pub spec: S,
    pub revision: u64,
    pub created_at: String,
    pub updated_at: String,
}

impl<S: SealedSpec> Stored<S> {
    fn from_row(row: SpecRow) -> Result<Self, SpecError> {
        let spec = serde_json::from_str(&row.spec)
            .map_err(|err| DbError::Decode(format!("{} {:?}: {err}", S::KIND, row.name)))?;
        Ok(Self {
            name: row.name,
            spec,
            revision: row.revision,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }

    /// Its spec with the secrets opened.
    pub fn opened(&self, vault: &Vault) -> Result<S, SpecError> {
        Ok(open(vault, &self.name, self.spec.clone())?)
    }
}

pub fn seal<S: SealedSpec>(vault: &Vault, name: &str, spec: S) -> Result<S, SecretError> {
    spec.map_secrets(name, &mut |plain, context| vault.seal(plain, context))
}

pub fn open<S: SealedSpec>(vault: &Vault, name: &str, spec: S) -> Result<S, SecretError> {
    spec.map_secrets(name, &mut |sealed, context| {
        vault.open(sealed, context).map(|s| s.expose_secret().to_string())
    })
}

/// RFC 7396 JSON merge patch: objects merge key by key, `null` removes.
pub fn merge_patch(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(map) = target else { return };
    for (key, value) in patch {
        if value.is_null() {
            map.remove(&key);
        } else {
            merge_patch(map.entry(key).or_insert(Value::Null), value);
        }
    }
}

/// Reads `value` as a config-file entry's fields; errors name the field.
pub fn parse_fields<T: DeserializeOwned>(value: Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        ConfigError::Invalid {
            path: if path == "." { String::new() } else { path },
            message: err.into_inner().to_string(),
        }
    })
}

/// The specs of one kind, sealed at rest.
#[derive(Clone)]
pub struct SealedSpecs<S> {
    table: NamedSpecs,
    kind: std::marker::PhantomData<fn() -> S>,
}

impl<S: SealedSpec> SealedSpecs<S> {
    pub fn new(db: Db, table: &'static str) -> Self {
        Self {
            table: NamedSpecs::new(db, table),
            kind: std::marker::PhantomData,
        }
    }

    /// The database the specs are kept in.
    pub fn db(&self) -> Db {
        self.table.db.clone()
    }

    fn write_error(err: SpecWriteError, name: &str) -> SpecError {
        match err {
            SpecWriteError::Db(err) => SpecError::Db(err),
            SpecWriteError::Exists => SpecError::Exists(S::KIND, name.into()),
            SpecWriteError::Changed => SpecError::Conflict(S::KIND, name.into()),
        }
    }

    pub async fn list(&self) -> Result<Vec<Stored<S>>, SpecError> {
        let rows = self.table.list().await?;
        rows.into_iter().map(Stored::from_row).collect()
    }

    pub async fn get(&self, name: &str) -> Result<Option<Stored<S>>, SpecError> {
        self.table.get(name).await?.map(Stored::from_row).transpose()
    }

    /// Stores a new spec (checked, its secrets sealed).
    pub async fn create(&self, vault: &Vault, name: &str, spec: S) -> Result<Stored<S>, SpecError> {
        spec.check(name)?;
        let sealed = seal(vault, name, spec)?;
        let now = self
            .table
            .create(name, &spec_json(&sealed)?)
            .await
            .map_err(|err| Self::write_error(err, name))?;
        Ok(Stored {
            name: name.into(),
            spec: sealed,
            revision: 1,
            created_at: now.clone(),
            updated_at: now,
        })
    }

    /// Applies a JSON merge patch to a stored spec (secrets given in the
    /// patch replace the stored ones; `null` removes a field or an entry).
    pub async fn update(&self, vault: &Vault, name: &str, patch: Value) -> Result<Stored<S>, SpecError> {
        let current = self
            .get(name)
            .await?
            .ok_or_else(|| SpecError::NotFound(S::KIND, name.into()))?;
        let opened = current.opened(vault)?;
        let mut value = serde_json::to_value(&opened).map_err(|err| DbError::Decode(err.to_string()))?;
        merge_patch(&mut value, patch);
        let spec: S = parse_fields(value)?;
        spec.check(name)?;
        let sealed = seal(vault, name, spec)?;
        self.write(name, &sealed, current.revision).await?;
        Ok(Stored {
            spec: sealed,
            revision: current.revision + 1,
            updated_at: crate::clock::now_stamp(),
            ..current
        })
    }

    async fn write(&self, name: &str, sealed: &S, revision: u64) -> Result<(), SpecError> {
        self.table
            .write(name, &spec_json(sealed)?, revision)
            .await
            .map_err(|err| Self::write_error(err, name))
    }

    /// Removes one; `false` when there was none.
    pub async fn delete(&self, name: &str) -> Result<bool, SpecError> {
        Ok(self.table.delete(name).await?)
    }

    /// Seals every stored secret under `vault`'s current key (what
    /// `onyx keys rotate-master` does); returns how many specs changed.
    pub async fn reseal_all(&self, vault: &Vault) -> Result<usize, SpecError> {
        let mut changed = 0;
        for stored in self.list().await? {
            if stored.spec.secret_values().iter().all(|v| vault.is_current(v)) {
                continue;
            }
            let resealed = seal(vault, &stored.name, stored.opened(vault)?)?;
            self.write(&stored.name, &resealed, stored.revision).await?;
            changed += 1;
        }
        Ok(changed)
    }

    /// A signal per change to the stored specs.
    pub async fn changes(&self) -> Result<futures::stream::BoxStream<'static, ()>, SpecError> {
        Ok(self.table.changes().await?)
    }
}

fn spec_json<S: Serialize>(spec: &S) -> Result<String, SpecError> {
    serde_json::to_string(spec).map_err(|err| DbError::Decode(err.to_string()).into())
}
