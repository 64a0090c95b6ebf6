//! The `s3` object store (aws-sdk-s3): MinIO or any S3-compatible server, with a
//! custom endpoint, path-style addressing, static credentials or the usual AWS
//! credential chain. Conditional writes are S3's `If-None-Match: *` and
//! `If-Match: <etag>`; versions are ETags.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};

use super::keys::ObjectKey;
use super::object_store::{
    Bucket, ByteRange, Object, ObjectInfo, ObjectStore, PutCondition, Ranged, StoreError, Version,
};

pub struct S3Store {
    client: Client,
    bucket_prefix: String,
}

pub struct S3Settings<'a> {
    pub endpoint: Option<&'a str>,
    pub region: &'a str,
    pub access_key: Option<&'a SecretString>,
    pub secret_key: Option<&'a SecretString>,
    pub bucket_prefix: &'a str,
}

impl S3Store {
    pub async fn new(settings: S3Settings<'_>) -> Self {
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(5))
            .operation_timeout(Duration::from_secs(60))
            .build();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.to_string()))
            .timeout_config(timeouts);
        if let (Some(access), Some(secret)) = (settings.access_key, settings.secret_key) {
            let credentials = Credentials::new(
                access.expose_secret(),
                secret.expose_secret(),
                None,
                None,
                "onyx-config",
            );
            loader = loader.credentials_provider(credentials);
        }
        if let Some(endpoint) = settings.endpoint {
            loader = loader.endpoint_url(endpoint.trim_end_matches('/'));
        }
        let shared = loader.load().await;
        let config = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(true)
            .build();
        Self {
            client: Client::from_conf(config),
            bucket_prefix: settings.bucket_prefix.to_string(),
        }
    }

    fn bucket(&self, bucket: Bucket) -> String {
        format!("{}{}", self.bucket_prefix, bucket.name())
    }
}

/// The HTTP status of a failed call, when the server answered at all.
fn status<E>(err: &SdkError<E, aws_smithy_runtime_api::http::Response>) -> Option<u16> {
    err.raw_response().map(|r| r.status().as_u16())
}

fn unavailable<E: std::error::Error + 'static>(
    err: SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> StoreError {
    StoreError::Unavailable(crate::error_chain::root_cause(&err))
}

fn etag(tag: Option<&str>) -> Version {
    Version(tag.unwrap_or_default().to_string())
}

/// An answer's whole body.
async fn read_body(body: ByteStream) -> Result<Bytes, StoreError> {
    Ok(body
        .collect()
        .await
        .map_err(|err| StoreError::Unavailable(err.to_string()))?
        .into_bytes())
}

impl ObjectStore for S3Store {
    fn backend(&self) -> &'static str {
        "s3"
    }

    fn ensure_buckets(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        async move {
            for bucket in Bucket::ALL {
                let name = self.bucket(bucket);
                match self.client.head_bucket().bucket(&name).send().await {
                    Ok(_) => continue,
                    Err(err) if status(&err) == Some(404) => {}
                    Err(err) => return Err(unavailable(err)),
                }
                match self.client.create_bucket().bucket(&name).send().await {
                    Ok(_) => tracing::info!(bucket = %name, "created bucket"),
                    // Another replica created it first.
                    Err(err) if status(&err) == Some(409) => {}
                    Err(err) => return Err(unavailable(err)),
                }
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
            let result = self
                .client
                .get_object()
                .bucket(self.bucket(bucket))
                .key(key.as_str())
                .send()
                .await;
            let output = match result {
                Ok(output) => output,
                Err(err) if status(&err) == Some(404) => return Ok(None),
                Err(err) => return Err(unavailable(err)),
            };
            let version = etag(output.e_tag());
            let body = read_body(output.body).await?;
            Ok(Some(Object { body, version }))
        }
        .boxed()
    }

    fn get_range<'a>(
        &'a self,
        bucket: Bucket,
        key: &'a ObjectKey,
        range: ByteRange,
    ) -> BoxFuture<'a, Result<Option<Ranged>, StoreError>> {
        async move {
            let header = match range {
                ByteRange::Head(n) => format!("bytes=0-{}", n.saturating_sub(1)),
                ByteRange::Tail(n) => format!("bytes=-{n}"),
            };
            let result = self
                .client
                .get_object()
                .bucket(self.bucket(bucket))
                .key(key.as_str())
                .range(header)
                .send()
                .await;
            let output = match result {
                Ok(output) => output,
                Err(err) if status(&err) == Some(404) => return Ok(None),
                // An empty object has no byte to range over (or n was 0);
                // some servers refuse a range past the object's end (400, or
                // s3s-fs's 500): the whole object, which a broken server fails
                // to send too.
                Err(err) if matches!(status(&err), Some(416 | 400 | 500)) => {
                    return Ok(self.get(bucket, key).await?.map(|o| Ranged::of(o.body, range)));
                }
                Err(err) => return Err(unavailable(err)),
            };
            // `bytes 0-99/1234`; a server that ignored the range sends it all.
            let total = output
                .content_range()
                .and_then(|r| r.rsplit_once('/'))
                .and_then(|(_, total)| total.parse::<u64>().ok());
            let body = read_body(output.body).await?;
            Ok(Some(match total {
                Some(total) => Ranged { body, total },
                None => Ranged::of(body, range),
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
            let mut request = self
                .client
                .put_object()
                .bucket(self.bucket(bucket))
                .key(key.as_str())
                .body(ByteStream::from(body));
            request = match condition {
                PutCondition::Overwrite => request,
                PutCondition::IfAbsent => request.if_none_match("*"),
                PutCondition::IfMatch(version) => request.if_match(version.0),
            };
            match request.send().await {
                Ok(output) => Ok(etag(output.e_tag())),
                // 412: the condition failed; 409: a concurrent conditional write won.
                Err(err) if matches!(status(&err), Some(412 | 409)) => Err(StoreError::PreconditionFailed),
                Err(err) => Err(unavailable(err)),
            }
        }
        .boxed()
    }

    fn delete<'a>(&'a self, bucket: Bucket, key: &'a ObjectKey) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            match self
                .client
                .delete_object()
                .bucket(self.bucket(bucket))
                .key(key.as_str())
                .send()
                .await
            {
                Ok(_) => Ok(()),
                Err(err) if status(&err) == Some(404) => Ok(()),
                Err(err) => Err(unavailable(err)),
            }
        }
        .boxed()
    }

    fn list<'a>(
        &'a self,
        bucket: Bucket,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectInfo>, StoreError>> {
        async move {
            let mut out = Vec::new();
            let mut token = None;
            loop {
                let page = self
                    .client
                    .list_objects_v2()
                    .bucket(self.bucket(bucket))
                    .prefix(prefix)
                    .set_continuation_token(token)
                    .send()
                    .await
                    .map_err(unavailable)?;
                for object in page.contents() {
                    if let Some(key) = object.key() {
                        out.push(ObjectInfo {
                            key: key.to_string(),
                            size: object.size().unwrap_or(0).max(0) as u64,
                            etag: object.e_tag().unwrap_or_default().to_string(),
                        });
                    }
                }
                token = page.next_continuation_token().map(String::from);
                if token.is_none() {
                    break;
                }
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(out)
        }
        .boxed()
    }
}
