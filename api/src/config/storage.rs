//! `storage`: the data dir, the object store (local files or S3) and
//! SurrealDB (embedded SurrealKV, in memory, or a server), with the embedded
//! store's memory caps.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url};

/// The values a size setting of `storage.surrealdb` accepts, and their unit.
type Range = (RangeInclusive<u64>, &'static str);
const CACHE_MB: Range = (RangeInclusive::new(1, 1 << 20), "MB");
const MEMTABLE_MB: Range = (RangeInclusive::new(8, 1 << 20), "MB");
const BLOCK_KB: Range = (RangeInclusive::new(1, 1024), "KB");
const CONNECTIONS: Range = (RangeInclusive::new(1, 64), "connections");
/// `storage.surrealdb.connections` when unset.
pub const DEFAULT_CONNECTIONS: usize = 4;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStorage {
    pub data_dir: Option<String>,
    pub objects: Option<RawObjects>,
    pub surrealdb: Option<RawSurreal>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawObjects {
    #[serde(rename = "type")]
    pub kind: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub bucket_prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawSurreal {
    pub url: Option<String>,
    pub user: Option<String>,
    pub pass: Option<String>,
    pub namespace: Option<String>,
    pub database: Option<String>,
    pub cache_mb: Option<u64>,
    pub memtable_mb: Option<u64>,
    pub block_kb: Option<u64>,
    pub connections: Option<u64>,
}

#[derive(Debug)]
pub struct StorageConfig {
    pub data_dir: PathBuf,
    pub objects: ObjectStoreConfig,
    pub surrealdb: SurrealConfig,
}

#[derive(Debug)]
pub enum ObjectStoreConfig {
    Local,
    S3 {
        endpoint: Option<Url>,
        region: String,
        access_key: Option<SecretString>,
        secret_key: Option<SecretString>,
        bucket_prefix: String,
    },
}

#[derive(Debug, Clone)]
pub struct SurrealConfig {
    pub url: String,
    pub user: Option<String>,
    pub pass: Option<SecretString>,
    pub namespace: String,
    pub database: String,
    pub embedded: EmbeddedStore,
    /// WebSocket connections to a server that queries are spread over.
    pub connections: usize,
}

impl SurrealConfig {
    /// The database `database` at `url` (namespace `onyx`, no credentials,
    /// every other setting its default): scratch stores, tests and benches.
    pub fn at(url: impl Into<String>, database: &str) -> Self {
        Self {
            url: url.into(),
            user: None,
            pass: None,
            namespace: "onyx".into(),
            database: database.into(),
            embedded: EmbeddedStore::default(),
            connections: DEFAULT_CONNECTIONS,
        }
    }
}

/// Memory caps and table layout of embedded SurrealKV (`storage.surrealdb.cacheMb`,
/// `memtableMb`, `blockKb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedStore {
    /// The block cache of recently read data.
    pub cache_mb: u64,
    /// Writes held in memory before they are flushed to a table file; also
    /// the largest transaction the store accepts.
    pub memtable_mb: u64,
    /// The size of a table file's data blocks: what a read that misses the
    /// cache loads (and checks) to find one key.
    pub block_kb: u64,
}

impl Default for EmbeddedStore {
    fn default() -> Self {
        Self {
            cache_mb: 128,
            memtable_mb: 64,
            block_kb: 64,
        }
    }
}

pub(super) fn storage(raw: RawStorage, env: Env) -> Result<StorageConfig, ConfigError> {
    let data_dir = match raw
        .data_dir
        .or_else(|| env("ONYX_DATA_DIR").filter(|d| !d.is_empty()))
    {
        Some(dir) => expand_home(&dir, env),
        None => expand_home("~/.local/share/onyx", env),
    };
    let objects = match raw.objects {
        None => ObjectStoreConfig::Local,
        Some(objects) => match objects.kind.as_str() {
            "local" => ObjectStoreConfig::Local,
            "s3" => ObjectStoreConfig::S3 {
                endpoint: objects
                    .endpoint
                    .as_deref()
                    .map(|e| parse_url(e, "storage.objects.endpoint"))
                    .transpose()?,
                region: objects.region.unwrap_or_else(|| "us-east-1".into()),
                access_key: objects.access_key.map(SecretString::from),
                secret_key: objects.secret_key.map(SecretString::from),
                bucket_prefix: objects.bucket_prefix.unwrap_or_default(),
            },
            other => {
                return Err(ConfigError::invalid(
                    "storage.objects.type",
                    format!("{other:?} is not \"local\" or \"s3\""),
                ));
            }
        },
    };
    let surreal = raw.surrealdb;
    let default_url = format!("surrealkv://{}", data_dir.join("db").display());
    let url = surreal
        .as_ref()
        .and_then(|s| s.url.clone())
        .unwrap_or(default_url);
    let scheme_ok = ["mem://", "surrealkv://", "ws://", "wss://", "http://", "https://"]
        .iter()
        .any(|s| url.starts_with(s));
    if !scheme_ok {
        return Err(ConfigError::invalid(
            "storage.surrealdb.url",
            format!("{url:?} must start with mem://, surrealkv://, ws:// or wss://"),
        ));
    }
    let defaults = EmbeddedStore::default();
    // A setting of `storage.surrealdb`: its value, or the default; out of `range`, an error naming it.
    let setting = |field: &str, pick: fn(&RawSurreal) -> Option<u64>, default: u64, range: Range| {
        let (range, unit) = range;
        let (least, most) = (range.start(), range.end());
        match surreal.as_ref().and_then(pick) {
            None => Ok(default),
            Some(n) if range.contains(&n) => Ok(n),
            Some(n) => Err(ConfigError::invalid(
                format!("storage.surrealdb.{field}"),
                format!("{n} must be between {least} and {most} ({unit})"),
            )),
        }
    };
    let embedded = EmbeddedStore {
        cache_mb: setting("cacheMb", |s| s.cache_mb, defaults.cache_mb, CACHE_MB)?,
        memtable_mb: setting("memtableMb", |s| s.memtable_mb, defaults.memtable_mb, MEMTABLE_MB)?,
        block_kb: setting("blockKb", |s| s.block_kb, defaults.block_kb, BLOCK_KB)?,
    };
    let connections = setting(
        "connections",
        |s| s.connections,
        DEFAULT_CONNECTIONS as u64,
        CONNECTIONS,
    )? as usize;
    Ok(StorageConfig {
        data_dir,
        objects,
        surrealdb: SurrealConfig {
            embedded,
            connections,
            url,
            user: surreal.as_ref().and_then(|s| s.user.clone()),
            pass: surreal
                .as_ref()
                .and_then(|s| s.pass.clone())
                .map(SecretString::from),
            namespace: surreal
                .as_ref()
                .and_then(|s| s.namespace.clone())
                .unwrap_or_else(|| "onyx".into()),
            database: surreal.and_then(|s| s.database).unwrap_or_else(|| "main".into()),
        },
    })
}
