//! Onyx's two stores: the object store (files are truth: memory files and
//! session logs) and SurrealDB (a derived index plus operational state).
//! `ObjectStore` has a `local` directory backend and an `s3` backend.

mod db;
mod dump;
mod embedded;
mod error;
mod keys;
mod local;
mod migrations;
mod named_specs;
mod object_store;
mod pool;
mod s3;

use std::sync::Arc;

pub use db::{Client, Db};
pub use embedded::wait_closed;
pub use error::DbError;
pub use keys::{InvalidKey, ObjectKey};
pub use local::LocalStore;
pub use migrations::LATEST as SCHEMA_VERSION;
pub use named_specs::{SealedSpec, SealedSpecs, SpecError, Stored, merge_patch, parse_fields};
pub use object_store::{
    Bucket, ByteRange, Object, ObjectInfo, ObjectStore, PutCondition, Ranged, StoreError, Version,
};
pub use s3::{S3Settings, S3Store};

use crate::config::{ObjectStoreConfig, StorageConfig};

/// Builds the configured object store and creates its buckets.
pub async fn open_object_store(config: &StorageConfig) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let store = object_store_without_buckets(config).await;
    store.ensure_buckets().await?;
    Ok(store)
}

/// Builds the configured object store without touching it.
pub async fn object_store_without_buckets(config: &StorageConfig) -> Arc<dyn ObjectStore> {
    let store: Arc<dyn ObjectStore> = match &config.objects {
        ObjectStoreConfig::Local => Arc::new(LocalStore::new(config.data_dir.join("objects"))),
        ObjectStoreConfig::S3 {
            endpoint,
            region,
            access_key,
            secret_key,
            bucket_prefix,
        } => Arc::new(
            S3Store::new(S3Settings {
                endpoint: endpoint.as_ref().map(|u| u.as_str()),
                region,
                access_key: access_key.as_ref(),
                secret_key: secret_key.as_ref(),
                bucket_prefix,
            })
            .await,
        ),
    };
    store
}
