//! The SurrealDB handle, chosen by URL: `surrealkv://` under the data dir by
//! default (opened by `embedded`, with its memory capped), `mem://` for tests,
//! `ws://` for a server (signed in when credentials are configured).
//! Connecting does not migrate: that is `Db::migrate` (in `migrations`), an
//! explicit step of whatever needs the schema.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use surrealdb::Surreal;
use surrealdb::engine::any::Any;
use surrealdb::engine::local::Db as Local;
use surrealdb_engine_local::Datastore;

use super::error::{DbError, retry_lost_races};
use super::pool::Pool;
use crate::config::SurrealConfig;

/// A conflicted query is run this many times at most, `CONFLICT_STEP` apart and more.
const CONFLICT_ATTEMPTS: u32 = 11;
const CONFLICT_STEP: std::time::Duration = std::time::Duration::from_millis(5);
const FAILED_TRANSACTION_ECHO: &str = "due to a failed transaction";

/// The SurrealDB client: embedded SurrealKV is opened by Onyx itself (to size
/// its caches), anything else through the SDK's URL dispatch.
#[derive(Clone)]
pub enum Client {
    Any(Arc<Surreal<Any>>),
    Embedded(Arc<Surreal<Local>>),
}

/// Runs `$body` with `$c` bound to whichever client this is.
macro_rules! with_client {
    ($client:expr, $c:ident => $body:expr) => {
        match $client {
            Client::Any($c) => $body,
            Client::Embedded($c) => $body,
        }
    };
}

/// A cheap-to-clone database handle.
#[derive(Clone)]
pub struct Db {
    pub(super) inner: Client,
    /// The URL without credentials, for `/health` and logs.
    pub url: String,
    /// The embedded datastore, closed by [`close`](Self::close).
    datastore: Option<Arc<Datastore>>,
    /// Kills of dropped live queries still in flight, awaited by
    /// [`close`](Self::close) so none races the store's shutdown.
    kills: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    /// A server's settings, for its HTTP endpoints (the dump's export and
    /// import, in `dump`); `None` for embedded and `mem://` stores.
    pub(super) server: Option<Arc<SurrealConfig>>,
    /// The connections queries are spread over (a server's several, one
    /// for `mem://`); `inner` is the first. `None` for embedded storage.
    pool: Option<Arc<Pool>>,
}

/// Which connection of a pool a query may go out on.
#[derive(Clone, Copy)]
enum Route {
    /// The least busy one.
    Any,
    /// The first, whose session keeps what a query leaves behind (a live
    /// query is killed on the connection that started it).
    Primary,
}

impl Db {
    pub async fn connect(config: &SurrealConfig) -> Result<Self, DbError> {
        if let Some(path) = config.url.strip_prefix("surrealkv://") {
            let embedded = super::embedded::open(path, &config.embedded).await?;
            embedded
                .client
                .use_ns(config.namespace.as_str())
                .use_db(config.database.as_str())
                .await?;
            return Ok(Self {
                inner: Client::Embedded(Arc::new(embedded.client)),
                url: config.url.clone(),
                datastore: Some(embedded.datastore),
                kills: Arc::default(),
                server: None,
                pool: None,
            });
        }
        let is_server = ["ws://", "wss://", "http://", "https://"]
            .iter()
            .any(|scheme| config.url.starts_with(scheme));
        // Over HTTP every request is a connection of its own already.
        let count = if config.url.starts_with("ws") {
            config.connections
        } else {
            1
        };
        let pool = Pool::connect(config, count).await?;
        Ok(Self {
            inner: Client::Any(pool.primary().clone()),
            url: config.url.clone(),
            datastore: None,
            kills: Arc::default(),
            server: is_server.then(|| Arc::new(config.clone())),
            pool: Some(Arc::new(pool)),
        })
    }

    /// How many connections queries are spread over (1 in process).
    pub fn connections(&self) -> usize {
        self.pool.as_ref().map_or(1, |pool| pool.len())
    }

    /// A connection of its own to the same database, for writes that must
    /// not queue behind everything else this process sends (lease renewals:
    /// a server works through one connection's requests in one task, so on a
    /// busy day a renewal could wait out its own lease).
    /// Embedded and `mem://` stores run in this process: the same handle.
    pub async fn dedicated(&self) -> Result<Db, DbError> {
        match &self.server {
            Some(config) => {
                let one = SurrealConfig {
                    connections: 1,
                    ..SurrealConfig::clone(config)
                };
                Db::connect(&one).await
            }
            None => Ok(self.clone()),
        }
    }

