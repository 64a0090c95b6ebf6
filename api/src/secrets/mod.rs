//! Sealing credentials at rest: provider keys and header values (later plugin
//! tokens and MCP secrets) stored in SurrealDB are AES-256-GCM ciphertexts
//! under the master key, never plaintext. A sealed value names the key that
//! sealed it (`onyx-sealed:v1:{key id}:{base64(nonce ‖ ciphertext)}`) and is
//! bound to where it is kept (the additional data, e.g. `provider:openai:apiKey`),
//! so one row's secret cannot be pasted into another. The [`Vault`] holds the
//! current master key and any it replaces during `onyx keys rotate-master`.

mod master_key;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

pub use master_key::{KeySource, MasterKeyFiles, load_vault, vault_from_env};

const PREFIX: &str = "onyx-sealed:v1:";

/// Why a secret could not be opened or a master key used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("not a sealed value (expected `onyx-sealed:v1:…`)")]
    NotSealed,
    #[error(
        "sealed under master key {0}, which this replica does not hold: give every replica the same ONYX_MASTER_KEY"
    )]
    UnknownKey(String),
    #[error("the sealed value was altered or belongs elsewhere (authentication failed)")]
    Tampered,
    #[error("master key: {0}")]
    MasterKey(String),
    #[error("master key file {path}: {source}")]
    KeyFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// One 256-bit master key and its public id (a hash prefix, safe to show).
pub struct MasterKey {
    id: String,
    key: LessSafeKey,
    bytes: SecretString,
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl MasterKey {
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        let digest = Sha256::new_with_prefix(b"onyx master key id\0")
            .chain_update(bytes)
            .finalize();
        let id = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        let unbound = UnboundKey::new(&AES_256_GCM, bytes)
            .unwrap_or_else(|_| unreachable!("32 bytes is an AES-256 key"));
        Self {
            id,
            key: LessSafeKey::new(unbound),
            bytes: SecretString::from(STANDARD.encode(bytes)),
        }
    }

    /// A fresh random key.
    pub fn generate() -> Result<Self, SecretError> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| SecretError::MasterKey("the system random source failed".into()))?;
        Ok(Self::from_bytes(&bytes))
    }

    /// Reads a key written as base64 (what Onyx writes) or 64 hex digits.
    pub fn parse(text: &str, origin: &str) -> Result<Self, SecretError> {
        let text = text.trim();
        let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| SecretError::MasterKey(format!("{origin}: not hex")))?
        } else {
            STANDARD
                .decode(text)
                .map_err(|_| SecretError::MasterKey(format!("{origin}: neither base64 nor 64 hex digits")))?
        };
        let bytes: [u8; 32] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            SecretError::MasterKey(format!(
                "{origin}: a master key is 32 bytes, this is {} (make one with `openssl rand -base64 32`)",
                bytes.len()
            ))
        })?;
        Ok(Self::from_bytes(&bytes))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key as Onyx writes it (base64), for a key file or the operator.
    pub fn encoded(&self) -> &SecretString {
        &self.bytes
    }
}

/// The master keys this replica holds: one seals, all open.
pub struct Vault {
    current: MasterKey,
    older: Vec<MasterKey>,
    source: KeySource,
}

impl Vault {
    pub fn new(current: MasterKey, older: Vec<MasterKey>, source: KeySource) -> Self {
        Self {
            current,
            older,
            source,
        }
    }

    /// A vault with a random key and nowhere to keep it (tests, dry runs).
    pub fn ephemeral() -> Result<Self, SecretError> {
        Ok(Self::new(
            MasterKey::generate()?,
            Vec::new(),
            KeySource::Generated,
        ))
    }

    /// This vault with `key` sealing from now on; its keys still open.
    pub fn rotated(self, key: MasterKey) -> Self {
        let mut older = self.older;
        older.insert(0, self.current);
        Self {
            current: key,
            older,
            source: self.source,
        }
    }

    pub fn key_id(&self) -> &str {
        self.current.id()
    }

    pub fn source(&self) -> &KeySource {
        &self.source
    }

