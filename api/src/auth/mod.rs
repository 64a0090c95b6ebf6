//! Who may call Onyx: API keys (from config and `ONYX_API_KEY`, kept only as
//! SHA-256 digests and compared in constant time; and keys created with
//! `onyx keys`, stored as digests in SurrealDB, see `keys`), the UI password
//! (argon2id hashes made by `onyx hash-password`), and the run tokens a
//! subscription model's CLI calls `/mcp` with for one agent run (`run_tokens`).

mod keys;
mod password;
mod run_tokens;
mod throttle;

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use keys::{Authenticator, Caller, Denied, KEY_PREFIX, KeyBounds, KeyError, Scope, StoredKey};
pub use password::{Busy, PasswordChecks, PasswordError, hash_password, verify_password};
pub use run_tokens::{RUN_TOKEN_PREFIX, RUN_TOKEN_TTL, RunGrant, RunToken, RunTokens};
pub use throttle::{Attempt, LoginThrottle};

/// The accepted API keys, as digests.
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
    /// Each digest's key id, `config:<first 12 hex digits>`, in the same order.
    ids: Vec<Arc<str>>,
}

impl ApiKeys {
    pub fn new<'a>(keys: impl IntoIterator<Item = &'a SecretString>) -> Self {
        let mut digests: Vec<[u8; 32]> = keys.into_iter().map(|k| digest(k.expose_secret())).collect();
        digests.sort_unstable();
        digests.dedup();
        let ids = digests
            .iter()
            .map(|d| format!("config:{}", keys::hex(&d[..6])).into())
            .collect();
        Self { digests, ids }
    }

    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether `presented` is one of the keys. Every stored digest is compared,
    /// each in constant time, so timing reveals neither which key nor how much matched.
    pub fn verify(&self, presented: &str) -> bool {
        self.contains_digest(&digest(presented))
    }

    /// The id of the key with this digest, if it is one (checked as [`verify`](Self::verify) does).
    pub fn id_of(&self, candidate: &[u8; 32]) -> Option<Arc<str>> {
        if !self.contains_digest(candidate) {
            return None;
        }
        // Which one matched may take variable time: the caller holds that key.
        let at = self.digests.iter().position(|d| d == candidate)?;
        Some(self.ids[at].clone())
    }

    /// [`verify`](Self::verify) for a key already digested.
    fn contains_digest(&self, candidate: &[u8; 32]) -> bool {
        let mut matched = subtle::Choice::from(0);
        for stored in &self.digests {
            matched |= stored.ct_eq(candidate);
        }
        matched.into()
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_configured_keys() {
        let keys = [
            SecretString::from("onyx_sk_first_key_123"),
            SecretString::from("onyx_sk_second_key_456"),
        ];
        let api_keys = ApiKeys::new(&keys);
        assert!(api_keys.verify("onyx_sk_first_key_123"));
        assert!(api_keys.verify("onyx_sk_second_key_456"));
        assert!(!api_keys.verify("onyx_sk_first_key_12"));
        assert!(!api_keys.verify(""));
        assert_eq!(api_keys.len(), 2);
    }
}
