//! The `ObjectStore` trait: what Onyx needs from a bucket store, implemented by
//! a local directory and by S3 (MinIO). Writes can be conditional on the object
//! being absent or unchanged since it was read, so concurrent writers never
//! silently overwrite each other.

use bytes::Bytes;
use futures::future::BoxFuture;

use super::keys::ObjectKey;

/// The buckets Onyx uses; names get the configured prefix on S3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    Memory,
    Sessions,
}

impl Bucket {
    pub const ALL: [Bucket; 2] = [Bucket::Memory, Bucket::Sessions];

    pub fn name(self) -> &'static str {
        match self {
            Bucket::Memory => "onyx-memory",
            Bucket::Sessions => "onyx-sessions",
        }
    }
}

/// An opaque version of an object's content (an ETag on S3, a content hash locally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub String);

#[derive(Debug, Clone)]
pub enum PutCondition {
    /// Write whatever is there.
    Overwrite,
    /// Write only if no object has this key (`If-None-Match: *`).
    IfAbsent,
    /// Write only if the object is still at this version (`If-Match`).
    IfMatch(Version),
}

#[derive(Debug, Clone)]
pub struct Object {
    pub body: Bytes,
    pub version: Version,
}

/// Which bytes of an object a ranged read wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// The first `n` bytes (all of a shorter object).
    Head(u64),
    /// The last `n` bytes (all of a shorter object).
    Tail(u64),
}

/// What a ranged read returns: the bytes asked for and the object's whole size.
#[derive(Debug, Clone)]
pub struct Ranged {
    pub body: Bytes,
    pub total: u64,
}

impl Ranged {
    /// The range of a whole object already read.
    pub fn of(body: Bytes, range: ByteRange) -> Self {
        let total = body.len() as u64;
        let body = match range {
            ByteRange::Head(n) => body.slice(..(n.min(total) as usize)),
            ByteRange::Tail(n) => body.slice((total - n.min(total)) as usize..),
        };
        Self { body, total }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    /// Changes whenever the content may have: the ETag on S3, the
    /// modification time and size locally. Not comparable to [`Version`].
    pub etag: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The write's condition did not hold: someone else wrote first.
    #[error("the object changed or already exists")]
    PreconditionFailed,
    #[error(transparent)]
    InvalidKey(#[from] super::keys::InvalidKey),
    /// The store could not be reached or refused the request.
    #[error("object store unavailable: {0}")]
    Unavailable(String),
}

pub trait ObjectStore: Send + Sync {
    /// `local` or `s3`, for `/health` and logs.
    fn backend(&self) -> &'static str;
    /// Creates the buckets that are missing.
    fn ensure_buckets(&self) -> BoxFuture<'_, Result<(), StoreError>>;
    fn get<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<Option<Object>, StoreError>>;
    fn put<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        body: Bytes,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<Version, StoreError>>;
    /// Part of an object (S3's `Range`), so reading the start and end of a
    /// long file costs the same as of a short one; `None` when it is missing.
    fn get_range<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        range: ByteRange,
    ) -> BoxFuture<'a, Result<Option<Ranged>, StoreError>>;
    /// Deleting a missing object succeeds.
    fn delete<'a>(&'a self, bucket: Bucket, key: &'a ObjectKey) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Every object whose key starts with `prefix`, sorted by key.
    fn list<'a>(
        &'a self,
        bucket: Bucket,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectInfo>, StoreError>>;
}
