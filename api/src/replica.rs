//! This process's name among replicas (`{host}-{pid}-{random}`): it holds the
//! scheduler's task leases and the leases of the agent runs it is working on.
//! A leaf module: it imports nothing from the crate.

use std::sync::OnceLock;

/// The same name for the whole life of the process.
pub fn id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "onyx".into());
        format!(
            "{host}-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        )
    })
}