    /// Seals `secret` for the place named by `context` (e.g. `provider:openai:apiKey`).
    pub fn seal(&self, secret: &str, context: &str) -> Result<String, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SecretError::MasterKey("the system random source failed".into()))?;
        let mut sealed = secret.as_bytes().to_vec();
        self.current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SecretError::Tampered)?;
        let mut payload = nonce.to_vec();
        payload.extend_from_slice(&sealed);
        Ok(format!(
            "{PREFIX}{}:{}",
            self.current.id,
            STANDARD.encode(payload)
        ))
    }

    /// Opens a value [`seal`](Self::seal)ed for the same `context`.
    pub fn open(&self, sealed: &str, context: &str) -> Result<SecretString, SecretError> {
        let rest = sealed.strip_prefix(PREFIX).ok_or(SecretError::NotSealed)?;
        let (id, payload) = rest.split_once(':').ok_or(SecretError::NotSealed)?;
        let key = std::iter::once(&self.current)
            .chain(&self.older)
            .find(|k| k.id == id)
            .ok_or_else(|| SecretError::UnknownKey(id.to_string()))?;
        let mut payload = STANDARD.decode(payload).map_err(|_| SecretError::NotSealed)?;
        if payload.len() < NONCE_LEN {
            return Err(SecretError::NotSealed);
        }
        let mut ciphertext = payload.split_off(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = payload.try_into().map_err(|_| SecretError::NotSealed)?;
        let plain = key
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut ciphertext,
            )
            .map_err(|_| SecretError::Tampered)?;
        let text = String::from_utf8(plain.to_vec()).map_err(|_| SecretError::Tampered)?;
        Ok(SecretString::from(text))
    }

    /// Whether `sealed` is sealed under the current key (rotation skips it).
    pub fn is_current(&self, sealed: &str) -> bool {
        sealed
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(id, _)| id == self.current.id)
    }
}

/// What the API shows of a secret: its last four characters, only when the
/// secret is long enough that they give nothing away.
pub fn hint(secret: &SecretString) -> String {
    let secret = secret.expose_secret();
    if secret.chars().count() <= 12 {
        return "…".into();
    }
    let last_four = secret.char_indices().rev().nth(3).map_or(0, |(at, _)| at);
    format!("…{}", &secret[last_four..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_in_its_place_and_under_its_key() {
        let vault = Vault::ephemeral().unwrap();
        let sealed = vault
            .seal("sk-live-0123456789abcdef", "provider:a:apiKey")
            .unwrap();
        assert!(sealed.starts_with(&format!("onyx-sealed:v1:{}:", vault.key_id())));
        assert!(!sealed.contains("0123456789"));
        let opened = vault.open(&sealed, "provider:a:apiKey").unwrap();
        assert_eq!(opened.expose_secret(), "sk-live-0123456789abcdef");
        assert!(matches!(
            vault.open(&sealed, "provider:b:apiKey"),
            Err(SecretError::Tampered)
        ));
        let other = Vault::ephemeral().unwrap();
        assert!(matches!(
            other.open(&sealed, "provider:a:apiKey"),
            Err(SecretError::UnknownKey(_))
        ));
        let (head, payload) = sealed.rsplit_once(':').unwrap();
        let mut bytes = STANDARD.decode(payload).unwrap();
        bytes[NONCE_LEN + 2] ^= 1;
        let flipped = format!("{head}:{}", STANDARD.encode(bytes));
        assert!(matches!(
            vault.open(&flipped, "provider:a:apiKey"),
            Err(SecretError::Tampered)
        ));
        assert!(matches!(vault.open("plain", "x"), Err(SecretError::NotSealed)));
        // Two seals of one secret differ (a fresh nonce each time).
        assert_ne!(
            sealed,
            vault
                .seal("sk-live-0123456789abcdef", "provider:a:apiKey")
                .unwrap()
        );
    }

    #[test]
    fn an_older_key_still_opens_what_it_sealed() {
        let old = MasterKey::generate().unwrap();
        let old_copy = MasterKey::parse(old.encoded().expose_secret(), "test").unwrap();
        let sealed = Vault::new(old, Vec::new(), KeySource::Generated)
            .seal("secret", "c")
            .unwrap();
        let rotated = Vault::new(
            MasterKey::generate().unwrap(),
            vec![old_copy],
            KeySource::Generated,
        );
        assert_eq!(rotated.open(&sealed, "c").unwrap().expose_secret(), "secret");
        assert!(!rotated.is_current(&sealed));
        assert!(rotated.is_current(&rotated.seal("secret", "c").unwrap()));
    }

    #[test]
    fn master_keys_parse_from_base64_or_hex_and_refuse_other_lengths() {
        let hex = "00".repeat(32);
        let from_hex = MasterKey::parse(&hex, "ONYX_MASTER_KEY").unwrap();
        let from_base64 = MasterKey::parse(&STANDARD.encode([0u8; 32]), "ONYX_MASTER_KEY").unwrap();
        assert_eq!(from_hex.id(), from_base64.id());
        let err = MasterKey::parse(&STANDARD.encode([0u8; 16]), "ONYX_MASTER_KEY").unwrap_err();
        assert!(err.to_string().contains("32 bytes, this is 16"), "{err}");
        assert!(MasterKey::parse("not a key!", "x").is_err());
    }

    #[test]
    fn hints_show_four_characters_of_long_secrets_only() {
        assert_eq!(hint(&SecretString::from("sk-abcdefghijklmnop")), "…mnop");
        assert_eq!(hint(&SecretString::from("short")), "…");
    }
}
