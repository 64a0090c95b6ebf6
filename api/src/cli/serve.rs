//! `onyx serve`: load config, build the app (which migrates the database),
//! listen, and shut down gracefully on SIGTERM/SIGINT: in-flight requests and
//! streams, then the background loops, get a bounded grace period.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use axum::serve::ListenerExt;

use crate::app::{App, StartupError, detect_local_ollama};
use crate::{config, http, observability};

/// The least time the background loops get to stop, however long requests took.
const BACKGROUND_STOP_MIN: std::time::Duration = std::time::Duration::from_secs(1);
/// How long embedded storage gets to flush and close after everything else stopped.
const DATABASE_CLOSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn run(config_path: Option<PathBuf>, listen: Option<SocketAddr>) -> ExitCode {
    // Held to the end so the last lines (the error below too) are written out.
    let mut logs = None;
    match serve(config_path, listen, &mut logs).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            eprintln!("onyx: {err}");
            ExitCode::FAILURE
        }
    }
}

/// With `RUST_BACKTRACE` on and `RUST_LIB_BACKTRACE` unset, every library
/// error (`anyhow`, SurrealDB's own included) captures a backtrace, which
/// costs a stack walk each: said once, with how to keep them for panics only.
fn note_library_backtraces() {
    let on = |name: &str| std::env::var_os(name).is_some_and(|value| value != "0");
    if on("RUST_BACKTRACE") && std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        tracing::info!(
            "RUST_BACKTRACE is set without RUST_LIB_BACKTRACE: library errors capture a backtrace each; \
             set RUST_LIB_BACKTRACE=0 to keep backtraces for panics only"
        );
    }
}

async fn serve(
    config_path: Option<PathBuf>,
    listen: Option<SocketAddr>,
    logs: &mut Option<observability::LogGuard>,
) -> Result<(), StartupError> {
    let path = config::locate(config_path.as_deref());
    let mut config = config::load(path.as_deref())?;
    if let Some(listen) = listen {
        config.gateway.listen = listen;
        config.tools.exec_sandbox.resolve_require(listen);
    }
    *logs = Some(observability::init_logging(config.gateway.log_format));
    match &config.source {
        Some(path) => tracing::info!(config = %path.display(), "config loaded"),
        None => tracing::info!("no config file: running on the embedded default"),
    }
    note_library_backtraces();
    detect_local_ollama(&mut config).await;
    // Probed once here (it starts the sandbox helper) rather than on the first /health.
    let sandbox = tokio::task::spawn_blocking(crate::sandbox::support).await;
    if let Ok(sandbox) = sandbox {
        tracing::info!(exec = %sandbox.describe(), "exec sandbox");
    }
    let app = Arc::new(App::new(&config).await?);
    // `onyx backup` of an embedded database asks this process for the dump.
    let control = match super::control::listen(&app.db, &config.storage.data_dir) {
        Ok(control) => control,
        Err(err) => {
            tracing::warn!(error = %err, "no control socket: `onyx backup` needs this server stopped");
            None
        }
    };
    let addr = config.gateway.listen;
    if !app.auth.required() {
        if !addr.ip().is_loopback() {
            return Err(StartupError::OpenWithoutKey(addr));
        }
        tracing::warn!("no API key configured: accepting unauthenticated requests, on loopback only");
    }
    let names: Vec<String> = app
        .router
        .providers()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    if names.is_empty() {
        tracing::warn!(
            "no providers configured: set OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST, add providers to the config, or add one on the Config page (POST /v1/providers)"
        );
    } else {
        tracing::info!(providers = %names.join(", "), "providers ready");
    }

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| StartupError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| StartupError::Bind { addr, source })?;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // The one "listening on" line, on stdout, stable for scripts and test
    // harnesses that start on port 0; the log says "ready" (a container's
    // log shows both streams, and the address once).
    tracing::info!(address = %format!("http://{bound}"), "ready");
    println!("listening on http://{bound}");
    crate::providers::subscription::set_gateway_address(bound);

    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let service = http::router(app.clone()).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server = axum::serve(listener, service).with_graceful_shutdown(async move {
        let _ = stop_rx.changed().await;
    });
    let mut server = tokio::spawn(server.into_future());
    tokio::select! {
        _ = shutdown_signal() => {}
        result = &mut server => {
            // The server stopped on its own: an accept loop failure.
            if let Ok(Err(source)) = result {
                return Err(StartupError::Bind { addr: bound, source });
            }
            return Ok(());
        }
    }
    let grace = config.gateway.shutdown_grace;
    tracing::info!(?grace, "shutting down: finishing in-flight requests");
    let _ = stop_tx.send(true);
    app.shutting_down.send_replace(true);
    let started = tokio::time::Instant::now();
    app.plugins.stop().await;
    match tokio::time::timeout(grace, server).await {
        Ok(_) => tracing::info!("stopped cleanly"),
        Err(_) => tracing::warn!("grace period over; closing the remaining connections"),
    }
    // Then the background loops, in what is left of the grace period (at
    // least a moment, so each loop is awaited rather than cut off).
    // Usage records still queued are written before the loops stop.
    let _ = tokio::time::timeout(BACKGROUND_STOP_MIN, app.usage.flush()).await;
    let left = grace.saturating_sub(started.elapsed()).max(BACKGROUND_STOP_MIN);
    app.background.shutdown(left).await;
    // No run is left to read them: agents' background commands end now.
    app.agents.processes.stop_all().await;
    // MCP servers last: no run is left to call them, and each gets its own
    // grace to exit (their process groups are killed after it).
    app.mcp.shutdown().await;
    crate::providers::subscription::stop_all();
    crate::providers::subscription::seal_at_rest();
    drop(control);
    close_database(app).await;
    Ok(())
}

/// Closes embedded storage on this runtime (flushed, so the next start does
/// not replay its log), drops the app (the database's last handles) and
/// waits until the store has released its lock.
async fn close_database(app: Arc<App>) {
    let Some(dir) = app.db.embedded_dir() else {
        return;
    };
    if let Err(err) = app.db.close().await {
        tracing::warn!(error = %err, "closing the database");
    }
    drop(app);
    let started = tokio::time::Instant::now();
    if crate::storage::wait_closed(&dir, DATABASE_CLOSE_LIMIT).await {
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "database closed"
        );
    } else {
        tracing::warn!(
            limit = ?DATABASE_CLOSE_LIMIT,
            "the database is still open (a handle outlived shutdown): the next start replays its write-ahead log"
        );
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
