//! API keys kept in SurrealDB (`onyx keys …`, `/v1/keys`): shown once at
//! creation, stored as SHA-256 digests with a display prefix, a scope (`chat`
//! or `admin`) and `last_used_at`. Keys from the config and `ONYX_API_KEY` keep
//! working and carry the admin scope. A stored key may expire (`expires_at`)
//! and may be scoped to agents (`agents`: then it reaches only those agents).
//!
//! Lookups are cached for a few seconds so a request costs no database round
//! trip; a revoke clears this replica's cache at once and others' within the TTL.
//!
//! Open or keyed is decided once, at start: keyed when the config or
//! `ONYX_API_KEY` has a key, a UI password is set, or a key was ever stored.
//! The first key stored makes an open gateway keyed, and the fact is kept
//! (`onyx_meta:auth`): revoking the last key never opens the gateway again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "KeyScope")]
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

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The agents this key may reach (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub agents: Option<Vec<String>>,
    /// When the key stops working (RFC 3339 UTC; never when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub expires_at: Option<String>,
}

/// What a new key may do beyond its scope: which agents, until when.
#[derive(Debug, Clone, Default)]
pub struct KeyBounds {
    pub agents: Option<Vec<String>>,
    /// RFC 3339, any offset; stored in UTC.
    pub expires_at: Option<String>,
}

/// Who presented a valid key: its scope, its id (never the secret) and its limits.
#[derive(Debug, Clone)]
pub struct Caller {
    pub scope: Scope,
    /// A stored key's id, or `config:<first 12 hex digits of its SHA-256>` for
    /// a key from the config or `ONYX_API_KEY`.
    pub key_id: std::sync::Arc<str>,
    pub limits: Option<Limits>,
    /// The agents the key is scoped to (`None`: every agent).
    pub agents: Option<std::sync::Arc<[String]>>,
}

