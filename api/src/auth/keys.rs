//! API keys kept in SurrealDB (`onyx keys …`, `/v1/keys`): shown once at
//! creation, stored as SHA-256 digests with a display prefix, a scope (`chat`
//! or `admin`) and `last_used_at`. Keys from the config and `ONYX_API_KEY` keep
//! working and carry the admin scope.
//!
//! Lookups are cached for a few seconds so a request costs no database round
//! trip; a revoke clears this replica's cache at once and others' within the TTL.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::ApiKeys;
use crate::limits::Limits;
use crate::storage::{Db, DbError};

const CACHE_TTL: Duration = Duration::from_secs(10);
const TOUCH_EVERY: Duration = Duration::from_secs(60);
pub const KEY_PREFIX: &str = "onyx_sk_";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "KeyScope"))]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Model and agent use: chat, embeddings, models, sessions, memory.
    Chat,
    /// Everything, including key and config management.
    Admin,
}

impl std::str::FromStr for Scope {
    type Err = KeyError;
    fn from_str(text: &str) -> Result<Self, KeyError> {
        match text {
            "chat" => Ok(Scope::Chat),
            "admin" => Ok(Scope::Admin),
            other => Err(KeyError::BadScope(other.into())),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct StoredKey {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    /// The first characters of the key, to recognise it in a list.
    pub prefix: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
    /// Budgets and rate limits of this key (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub limits: Option<Limits>,
}

/// Who presented a valid key: its scope, its id (never the secret) and its limits.
#[derive(Debug, Clone)]
pub struct Caller {
    pub scope: Scope,
    /// A stored key's id, or `config:<first 12 hex digits of its SHA-256>` for
    /// a key from the config or `ONYX_API_KEY`.
    pub key_id: std::sync::Arc<str>,
    pub limits: Option<Limits>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("name: must be 1 to 100 characters")]
    BadName,
    #[error("scope: {0:?} is not a scope; use \"chat\" or \"admin\"")]
    BadScope(String),
    #[error("{message}")]
    BadLimits { param: &'static str, message: String },
    #[error("no API key {0}")]
    NotFound(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

fn digest_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A cached lookup: when it was made, and the key's id, scope and limits if it exists.
type CachedLookup = (Instant, Option<(String, Scope, Option<Limits>)>);

const FIELDS: &str = "record::id(id) AS id, name, scope, prefix, created_at, last_used_at, limits";

pub struct Authenticator {
    config_keys: ApiKeys,
    db: Db,
    active_db_keys: AtomicUsize,
    cache: Mutex<HashMap<String, CachedLookup>>,
    touched: Mutex<HashMap<String, Instant>>,
}

impl Authenticator {
    pub async fn new(config_keys: ApiKeys, db: Db) -> Result<Self, KeyError> {
        let auth = Self {
            config_keys,
            db,
            active_db_keys: AtomicUsize::new(0),
            cache: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
        };
        auth.refresh_count().await?;
        Ok(auth)
    }

    async fn refresh_count(&self) -> Result<(), KeyError> {
        #[derive(Deserialize)]
        struct Count {
            count: usize,
        }
        let rows: Vec<Count> = self
            .db
            .rows(
                "SELECT count() AS count FROM api_key WHERE revoked_at = NONE GROUP ALL",
                json!({}),
                0,
            )
            .await?;
        self.active_db_keys
            .store(rows.first().map_or(0, |r| r.count), Ordering::Relaxed);
        Ok(())
    }

    /// Whether any key exists; without one, Onyx only serves loopback, openly.
    pub fn required(&self) -> bool {
        !self.config_keys.is_empty() || self.active_db_keys.load(Ordering::Relaxed) > 0
    }

    pub fn config_key_count(&self) -> usize {
        self.config_keys.len()
    }

    /// The scope of a presented key, or `None` when it is not valid.
    pub async fn authenticate(&self, presented: &str) -> Option<Scope> {
        self.identify(presented).await.map(|caller| caller.scope)
    }

    /// Who presented `presented`, or `None` when it is not a valid key.
    pub async fn identify(&self, presented: &str) -> Option<Caller> {
        if self.config_keys.verify(presented) {
            return Some(Caller {
                scope: Scope::Admin,
                key_id: format!("config:{}", &digest_hex(presented)[..12]).into(),
                limits: None,
            });
        }
        if !presented.starts_with(KEY_PREFIX) {
            return None;
        }
        let digest = digest_hex(presented);
        let cached = self.cache.lock().ok().and_then(|c| c.get(&digest).cloned());
        let found = match cached {
            Some((at, found)) if at.elapsed() < CACHE_TTL => found,
            _ => {
                #[derive(Deserialize)]
                struct Row {
                    id: String,
                    scope: Scope,
                    limits: Option<Limits>,
                }
                let rows: Result<Vec<Row>, _> = self
                    .db
                    .rows(
                        "SELECT record::id(id) AS id, scope, limits FROM api_key WHERE digest = $digest AND revoked_at = NONE",
                        json!({"digest": digest}),
                        0,
                    )
                    .await;
                let found = match rows {
                    Ok(rows) => rows.into_iter().next().map(|r| (r.id, r.scope, r.limits)),
                    Err(err) => {
                        tracing::error!(error = %err, "API key lookup failed");
                        return None;
                    }
                };
                if let Ok(mut cache) = self.cache.lock() {
                    cache.insert(digest, (Instant::now(), found.clone()));
                }
                found
            }
        };
        let (id, scope, limits) = found?;
        let key_id: std::sync::Arc<str> = id.as_str().into();
        self.touch(id);
        Some(Caller {
            scope,
            key_id,
            limits: limits.and_then(Limits::non_empty),
        })
    }

    /// Records `last_used_at`, at most once a minute per key, off the request path.
    fn touch(&self, id: String) {
        let due = self.touched.lock().map(|mut t| {
            let due = t.get(&id).is_none_or(|at| at.elapsed() >= TOUCH_EVERY);
            if due {
                t.insert(id.clone(), Instant::now());
            }
            due
        });
        if due.unwrap_or(false) {
            let db = self.db.clone();
            tokio::spawn(async move {
                let sql = "UPDATE type::record('api_key', $id) SET last_used_at = $now";
                let now = crate::clock::now_stamp();
                if let Err(err) = db.execute(sql, json!({"id": id, "now": now})).await {
                    tracing::warn!(error = %err, "could not record last_used_at");
                }
            });
        }
    }

    /// Creates a key; the secret is returned here and never again.
    pub async fn create(
        &self,
        name: &str,
        scope: Scope,
        limits: Option<Limits>,
    ) -> Result<(StoredKey, String), KeyError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(KeyError::BadName);
        }
        if let Some(limits) = &limits {
            limits.check().map_err(|(field, message)| KeyError::BadLimits {
                param: field,
                message: format!("limits.{message}"),
            })?;
        }
        let limits = limits.and_then(Limits::non_empty);
        let secret = format!(
            "{KEY_PREFIX}{}{}",
            uuid::Uuid::new_v4().simple(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let id = uuid::Uuid::now_v7().hyphenated().to_string();
        self.db
            .execute(
                "CREATE type::record('api_key', $id) SET name = $name, scope = $scope, digest = $digest,
                 prefix = $prefix, created_at = $now, last_used_at = NONE, revoked_at = NONE, limits = $limits",
                json!({
                    "id": id, "name": name, "scope": scope, "digest": digest_hex(&secret), "limits": limits,
                    "prefix": &secret[..KEY_PREFIX.len() + 6], "now": crate::clock::now_stamp(),
                }),
            )
            .await?;
        self.refresh_count().await?;
        let stored = self.get(&id).await?;
        Ok((stored, secret))
    }

    pub async fn get(&self, id: &str) -> Result<StoredKey, KeyError> {
        let sql = format!("SELECT {FIELDS} FROM type::record('api_key', $id) WHERE revoked_at = NONE");
        self.db
            .rows(&sql, json!({"id": id}), 0)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| KeyError::NotFound(id.into()))
    }

    /// Active keys, newest first.
    pub async fn list(&self) -> Result<Vec<StoredKey>, KeyError> {
        let sql = format!("SELECT {FIELDS} FROM api_key WHERE revoked_at = NONE ORDER BY created_at DESC");
        Ok(self.db.rows(&sql, json!({}), 0).await?)
    }

    pub async fn revoke(&self, id: &str) -> Result<(), KeyError> {
        let key = self.get(id).await?;
        self.db
            .execute(
                "UPDATE type::record('api_key', $id) SET revoked_at = $now",
                json!({"id": key.id, "now": crate::clock::now_stamp()}),
            )
            .await?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|_, (_, found)| found.as_ref().is_none_or(|(cached, _, _)| cached != &key.id));
        }
        self.refresh_count().await?;
        Ok(())
    }
}
