//! `onyx doctor`: validates the config and checks every configured dependency,
//! printing one table row per check. Exits non-zero when anything failed.
//! It builds the app as `serve` does (so the database is migrated), then
//! stops what that started.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::app::{App, detect_local_ollama};
use crate::config;
use crate::health::{State, Stores, embedder_health, probe_providers, probe_stores};

struct Row {
    check: String,
    ok: bool,
    detail: String,
}

pub async fn run(config_path: Option<PathBuf>) -> ExitCode {
    let mut rows = Vec::new();
    let path = config::locate(config_path.as_deref());
    let loaded = config::load(path.as_deref())
        .and_then(|config| crate::agents::tools::registry::check_config(&config).map(|()| config));
    let mut config = match loaded {
        Ok(config) => config,
        Err(err) => {
            rows.push(Row {
                check: "config".into(),
                ok: false,
                detail: err.to_string(),
            });
            print_table(&rows);
            return ExitCode::FAILURE;
        }
    };
    let source = config.source.as_ref().map(|p| p.display().to_string());
    rows.push(Row {
        check: "config".into(),
        ok: true,
        detail: source.unwrap_or_else(|| "embedded default (no file)".into()),
    });
    rows.push(Row {
        check: "build".into(),
        ok: true,
        detail: format!(
            "onyx {}, {}",
            env!("CARGO_PKG_VERSION"),
            crate::features::describe()
        ),
    });
    detect_local_ollama(&mut config).await;
    rows.push(data_dir_row(&config.storage.data_dir));
    match App::new(&config).await {
        Err(err) => rows.push(Row {
            check: "providers".into(),
            ok: false,
            detail: err.to_string(),
        }),
        Ok(app) => {
            let open = !app.auth.required();
            let loopback = config.gateway.listen.ip().is_loopback();
            rows.push(Row {
                check: "auth".into(),
                ok: !open || loopback,
                detail: match (open, loopback) {
                    (false, _) => format!(
                        "{} key(s) from config/env, plus keys from `onyx keys`",
                        app.auth.config_key_count()
                    ),
                    (true, true) => "no API key: loopback only".into(),
                    (true, false) => format!(
                        "no API key but listening on {}: serve will refuse",
                        config.gateway.listen
                    ),
                },
            });
            rows.push(exec_sandbox_row(&config.tools.exec_sandbox));
            let vault = app.providers.vault();
            let unusable: Vec<String> = app
                .providers
                .views()
                .into_iter()
                .filter_map(|v| v.error.map(|e| format!("{}: {e}", v.name)))
                .collect();
            rows.push(Row {
                check: "master key".into(),
                ok: unusable.is_empty(),
                detail: if unusable.is_empty() {
                    format!("{} (key id {})", vault.source(), vault.key_id())
                } else {
                    unusable.join("; ")
                },
            });
            if app.router.providers().is_empty() {
                rows.push(Row {
                    check: "providers".into(),
                    ok: false,
                    detail: "none configured: set OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST, or add one on the Config page".into(),
                });
            }
            let stores = Stores {
                db: &app.db,
                objects: app.objects.as_ref(),
                parked_sessions: app.sessions.pending_count(),
            };
            rows.push(schema_row(&app.db).await);
            let mut deps = probe_stores(stores).await;
            deps.extend(probe_providers(&app.router).await);
            deps.push(embedder_health(&app.memory, Some(std::time::Duration::from_secs(5))).await);
            for dep in deps {
                rows.push(Row {
                    check: format!("{} ({})", dep.name, dep.kind),
                    ok: dep.status != State::Down,
                    detail: format!("{} ms, {}", dep.latency_ms, dep.detail.unwrap_or_default()),
                });
            }
            app.plugins.stop().await;
            app.background.shutdown(std::time::Duration::from_secs(2)).await;
        }
    }
    print_table(&rows);
    if rows.iter().all(|r| r.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What `exec` (and the vendor CLIs) run under here: each part of the
/// confinement, and whether exec would be refused.
fn exec_sandbox_row(exec: &crate::config::ExecSandbox) -> Row {
    let support = crate::sandbox::support();
    let refused = crate::sandbox::refusal(support, exec.require, exec.network);
    let mut detail = support.describe();
    if exec.network {
        detail.push_str("; tools.exec.network: true (network kept)");
    }
    if exec.require {
        detail.push_str("; tools.exec.requireSandbox: true");
    }
    if let Some(refused) = &refused {
        detail.push_str(&format!("; {refused}"));
    }
    Row {
        check: "exec sandbox".into(),
        // Unconfined is reported; it fails only when exec would be refused.
        ok: refused.is_none(),
        detail,
    }
}

async fn schema_row(db: &crate::storage::Db) -> Row {
    let known = crate::storage::SCHEMA_VERSION;
    match db.schema_version().await {
        Ok(version) => Row {
            check: "schema".into(),
            ok: version == known,
            detail: format!("version {version} (this onyx migrates up to {known})"),
        },
        Err(err) => Row {
            check: "schema".into(),
            ok: false,
            detail: err.to_string(),
        },
    }
}

fn data_dir_row(dir: &Path) -> Row {
    let check = "data dir".to_string();
    let existing = dir.ancestors().find(|p| p.exists());
    match existing {
        Some(p) if p.metadata().is_ok_and(|m| !m.permissions().readonly()) => Row {
            check,
            ok: true,
            detail: if p == dir {
                format!("{}", dir.display())
            } else {
                format!("{} (will be created)", dir.display())
            },
        },
        _ => Row {
            check,
            ok: false,
            detail: format!("{} is not writable", dir.display()),
        },
    }
}

fn print_table(rows: &[Row]) {
    let width = rows.iter().map(|r| r.check.len()).max().unwrap_or(5).max(5);
    println!("{:<width$}  {:<6}  DETAIL", "CHECK", "STATUS");
    for row in rows {
        let status = if row.ok { "ok" } else { "FAIL" };
        println!("{:<width$}  {:<6}  {}", row.check, status, row.detail);
    }
}