/// Why a presented key was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// Not a key Onyx knows (or a revoked one).
    Invalid,
    /// A known key past its `expires_at` (the time, RFC 3339).
    Expired(String),
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
    #[error("agents: {0}")]
    BadAgents(String),
    #[error("expiresAt: {0}")]
    BadExpiry(String),
    #[error("this API key expired at {0}")]
    Expired(String),
    /// A key scoped to agents asked for something else.
    #[error("{0}")]
    OutOfScope(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

fn digest_hex(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// Lowercase hex; every request's key goes through it, so no `format!` per byte.
pub(super) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    out
}

/// A stored key as a request needs it.
#[derive(Debug, Clone, Deserialize)]
struct Found {
    id: String,
    scope: Scope,
    limits: Option<Limits>,
    agents: Option<Vec<String>>,
    expires_at: Option<String>,
}

/// A cached lookup: when it was made, and the key if it exists.
type CachedLookup = (Instant, Option<Found>);

const FIELDS: &str =
    "record::id(id) AS id, name, scope, prefix, created_at, last_used_at, limits, agents, expires_at";

pub struct Authenticator {
    config_keys: ApiKeys,
    db: Db,
    /// Requests need a key (or the UI's session); once true, never false again.
    keyed: AtomicBool,
    /// By the key's SHA-256.
    cache: Mutex<HashMap<[u8; 32], CachedLookup>>,
    touched: Mutex<HashMap<String, Instant>>,
    /// The tokens of runs on subscription models (`/mcp` only).
    run_tokens: std::sync::Arc<super::RunTokens>,
}

impl Authenticator {
    /// `password_set`: a UI password is configured, which keeps the gateway keyed too.
    pub async fn new(config_keys: ApiKeys, db: Db, password_set: bool) -> Result<Self, KeyError> {
        let keyed = !config_keys.is_empty() || password_set || was_keyed(&db).await?;
        let auth = Self {
            config_keys,
            db,
            keyed: AtomicBool::new(keyed),
            cache: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
            run_tokens: std::sync::Arc::default(),
        };
        if keyed {
            auth.remember_keyed().await?;
        }
        Ok(auth)
    }

    /// Records that the gateway is keyed, for every later start.
    async fn remember_keyed(&self) -> Result<(), KeyError> {
        self.db
            .execute_retrying(
                "UPSERT onyx_meta:auth SET keyed = true, since = since ?? $now",
                json!({"now": crate::clock::now_stamp()}),
            )
            .await?;
        self.keyed.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Whether requests need a key (or the UI's session). Without one, Onyx
    /// serves only loopback, and only loopback pages (`http::edge`).
    pub fn required(&self) -> bool {
        self.keyed.load(Ordering::SeqCst)
    }

    /// The run tokens of this replica (minted by agent runs, checked here).
    pub fn run_tokens(&self) -> &std::sync::Arc<super::RunTokens> {
        &self.run_tokens
    }

    pub fn config_key_count(&self) -> usize {
        self.config_keys.len()
    }

    /// The scope of a presented key, or `None` when it is not valid.
    pub async fn authenticate(&self, presented: &str) -> Option<Scope> {
        self.identify(presented).await.ok().map(|caller| caller.scope)
    }

    /// Who presented `presented`, or why the key is refused.
    pub async fn identify(&self, presented: &str) -> Result<Caller, Denied> {
        if let Some(answer) = self.identify_now(presented) {
            return answer;
        }
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let rows: Result<Vec<Found>, _> = self
            .db
            .rows(
                "SELECT record::id(id) AS id, scope, limits, agents, expires_at FROM api_key
                 WHERE digest = $digest AND revoked_at = NONE",
                json!({"digest": hex(&digest)}),
                0,
            )
            .await;
        let found = match rows {
            Ok(rows) => rows.into_iter().next(),
            Err(err) => {
                tracing::error!(error = %err, "API key lookup failed");
                return Err(Denied::Invalid);
            }
        };
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(digest, (Instant::now(), found.clone()));
        }
        self.admit(found)
    }

    /// [`identify`](Self::identify) without waiting, when no database lookup
    /// is needed: a configured key, a malformed one, or a stored key looked up
    /// within the cache's lifetime. `None`: the database must be asked.
    pub fn identify_now(&self, presented: &str) -> Option<Result<Caller, Denied>> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        if let Some(key_id) = self.config_keys.id_of(&digest) {
            return Some(Ok(Caller {
                scope: Scope::Admin,
                key_id,
                limits: None,
                agents: None,
            }));
        }
        if !presented.starts_with(KEY_PREFIX) {
            return Some(Err(Denied::Invalid));
        }
        let cached = self.cache.lock().ok()?.get(&digest).cloned();
        match cached {
            Some((at, found)) if at.elapsed() < CACHE_TTL => Some(self.admit(found)),
            _ => None,
        }
    }

    /// The caller a stored key makes, unless it is unknown or expired.
    fn admit(&self, found: Option<Found>) -> Result<Caller, Denied> {
        let found = found.ok_or(Denied::Invalid)?;
        if let Some(expires_at) = &found.expires_at
            && crate::clock::parse_stamp(expires_at).is_none_or(|at| at <= crate::clock::now())
        {
            return Err(Denied::Expired(expires_at.clone()));
        }
        let key_id: std::sync::Arc<str> = found.id.as_str().into();
        self.touch(found.id);
        Ok(Caller {
            scope: found.scope,
            key_id,
            limits: found.limits.and_then(Limits::non_empty),
            agents: found.agents.map(Into::into),
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
                if let Err(err) = db.execute_retrying(sql, json!({"id": id, "now": now})).await {
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
        bounds: KeyBounds,
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
        let (agents, expires_at) = check_bounds(scope, bounds)?;
        // Keyed before the key exists: no moment where a key is out and the gateway open.
        self.remember_keyed().await?;
        let secret = format!(
            "{KEY_PREFIX}{}{}",
            uuid::Uuid::new_v4().simple(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let id = uuid::Uuid::now_v7().hyphenated().to_string();
        self.db
            .execute(
                "CREATE type::record('api_key', $id) SET name = $name, scope = $scope, digest = $digest,
                 prefix = $prefix, created_at = $now, last_used_at = NONE, revoked_at = NONE, limits = $limits,
                 agents = $agents, expires_at = $expires_at",
                json!({
                    "id": id, "name": name, "scope": scope, "digest": digest_hex(&secret), "limits": limits,
                    "agents": agents, "expires_at": expires_at,
                    "prefix": &secret[..KEY_PREFIX.len() + 6], "now": crate::clock::now_stamp(),
                }),
            )
            .await?;
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
        // Retried: the key's own last use may be recording itself on the same row.
        self.db
            .execute_retrying(
                "UPDATE type::record('api_key', $id) SET revoked_at = $now",
                json!({"id": key.id, "now": crate::clock::now_stamp()}),
            )
            .await?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|_, (_, found)| found.as_ref().is_none_or(|cached| cached.id != key.id));
        }
        Ok(())
    }
}

/// Whether this database ever made the gateway keyed: the fact recorded, or
/// any key ever stored (revoked ones included, for databases from before the
/// fact was recorded).
async fn was_keyed(db: &Db) -> Result<bool, KeyError> {
    #[derive(Deserialize)]
    struct Keyed {
        keyed: bool,
    }
    let mut response = db
        .execute(
            "SELECT keyed FROM onyx_meta:auth;
             SELECT VALUE record::id(id) FROM api_key LIMIT 1;",
            json!({}),
        )
        .await?;
    let recorded: Vec<Keyed> = Db::take_rows(&mut response, 0)?;
    let stored: Vec<String> = Db::take_rows(&mut response, 1)?;
    Ok(recorded.first().is_some_and(|r| r.keyed) || !stored.is_empty())
}

/// Validates a new key's agents and expiry: agents named at most once, not
/// blank, and only on `chat` keys (an admin key reaches everything anyway);
/// an expiry in RFC 3339 and in the future, kept in UTC.
fn check_bounds(scope: Scope, bounds: KeyBounds) -> Result<(Option<Vec<String>>, Option<String>), KeyError> {
    let agents = match bounds.agents {
        None => None,
        Some(_) if scope == Scope::Admin => {
            return Err(KeyError::BadAgents(
                "an admin key cannot be scoped to agents; use scope \"chat\"".into(),
            ));
        }
        Some(list) if list.is_empty() => {
            return Err(KeyError::BadAgents(
                "name at least one agent, or leave agents out".into(),
            ));
        }
        Some(list) => {
            let mut seen = Vec::with_capacity(list.len());
            for agent in list {
                let agent = agent.trim().to_string();
                if agent.is_empty() || agent.len() > 100 {
                    return Err(KeyError::BadAgents(
                        "each agent id must be 1 to 100 characters".into(),
                    ));
                }
                if !seen.contains(&agent) {
                    seen.push(agent);
                }
            }
            Some(seen)
        }
    };
    let expires_at = match bounds.expires_at {
        None => None,
        Some(text) => {
            let Some(at) = crate::clock::parse_stamp(text.trim()) else {
                return Err(KeyError::BadExpiry(format!(
                    "{text:?} is not an RFC 3339 time such as 2027-01-31T00:00:00Z"
                )));
            };
            if at <= crate::clock::now() {
                return Err(KeyError::BadExpiry(format!("{text:?} is in the past")));
            }
            Some(crate::clock::stamp(at))
        }
    };
    Ok((agents, expires_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_matches_the_formatted_digest() {
        let bytes = [0x00, 0x0f, 0xa5, 0xff];
        assert_eq!(hex(&bytes), "000fa5ff");
        let formatted: String = Sha256::digest(b"k").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(digest_hex("k"), formatted);
    }

    #[tokio::test]
    async fn a_gateway_once_keyed_stays_keyed() {
        let db = Db::scratch().await;
        let open = Authenticator::new(ApiKeys::new([]), db.clone(), false)
            .await
            .unwrap();
        assert!(!open.required(), "nothing keyed it yet");
        let (key, _) = open
            .create("first", Scope::Admin, None, KeyBounds::default())
            .await
            .unwrap();
        assert!(open.required(), "the first key keys it at once");
        open.revoke(&key.id).await.unwrap();
        assert!(open.list().await.unwrap().is_empty());
        assert!(open.required(), "revoking the last key does not open it");
        let restarted = Authenticator::new(ApiKeys::new([]), db.clone(), false)
            .await
            .unwrap();
        assert!(restarted.required(), "nor does a restart");
        // A password keys a fresh database, and the fact outlives the password.
        let fresh = Db::scratch().await;
        assert!(
            Authenticator::new(ApiKeys::new([]), fresh.clone(), true)
                .await
                .unwrap()
                .required()
        );
        assert!(
            Authenticator::new(ApiKeys::new([]), fresh, false)
                .await
                .unwrap()
                .required()
        );
    }

    fn bounds(agents: Option<&[&str]>, expires_at: Option<&str>) -> KeyBounds {
        KeyBounds {
            agents: agents.map(|a| a.iter().map(|s| s.to_string()).collect()),
            expires_at: expires_at.map(String::from),
        }
    }

    #[test]
    fn bounds_are_checked_and_normalised() {
        let (agents, expiry) = check_bounds(
            Scope::Chat,
            bounds(Some(&[" main", "main", "ops"]), Some("2999-01-01T01:00:00+01:00")),
        )
        .unwrap();
        assert_eq!(agents.unwrap(), ["main", "ops"]);
        assert_eq!(expiry.unwrap(), "2999-01-01T00:00:00.000000Z");
        for (scope, b, field) in [
            (Scope::Admin, bounds(Some(&["main"]), None), "agents"),
            (Scope::Chat, bounds(Some(&[]), None), "agents"),
            (Scope::Chat, bounds(Some(&[" "]), None), "agents"),
            (Scope::Chat, bounds(None, Some("tomorrow")), "expiresAt"),
            (
                Scope::Chat,
                bounds(None, Some("2001-01-01T00:00:00Z")),
                "expiresAt",
            ),
        ] {
            let err = check_bounds(scope, b).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
        assert_eq!(
            check_bounds(Scope::Admin, KeyBounds::default()).unwrap(),
            (None, None)
        );
    }
}
