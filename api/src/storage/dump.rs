//! The database as one SurrealQL dump (what `onyx backup` archives and
//! `onyx restore` loads): SurrealDB's own export, made in one read
//! transaction, so a dump taken while Onyx writes is a consistent snapshot.
//! Embedded and `mem://` stores go through the SDK's local engine; a server
//! through its HTTP `/export` and `/import` endpoints (the SDK's WebSocket
//! engine has neither), signed in with the configured credentials.

use std::path::Path;

use futures::{StreamExt, TryStreamExt};
use secrecy::{ExposeSecret, SecretString};
use tokio::io::AsyncWriteExt;

use super::db::{Client, Db};
use super::error::DbError;
use crate::config::SurrealConfig;

/// How much of a failed request's answer is kept in the error.
const ERROR_BODY_LIMIT: usize = 2_000;
/// Bytes read from the dump file per chunk of an import request.
const UPLOAD_CHUNK: usize = 1 << 20;

/// A SurrealDB server's HTTP side, for the endpoints its RPC lacks.
pub struct ServerAccess {
    base: url::Url,
    user: Option<String>,
    pass: Option<SecretString>,
    namespace: String,
    database: String,
    http: reqwest::Client,
}

fn failed(what: &str, err: impl std::fmt::Display) -> DbError {
    DbError::Dump(format!("{what}: {err}"))
}

impl ServerAccess {
    /// The HTTP address of the server behind a `ws://`/`wss://`/`http(s)://` URL.
    pub fn for_config(config: &SurrealConfig) -> Option<Self> {
        let mut base = url::Url::parse(&config.url).ok()?;
        let scheme = match base.scheme() {
            "ws" | "http" => "http",
            "wss" | "https" => "https",
            _ => return None,
        };
        base.set_scheme(scheme).ok()?;
        base.set_path("/");
        base.set_query(None);
        Some(Self {
            base,
            user: config.user.clone(),
            pass: config.pass.clone(),
            namespace: config.namespace.clone(),
            database: config.database.clone(),
            http: reqwest::Client::new(),
        })
    }

    fn request(&self, method: reqwest::Method, endpoint: &str) -> Result<reqwest::RequestBuilder, DbError> {
        let url = self.base.join(endpoint).map_err(|err| failed(endpoint, err))?;
        let mut request = self
            .http
            .request(method, url)
            .header("surreal-ns", &self.namespace)
            .header("surreal-db", &self.database);
        if let Some(user) = &self.user {
            request = request.basic_auth(user, self.pass.as_ref().map(|p| p.expose_secret().to_string()));
        }
        Ok(request)
    }

    async fn export(&self, file: &Path) -> Result<(), DbError> {
        let response = self
            .request(reqwest::Method::GET, "export")?
            .header("accept", "application/octet-stream")
            .send()
            .await
            .map_err(|err| failed("export request", err))?;
        let response = check(response, "export").await?;
        let mut out = tokio::fs::File::create(file)
            .await
            .map_err(|err| failed(&file.display().to_string(), err))?;
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| failed("export download", err))?;
            out.write_all(&chunk)
                .await
                .map_err(|err| failed(&file.display().to_string(), err))?;
        }
        out.sync_all()
            .await
            .map_err(|err| failed(&file.display().to_string(), err))
    }

    async fn import(&self, file: &Path) -> Result<(), DbError> {
        let source = tokio::fs::File::open(file)
            .await
            .map_err(|err| failed(&file.display().to_string(), err))?;
        let chunks = futures::stream::try_unfold(source, |mut source| async move {
            let mut buffer = vec![0u8; UPLOAD_CHUNK];
            let read = tokio::io::AsyncReadExt::read(&mut source, &mut buffer).await?;
            if read == 0 {
                return Ok::<_, std::io::Error>(None);
            }
            buffer.truncate(read);
            Ok(Some((bytes::Bytes::from(buffer), source)))
        });
        let response = self
            .request(reqwest::Method::POST, "import")?
            .header("accept", "application/json")
            .body(reqwest::Body::wrap_stream(chunks.into_stream()))
            .send()
            .await
            .map_err(|err| failed("import request", err))?;
        check(response, "import").await.map(drop)
    }
}

