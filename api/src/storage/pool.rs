//! Several WebSocket connections to one SurrealDB server
//! (`storage.surrealdb.connections`), each query sent on the one with the
//! fewest queries in flight.
//!
//! A SurrealDB 3.3 server works through all of one connection's requests in
//! one task (`rpc/websocket.rs` polls them in a single `FuturesUnordered`).
//! Over one connection a replica therefore uses one of the server's cores,
//! and a query that computes for a while holds up every query behind it:
//! on a busy day a run's claim waited seconds behind turns' writes and
//! landed with its lease already spent. With a few connections the server
//! runs a replica's queries on all its cores, and a short query goes out on
//! a connection that is not busy.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use secrecy::ExposeSecret;
use surrealdb::Surreal;
use surrealdb::engine::any::Any;

use super::error::{DbError, retry_lost_races};
use crate::config::SurrealConfig;

pub(super) struct Pool {
    connections: Box<[Connection]>,
    /// Where the search for the least busy connection starts, turned by
    /// every checkout so that idle connections share the work.
    next: AtomicUsize,
}

struct Connection {
    client: Arc<Surreal<Any>>,
    in_flight: AtomicUsize,
}

/// A connection taken for one query; counted busy until dropped.
pub(super) struct Checkout<'a> {
    connection: &'a Connection,
}

impl Checkout<'_> {
    pub(super) fn client(&self) -> &Surreal<Any> {
        &self.connection.client
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        self.connection.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    /// Opens `count` connections (at least one), each signed in and on the
    /// configured namespace and database.
    pub(super) async fn connect(config: &SurrealConfig, count: usize) -> Result<Self, DbError> {
        // The first connection alone, so that the namespace and database it
        // may create are there before the others select them.
        let first = connect_one(config).await?;
        let rest = futures::future::try_join_all((1..count).map(|_| connect_one(config))).await?;
        Ok(Self {
            connections: std::iter::once(first)
                .chain(rest)
                .map(|client| Connection {
                    client: Arc::new(client),
                    in_flight: AtomicUsize::new(0),
                })
                .collect(),
            next: AtomicUsize::new(0),
        })
    }

    /// The first connection: the one whose session holds state across
    /// queries (live queries and their kills, the UI's session store).
    pub(super) fn primary(&self) -> &Arc<Surreal<Any>> {
        &self.connections[0].client
    }

    pub(super) fn len(&self) -> usize {
        self.connections.len()
    }

    /// The connection with the fewest queries in flight (ties go round).
    pub(super) fn least_busy(&self) -> Checkout<'_> {
        let count = self.connections.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % count;
        let connection = (0..count)
            .map(|offset| &self.connections[(start + offset) % count])
            .min_by_key(|connection| connection.in_flight.load(Ordering::Relaxed))
            .unwrap_or(&self.connections[0]);
        connection.in_flight.fetch_add(1, Ordering::Relaxed);
        Checkout { connection }
    }
}

async fn connect_one(config: &SurrealConfig) -> Result<Surreal<Any>, DbError> {
    let db = surrealdb::engine::any::connect(config.url.as_str()).await?;
    if let (Some(user), Some(pass)) = (&config.user, &config.pass) {
        let root = surrealdb::opt::auth::Root {
            username: user.clone(),
            password: pass.expose_secret().to_string(),
        };
        db.signin(root).await?;
    }
    // Selecting a namespace or database that does not exist yet creates it:
    // replicas started together against a fresh server race to do that, and
    // the losers are told to try again.
    retry_lost_races(SELECT_ATTEMPTS, SELECT_STEP, DbError::is_conflict, || async {
        db.use_ns(config.namespace.as_str())
            .use_db(config.database.as_str())
            .await
            .map_err(DbError::from)
    })
    .await?;
    Ok(db)
}

/// How many times selecting the namespace and database is tried.
const SELECT_ATTEMPTS: u32 = 10;
const SELECT_STEP: Duration = Duration::from_millis(10);