    /// Closes embedded storage now, on this runtime (every handle's later
    /// queries fail); a server connection closes with its last handle.
    pub async fn close(&self) -> Result<(), DbError> {
        let kills = std::mem::take(&mut *self.kills.lock().unwrap_or_else(|e| e.into_inner()));
        let _ = tokio::time::timeout(KILLS_AT_CLOSE, futures::future::join_all(kills)).await;
        match &self.datastore {
            Some(datastore) => super::embedded::shutdown(datastore).await,
            None => Ok(()),
        }
    }

    /// Whether other processes may write this database (a SurrealDB server);
    /// embedded storage is opened by this process alone.
    pub fn is_shared(&self) -> bool {
        self.server.is_some()
    }

    /// The directory of embedded storage (`surrealkv://{dir}`); `None` for a server.
    pub fn embedded_dir(&self) -> Option<std::path::PathBuf> {
        let path = self.url.strip_prefix("surrealkv://")?;
        let path = path.split_once('?').map_or(path, |(dir, _)| dir);
        Some(std::path::PathBuf::from(path))
    }

    /// The SurrealDB client, for libraries that bring their own queries
    /// (the UI's cookie-session store).
    pub fn client(&self) -> Client {
        self.inner.clone()
    }

    /// Runs one or more statements with JSON parameters; checks every statement succeeded.
    pub async fn execute(
        &self,
        sql: &str,
        vars: serde_json::Value,
    ) -> Result<surrealdb::IndexedResults, DbError> {
        self.execute_on(Route::Any, sql, vars).await
    }

    async fn execute_on(
        &self,
        route: Route,
        sql: &str,
        vars: serde_json::Value,
    ) -> Result<surrealdb::IndexedResults, DbError> {
        let started = std::time::Instant::now();
        let mut response = match (&self.pool, route) {
            (Some(pool), Route::Any) => {
                let connection = pool.least_busy();
                connection.client().query(sql).bind(vars).await?
            }
            _ => with_client!(&self.inner, c => c.query(sql).bind(vars).await?),
        };
        // `ONYX_LOG=warn,onyx::sql=trace`: each query and its time, to find
        // the statements that grow with a store (see bench/README.md, Soak).
        tracing::trace!(
            target: "onyx::sql",
            micros = started.elapsed().as_micros() as u64,
            sql = %sql.split_whitespace().collect::<Vec<_>>().join(" "),
        );
        let mut errors: Vec<(usize, String)> = response
            .take_errors()
            .into_iter()
            .map(|(index, err)| (index, err.to_string()))
            .collect();
        // In a failed transaction every statement reports the failure; the
        // one that says why is the one that is not that echo.
        errors.sort_by_key(|(index, message)| (message.contains(FAILED_TRANSACTION_ECHO), *index));
        if let Some((_, message)) = errors.into_iter().next() {
            return Err(DbError::Surreal(message));
        }
        Ok(response)
    }

    /// Like [`execute`](Self::execute), retried when SurrealDB reports a
    /// transaction conflict (concurrent writers to the same index keys). Only
    /// for idempotent queries or single transactions: a conflict rolls the
    /// failed transaction back, so running the query again is safe.
    pub async fn execute_retrying(
        &self,
        sql: &str,
        vars: serde_json::Value,
    ) -> Result<surrealdb::IndexedResults, DbError> {
        retry_lost_races(CONFLICT_ATTEMPTS, CONFLICT_STEP, DbError::is_conflict, || {
            self.execute(sql, vars.clone())
        })
        .await
    }

    /// Like [`rows`](Self::rows), retried on a transaction conflict (for
    /// single-statement writes that other writers touch at the same time).
    pub async fn rows_retrying<T: DeserializeOwned>(
        &self,
        sql: &str,
        vars: serde_json::Value,
        index: usize,
    ) -> Result<Vec<T>, DbError> {
        let mut response = self.execute_retrying(sql, vars).await?;
        Self::take_rows(&mut response, index)
    }

    /// Runs a query and reads statement `index` as rows of `T`.
    pub async fn rows<T: DeserializeOwned>(
        &self,
        sql: &str,
        vars: serde_json::Value,
        index: usize,
    ) -> Result<Vec<T>, DbError> {
        let mut response = self.execute(sql, vars).await?;
        Self::take_rows(&mut response, index)
    }

