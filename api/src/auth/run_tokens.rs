//! Run tokens: the bearer token a vendor CLI (a subscription model's run)
//! uses to call Onyx's `/mcp` for one agent run. Each is minted for one run,
//! names its agent and permission mode, and lives only in this replica's
//! memory (as a SHA-256 digest): it is never stored, never listed with the
//! user's keys, and the CLI that holds it runs on this replica and calls
//! this replica's own address. Dropping the [`RunToken`] revokes it, so a
//! run that answers, fails or is cancelled takes its token with it; a token
//! also stops working on its own after [`RUN_TOKEN_TTL`], should anything
//! keep it alive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use secrecy::SecretString;
use sha2::{Digest, Sha256};

use crate::config::PermissionMode;

/// How every run token starts, so the auth layer tells it from an API key.
pub const RUN_TOKEN_PREFIX: &str = "onyx_rt_";

/// The longest a run token works, however long its run lasts.
pub const RUN_TOKEN_TTL: Duration = Duration::from_secs(60 * 60);

/// What a run token lets its holder do: call `/mcp` as `agent`, with the
/// tools `mode` offers, for the run `run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunGrant {
    pub agent: String,
    pub mode: PermissionMode,
    pub run: String,
}

struct Live {
    grant: RunGrant,
    expires: Instant,
}

/// The run tokens alive on this replica.
#[derive(Default)]
pub struct RunTokens {
    live: Mutex<HashMap<[u8; 32], Live>>,
}

/// A minted run token; dropping it revokes it.
pub struct RunToken {
    secret: SecretString,
    digest: [u8; 32],
    tokens: Arc<RunTokens>,
}

impl RunToken {
    /// The token, for the CLI's per-run MCP config.
    pub fn secret(&self) -> &SecretString {
        &self.secret
    }
}

impl Drop for RunToken {
    fn drop(&mut self) {
        self.tokens.revoke(&self.digest);
    }
}

impl RunTokens {
    /// A new token for `grant`, working until it is dropped or `ttl` passes.
    pub fn mint(self: &Arc<Self>, grant: RunGrant, ttl: Duration) -> RunToken {
        let secret = format!(
            "{RUN_TOKEN_PREFIX}{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let now = Instant::now();
        if let Ok(mut live) = self.live.lock() {
            // Expired ones go whenever a new one comes: the map stays small.
            live.retain(|_, token| token.expires > now);
            live.insert(
                digest,
                Live {
                    grant,
                    expires: now + ttl,
                },
            );
        }
        RunToken {
            secret: SecretString::from(secret),
            digest,
            tokens: self.clone(),
        }
    }

    /// The grant of a presented run token, if it is alive and unexpired.
    pub fn identify(&self, presented: &str) -> Option<RunGrant> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let live = self.live.lock().ok()?;
        live.get(&digest)
            .filter(|token| token.expires > Instant::now())
            .map(|token| token.grant.clone())
    }

    fn revoke(&self, digest: &[u8; 32]) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(digest);
        }
    }

    /// How many tokens are alive (runs of subscription models in flight).
    pub fn len(&self) -> usize {
        self.live.lock().map_or(0, |live| live.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn expose(token: &RunToken) -> &str {
        token.secret().expose_secret()
    }

    fn grant() -> RunGrant {
        RunGrant {
            agent: "main".into(),
            mode: PermissionMode::Ask,
            run: "run-1".into(),
        }
    }

    #[test]
    fn a_token_works_until_dropped_and_never_after() {
        let tokens = Arc::new(RunTokens::default());
        let token = tokens.mint(grant(), RUN_TOKEN_TTL);
        let text = expose(&token).to_string();
        assert!(text.starts_with(RUN_TOKEN_PREFIX));
        assert_eq!(tokens.identify(&text), Some(grant()));
        assert_eq!(tokens.identify(&format!("{text}x")), None);
        assert_eq!(tokens.identify("onyx_rt_"), None);
        drop(token);
        assert_eq!(tokens.identify(&text), None, "revoked when dropped");
        assert!(tokens.is_empty());
    }

    #[test]
    fn a_token_expires_on_its_own() {
        let tokens = Arc::new(RunTokens::default());
        let token = tokens.mint(grant(), Duration::ZERO);
        assert_eq!(tokens.identify(expose(&token)), None);
        let other = tokens.mint(grant(), RUN_TOKEN_TTL);
        assert_eq!(tokens.len(), 1, "the expired one was swept: {}", tokens.len());
        assert_ne!(expose(&token), expose(&other));
    }
}
