//! The `local` object store: each bucket is a directory under the data dir,
//! each key a file. Writes go to a temporary file first and are renamed (or,
//! for create-if-absent, hard-linked) into place, so a crash never leaves a torn
//! object. Versions are SHA-256 hashes of the content. Conditional overwrites
//! are serialised by a lock, which is enough because a local store has one
//! process writing to it.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::keys::ObjectKey;
use super::object_store::{Bucket, Object, ObjectInfo, ObjectStore, PutCondition, StoreError, Version};

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

    fn path(&self, bucket: Bucket, key: &ObjectKey) -> PathBuf {
        self.root.join(bucket.name()).join(key.as_str())
    }
}

fn io_error(err: std::io::Error) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

fn version_of(body: &[u8]) -> Version {
    let digest = Sha256::digest(body);
    Version(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `body` next to `path` under a unique temporary name.
async fn write_temp(path: &Path, body: &[u8]) -> Result<PathBuf, StoreError> {
    let dir = path
        .parent()
        .ok_or_else(|| StoreError::Unavailable("object path has no parent".into()))?;
    tokio::fs::create_dir_all(dir).await.map_err(io_error)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("object");
    let temp = dir.join(format!(".{name}.tmp-{}", uuid::Uuid::new_v4().simple()));
    let mut file = tokio::fs::File::create(&temp).await.map_err(io_error)?;
    tokio::io::AsyncWriteExt::write_all(&mut file, body)
        .await
        .map_err(io_error)?;
    file.sync_all().await.map_err(io_error)?;
    Ok(temp)
}

async fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match tokio::fs::read(path).await {
        Ok(body) => Ok(Some(body)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(io_error(err)),
    }
}

impl ObjectStore for LocalStore {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn ensure_buckets(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        async move {
            for bucket in Bucket::ALL {
                tokio::fs::create_dir_all(self.root.join(bucket.name()))
                    .await
                    .map_err(io_error)?;
            }
            Ok(())
        }
        .boxed()
    }

    fn get<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<Option<Object>, StoreError>> {
        async move {
            Ok(read_optional(&self.path(bucket, key)).await?.map(|body| Object {
                version: version_of(&body),
                body: Bytes::from(body),
            }))
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
        async move {
            let path = self.path(bucket, key);
            let version = version_of(&body);
            let temp = write_temp(&path, &body).await?;
            let result = match condition {
                // A hard link fails if the name exists: atomic create-if-absent.
                PutCondition::IfAbsent => match tokio::fs::hard_link(&temp, &path).await {
                    Ok(()) => Ok(()),
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                        Err(StoreError::PreconditionFailed)
                    }
                    Err(err) => Err(io_error(err)),
                },
                PutCondition::Overwrite => {
                    let _guard = self.write_lock.lock().await;
                    tokio::fs::rename(&temp, &path).await.map_err(io_error)
                }
                PutCondition::IfMatch(expected) => {
                    let _guard = self.write_lock.lock().await;
                    match read_optional(&path).await? {
                        Some(current) if version_of(&current) == expected => {
                            tokio::fs::rename(&temp, &path).await.map_err(io_error)
                        }
                        _ => Err(StoreError::PreconditionFailed),
                    }
                }
            };
            let _ = tokio::fs::remove_file(&temp).await;
            result.map(|()| version)
        }
        .boxed()
    }

    fn delete<'a>(&'a self, bucket: Bucket, key: &'a ObjectKey) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            let path = self.path(bucket, key);
            match tokio::fs::remove_file(&path).await {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(err) => return Err(io_error(err)),
            }
            // Prune directories the delete emptied, up to the bucket.
            let bucket_dir = self.root.join(bucket.name());
            let mut dir = path.parent();
            while let Some(current) = dir.filter(|d| *d != bucket_dir && d.starts_with(&bucket_dir)) {
                if tokio::fs::remove_dir(current).await.is_err() {
                    break; // not empty (or already gone)
                }
                dir = current.parent();
            }
            Ok(())
        }
        .boxed()
    }

    fn list<'a>(
        &'a self,
        bucket: Bucket,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectInfo>, StoreError>> {
        let root = self.root.join(bucket.name());
        let prefix = prefix.to_string();
        async move {
            tokio::task::spawn_blocking(move || list_dir(&root, &prefix))
                .await
                .map_err(|err| StoreError::Unavailable(err.to_string()))?
        }
        .boxed()
    }
}

/// Walks the bucket directory (only below the prefix's directory part).
fn list_dir(root: &Path, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
    let start_dir = match prefix.rfind('/') {
        Some(slash) => root.join(&prefix[..slash]),
        None => root.to_path_buf(),
    };
    let mut out = Vec::new();
    let mut pending = vec![start_dir];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(io_error(err)),
        };
        for entry in entries {
            let entry = entry.map_err(io_error)?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue; // temporary files of writes in progress
            }
            let file_type = entry.file_type().map_err(io_error)?;
            let path = entry.path();
            if file_type.is_dir() {
                pending.push(path);
            } else if file_type.is_file()
                && let Ok(relative) = path.strip_prefix(root)
            {
                let key = relative.to_string_lossy().replace('\\', "/");
                if key.starts_with(prefix) {
                    let metadata = entry.metadata().map_err(io_error)?;
                    let size = metadata.len();
                    // A cheap change token; the content hash would mean reading every file.
                    let modified = metadata
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_nanos());
                    out.push(ObjectInfo {
                        key,
                        size,
                        etag: format!("{modified}-{size}"),
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}
