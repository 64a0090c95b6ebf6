//! A real local object store that counts what moves through it, for tests
//! that show what an operation costs in reads and bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::future::BoxFuture;

use super::{Memory, Settings};
use crate::storage::{
    Bucket, ByteRange, Db, LocalStore, Object, ObjectInfo, ObjectKey, ObjectStore, PutCondition, Ranged,
    StoreError, Version,
};

/// A real local store that counts the bytes moved through it.
pub struct Counting {
    inner: LocalStore,
    pub moved: AtomicU64,
    /// Reads and listings.
    pub reads: AtomicU64,
}

impl ObjectStore for Counting {
    fn backend(&self) -> &'static str {
        "local"
    }
    fn ensure_buckets(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.ensure_buckets()
    }
    fn get<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<Option<Object>, StoreError>> {
        Box::pin(async move {
            let object = self.inner.get(bucket, key).await?;
            let size = object.as_ref().map_or(0, |o| o.body.len() as u64);
            self.moved.fetch_add(size, Ordering::Relaxed);
            self.reads.fetch_add(1, Ordering::Relaxed);
            Ok(object)
        })
    }
    fn put<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        body: Bytes,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        self.moved.fetch_add(body.len() as u64, Ordering::Relaxed);
        self.inner.put(bucket, key, body, condition)
    }
    fn get_range<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        range: ByteRange,
    ) -> BoxFuture<'a, Result<Option<Ranged>, StoreError>> {
        Box::pin(async move {
            let ranged = self.inner.get_range(bucket, key, range).await?;
            let size = ranged.as_ref().map_or(0, |r| r.body.len() as u64);
            self.moved.fetch_add(size, Ordering::Relaxed);
            self.reads.fetch_add(1, Ordering::Relaxed);
            Ok(ranged)
        })
    }
    fn delete<'a>(&'a self, bucket: Bucket, key: &'a ObjectKey) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete(bucket, key)
    }
    fn list<'a>(
        &'a self,
        bucket: Bucket,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectInfo>, StoreError>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.list(bucket, prefix)
    }
}

pub async fn setup() -> (tempfile::TempDir, Arc<Counting>, Arc<Memory>, Db) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting {
        inner: LocalStore::new(dir.path()),
        moved: AtomicU64::new(0),
        reads: AtomicU64::new(0),
    });
    store.ensure_buckets().await.unwrap();
    let db = Db::scratch().await;
    let memory = Memory::new(store.clone(), db.clone(), None, Settings::default());
    memory.load_search_index().await.unwrap();
    (dir, store, memory, db)
}
