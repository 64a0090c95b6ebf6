//! The `local` object store: each bucket is a directory under the data dir,
//! each key a file, every one opened through a handle on the store's
//! directory ([`Beneath`]: no link is followed, nothing outside is reached). Writes go to a temporary file first and are renamed (or,
//! for create-if-absent, hard-linked) into place, so a crash never leaves a torn
//! object. Versions are SHA-256 hashes of the content. Conditional overwrites
//! are serialised by a lock, which is enough because a local store has one
//! process writing to it.

use std::path::PathBuf;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::keys::ObjectKey;
use super::object_store::{
    Bucket, ByteRange, Object, ObjectInfo, ObjectStore, PutCondition, Ranged, StoreError, Version,
};
use crate::sandbox::{Beneath, Kind};

pub struct LocalStore {
    root: PathBuf,
    write_lock: Mutex<()>,
}

impl LocalStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            write_lock: Mutex::new(()),
        }
    }

    /// Runs `op` on a handle on the store's directory, off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Beneath) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || op(&Beneath::create(&root).map_err(io_error)?))
            .await
            .map_err(|err| StoreError::Unavailable(err.to_string()))?
    }
}

/// Where `key` of `bucket` lives, relative to the store's directory.
fn relative(bucket: Bucket, key: &ObjectKey) -> String {
    format!("{}/{}", bucket.name(), key.as_str())
}

fn io_error(err: std::io::Error) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

fn version_of(body: &[u8]) -> Version {
    let digest = Sha256::digest(body);
    Version(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// A unique temporary name next to `path` (hidden from listings by its dot).
fn temp_name(path: &str) -> String {
    let unique = uuid::Uuid::new_v4().simple();
    match path.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.tmp-{unique}"),
        None => format!(".{path}.tmp-{unique}"),
    }
}

/// Writes `body` to a temporary file, then puts it in place at `path`.
fn put_blocking(
    store: &Beneath,
    path: &str,
    body: &[u8],
    condition: &PutCondition,
) -> Result<(), StoreError> {
    let temp = temp_name(path);
    store.write_new(&temp, body).map_err(io_error)?;
    let result = match condition {
        // A hard link fails if the name exists: atomic create-if-absent.
        PutCondition::IfAbsent => match store.hard_link(&temp, path) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(StoreError::PreconditionFailed)
            }
            Err(err) => Err(io_error(err)),
        },
        PutCondition::Overwrite => store.rename(&temp, path).map_err(io_error),
        PutCondition::IfMatch(expected) => match store.read_optional(path).map_err(io_error)? {
            Some(current) if version_of(&current) == *expected => store.rename(&temp, path).map_err(io_error),
            _ => Err(StoreError::PreconditionFailed),
        },
    };
    let _ = store.remove_file(&temp);
    result
}

impl ObjectStore for LocalStore {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn ensure_buckets(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.blocking(|store| {
            for bucket in Bucket::ALL {
                store.create_dir_all(bucket.name()).map_err(io_error)?;
            }
            Ok(())
        })
        .boxed()
    }

    fn get<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<Option<Object>, StoreError>> {
        let path = relative(bucket, key);
        async move {
            let body = self
                .blocking(move |store| store.read_optional(&path).map_err(io_error))
                .await?;
            Ok(body.map(|body| Object {
                version: version_of(&body),
                body: Bytes::from(body),
            }))
        }
        .boxed()
    }

    /// Within the store's directory (`Beneath`), the file is read whole and
    /// the range cut from it: a local read is a page-cache copy.
    fn get_range<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        range: ByteRange,
    ) -> BoxFuture<'a, Result<Option<Ranged>, StoreError>> {
        let path = relative(bucket, key);
        async move {
            let body = self
                .blocking(move |store| store.read_optional(&path).map_err(io_error))
                .await?;
            Ok(body.map(|body| Ranged::of(Bytes::from(body), range)))
        }
        .boxed()
    }

    fn put<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        body: Bytes,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        let path = relative(bucket, key);
        async move {
            let version = version_of(&body);
            // Conditional overwrites are serialised; create-if-absent needs no lock.
            let _guard = match condition {
                PutCondition::IfAbsent => None,
                _ => Some(self.write_lock.lock().await),
            };
            self.blocking(move |store| put_blocking(store, &path, &body, &condition))
                .await?;
            Ok(version)
        }
        .boxed()
    }

    fn delete<'a>(&'a self, bucket: Bucket, key: &'a ObjectKey) -> BoxFuture<'a, Result<(), StoreError>> {
        let path = relative(bucket, key);
        self.blocking(move |store| {
            match store.remove_file(&path) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(err) => return Err(io_error(err)),
            }
            // Prune directories the delete emptied, up to the bucket.
            let mut dir = path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/')
                && parent.contains('/')
            {
                if store.remove_dir(parent).is_err() {
                    break; // not empty (or already gone)
                }
                dir = parent;
            }
            Ok(())
        })
        .boxed()
    }

    fn list<'a>(
        &'a self,
        bucket: Bucket,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectInfo>, StoreError>> {
        let prefix = prefix.to_string();
        self.blocking(move |store| list_dir(store, bucket.name(), &prefix))
            .boxed()
    }
}

/// Walks the bucket directory (only below the prefix's directory part).
fn list_dir(store: &Beneath, bucket: &str, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
    let start = match prefix.rfind('/') {
        Some(slash) => prefix[..slash].to_string(),
        None => String::new(),
    };
    let mut out = Vec::new();
    let mut pending = vec![start];
    while let Some(dir) = pending.pop() {
        let path = if dir.is_empty() {
            bucket.to_string()
        } else {
            format!("{bucket}/{dir}")
        };
        let entries = match store.list(&path) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(io_error(err)),
        };
        for entry in entries {
            if entry.name.starts_with('.') {
                continue; // temporary files of writes in progress
            }
            let key = if dir.is_empty() {
                entry.name.clone()
            } else {
                format!("{dir}/{}", entry.name)
            };
            match (entry.kind, entry.file) {
                (Kind::Dir, _) => pending.push(key),
                (Kind::File, Some(stat)) if key.starts_with(prefix) => {
                    // A cheap change token; the content hash would mean reading every file.
                    out.push(ObjectInfo {
                        key,
                        size: stat.size,
                        etag: format!("{}-{}", stat.modified, stat.size),
                    });
                }
                // Links are never followed (nor listed).
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}