    /// The operators of the plan SurrealDB picks for the `SELECT` in `sql`
    /// (its `EXPLAIN`), outermost first: a test checks that a query run
    /// often reads through an index (`IndexScan`) rather than every row
    /// (`TableScan`), so its cost does not grow with its table.
    #[cfg(test)]
    pub async fn plan(&self, sql: &str, vars: serde_json::Value) -> Vec<String> {
        fn walk(node: &serde_json::Value, operators: &mut Vec<String>) {
            if let Some(operator) = node["operator"].as_str() {
                operators.push(operator.to_string());
            }
            for child in node["children"].as_array().into_iter().flatten() {
                walk(child, operators);
            }
        }
        let plans: Vec<serde_json::Value> = match self.rows(&format!("{sql} EXPLAIN"), vars, 0).await {
            Ok(plans) => plans,
            Err(err) => panic!("EXPLAIN {sql}: {err}"),
        };
        let mut operators = Vec::new();
        plans.iter().for_each(|plan| walk(plan, &mut operators));
        operators
    }

    /// Reads statement `index` of a response as rows of `T` (none for NONE).
    pub fn take_rows<T: DeserializeOwned>(
        response: &mut surrealdb::IndexedResults,
        index: usize,
    ) -> Result<Vec<T>, DbError> {
        let value: surrealdb::types::Value = response.take(index)?;
        let json = value.into_json_value();
        let json = match json {
            serde_json::Value::Array(_) => json,
            serde_json::Value::Null => serde_json::Value::Array(Vec::new()),
            other => serde_json::Value::Array(vec![other]),
        };
        serde_json::from_value(json).map_err(|err| DbError::Decode(err.to_string()))
    }

    /// A signal per change to `table` from any connection (a `LIVE SELECT`):
    /// how one replica hears that another changed something. Ends when the
    /// connection drops; the caller subscribes again. Dropping the stream
    /// kills the live query on this handle's session, where the namespace is
    /// selected (the SDK's own kill runs in a fresh session that has none,
    /// fails with "Specify a namespace", and is kept out of the log).
    pub async fn changes(&self, table: &str) -> Result<futures::stream::BoxStream<'static, ()>, DbError> {
        use futures::StreamExt;
        let mut response = self
            .execute_on(
                Route::Primary,
                &format!("LIVE SELECT * FROM {table}"),
                serde_json::json!({}),
            )
            .await?;
        let stream = response.stream::<surrealdb::types::Value>(0)?;
        let id: surrealdb::types::Value = response.take(0)?;
        let killer = LiveQuery {
            id: id.into_json_value(),
            db: self.clone(),
        };
        Ok(stream
            .take_while(|item| std::future::ready(item.is_ok()))
            .map(move |_| {
                let _held_until_the_stream_drops = &killer;
            })
            .boxed())
    }

    pub async fn health(&self) -> Result<(), DbError> {
        with_client!(&self.inner, c => c.health().await?);
        Ok(())
    }
}

/// How long closing waits for the kills of dropped live queries.
const KILLS_AT_CLOSE: std::time::Duration = std::time::Duration::from_secs(2);

/// A live query, killed when the stream that holds it is dropped.
struct LiveQuery {
    id: serde_json::Value,
    db: Db,
}

impl Drop for LiveQuery {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // KILL takes a UUID literal or a parameter holding a UUID value (a
        // bound JSON string is not one): the id, checked, as a `u"…"` literal.
        let Some(id) = self.id.as_str().and_then(|id| uuid::Uuid::parse_str(id).ok()) else {
            tracing::debug!(id = %self.id, "a live query's id is not a UUID; not killed");
            return;
        };
        let db = self.db.clone();
        let kill = runtime.spawn(async move {
            // A database already closed (shutdown) has no live queries left.
            if let Err(err) = db
                .execute_on(Route::Primary, &format!("KILL u\"{id}\""), serde_json::json!({}))
                .await
            {
                tracing::debug!(error = %err, "killing a live query");
            }
        });
        let mut kills = self.db.kills.lock().unwrap_or_else(|e| e.into_inner());
        kills.retain(|kill| !kill.is_finished());
        kills.push(kill);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leases are renewed on `dedicated()`: in process that must be the same
    /// store, not a second, empty in-memory one where renewals find no run.
    #[tokio::test]
    async fn a_dedicated_handle_to_an_in_memory_store_reads_the_same_rows() {
        let db = Db::scratch().await;
        let leases = db.dedicated().await.unwrap();
        db.execute("CREATE probe:one SET n = 1", serde_json::json!({}))
            .await
            .unwrap();
        let rows: Vec<serde_json::Value> = leases
            .rows("SELECT VALUE n FROM probe:one", serde_json::json!({}), 0)
            .await
            .unwrap();
        assert_eq!(rows, [serde_json::json!(1)]);
        assert!(!db.is_shared());
        assert_eq!(db.connections(), 1);
    }
}