/// The response if it succeeded; else its status and (the start of) its body.
async fn check(response: reqwest::Response, what: &str) -> Result<reqwest::Response, DbError> {
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let body: String = body.chars().take(ERROR_BODY_LIMIT).collect();
    Err(DbError::Dump(format!("{what} answered {status}: {body}")))
}

impl Db {
    /// Writes the whole database (schema and records) as a SurrealQL dump to `file`.
    pub async fn export_to(&self, file: &Path) -> Result<(), DbError> {
        if let Some(server) = self.server.as_deref().and_then(ServerAccess::for_config) {
            return server.export(file).await;
        }
        let target = file.to_path_buf();
        match &self.inner {
            Client::Any(c) => c.export(target).await?,
            Client::Embedded(c) => c.export(target).await?,
        }
        Ok(())
    }

    /// Runs a dump made by [`export_to`](Self::export_to) against this
    /// database. Not one transaction: restore into an empty database, and
    /// empty it again if this fails.
    pub async fn import_from(&self, file: &Path) -> Result<(), DbError> {
        if let Some(server) = self.server.as_deref().and_then(ServerAccess::for_config) {
            return server.import(file).await;
        }
        match &self.inner {
            Client::Any(c) => c.import(file).await?,
            Client::Embedded(c) => c.import(file).await?,
        }
        Ok(())
    }

    /// The tables this database defines (`INFO FOR DB`).
    pub async fn tables(&self) -> Result<Vec<String>, DbError> {
        let info: Vec<serde_json::Value> = self.rows("INFO FOR DB", serde_json::json!({}), 0).await?;
        Ok(info
            .first()
            .and_then(|info| info["tables"].as_object())
            .map(|tables| tables.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// Removes every table (records and definitions): a database emptied
    /// for a restore, or after one that failed.
    pub async fn remove_all_tables(&self) -> Result<(), DbError> {
        for table in self.tables().await? {
            if !table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(DbError::Dump(format!(
                    "cannot remove table {table:?}: not a plain name"
                )));
            }
            self.execute(
                &format!("REMOVE TABLE IF EXISTS `{table}`"),
                serde_json::json!({}),
            )
            .await?;
        }
        Ok(())
    }

    /// How many records `table` holds (0 for a table never defined).
    pub async fn count(&self, table: &str) -> Result<u64, DbError> {
        if !self.tables().await?.iter().any(|t| t == table) {
            return Ok(0);
        }
        #[derive(serde::Deserialize)]
        struct Count {
            count: u64,
        }
        let rows: Vec<Count> = self
            .rows(
                "SELECT count() AS count FROM type::table($table) GROUP ALL",
                serde_json::json!({ "table": table }),
                0,
            )
            .await?;
        Ok(rows.first().map_or(0, |row| row.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_becomes_its_http_address() {
        let config = |url: &str| SurrealConfig {
            user: Some("root".into()),
            pass: Some(SecretString::from("pw")),
            ..SurrealConfig::at(url, "main")
        };
        let http = |url: &str| ServerAccess::for_config(&config(url)).map(|s| s.base.to_string());
        assert_eq!(http("ws://db:8000").as_deref(), Some("http://db:8000/"));
        assert_eq!(
            http("wss://db.example/rpc").as_deref(),
            Some("https://db.example/")
        );
        assert_eq!(
            http("http://127.0.0.1:9/").as_deref(),
            Some("http://127.0.0.1:9/")
        );
        assert_eq!(http("surrealkv:///data/db"), None);
        assert_eq!(http("mem://"), None);
    }

    #[tokio::test]
    async fn a_dump_carries_schema_and_records_into_an_empty_database() {
        let source = Db::scratch().await;
        source
            .execute(
                "CREATE session:a SET agent_id = 'main', title = 'kept'; UPSERT onyx_meta:probe SET n = 7",
                serde_json::json!({}),
            )
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("db.surql");
        source.export_to(&file).await.unwrap();
        let target = Db::connect(&super::super::migrations::scratch_config())
            .await
            .unwrap();
        assert!(target.tables().await.unwrap().is_empty());
        target.import_from(&file).await.unwrap();
        assert_eq!(target.count("session").await.unwrap(), 1);
        assert_eq!(
            target.schema_version().await.unwrap(),
            super::super::SCHEMA_VERSION
        );
        target.remove_all_tables().await.unwrap();
        assert!(target.tables().await.unwrap().is_empty(), "emptied");
    }
}
