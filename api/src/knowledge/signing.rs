//! Signing requests to menos the way menos's own client does: HTTP Message
//! Signatures (RFC 9421) with ed25519, the key an OpenSSH private key file.
//!
//! ```text
//! signature-input: sig1=("@method" "@path" "@authority");keyid="SHA256:0123456789abcdef";alg="ed25519";created=1764230400
//! signature: sig1=:<base64 of the ed25519 signature>:
//! ```
//!
//! The signed base is one line per covered component and the parameters
//! (`"@method": GET`, `"@path": /api/v1/content/search`, `"@authority":
//! host:port`, `"@signature-params": (…);keyid=…`), joined by `\n`. A body
//! adds `content-digest: sha-256=:…:` (RFC 9530) to the covered components.
//! The key id is menos's: `SHA256:` and the first 16 hex digits of the
//! SHA-256 of the public key's SSH wire encoding. menos accepts a signature
//! `created` within 5 minutes of its clock. The query string is not covered
//! (menos's verifier does not rebuild `@query`), so use https to menos
//! across any network you do not trust.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::signature::{Ed25519KeyPair, KeyPair};
use sha2::{Digest, Sha256};

/// Why the key file cannot sign.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error(
        "{path} can be read by other users (mode {mode:o}): make it private (chmod 600), as ssh requires"
    )]
    Exposed { path: String, mode: u32 },
    #[error("{path} is not an OpenSSH private key ({reason}); make one with `ssh-keygen -t ed25519`")]
    Format { path: String, reason: String },
    #[error("{path} is passphrase-protected; Onyx needs a key without a passphrase for menos")]
    Encrypted { path: String },
    #[error("{path} is an {algorithm} key; menos signs with ed25519 keys only")]
    NotEd25519 { path: String, algorithm: String },
}

/// The headers that sign one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeaders {
    pub signature_input: String,
    pub signature: String,
    /// With a body: its `content-digest`, which the signature covers.
    pub content_digest: Option<String>,
}

/// An ed25519 key that signs menos requests.
pub struct Signer {
    pair: Ed25519KeyPair,
    key_id: String,
    /// The public key as an `authorized_keys` line, for menos's owner.
    public_openssh: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// Reads an unencrypted OpenSSH ed25519 private key that only its owner can read.
    pub fn from_file(path: &Path) -> Result<Self, KeyFileError> {
        let shown = path.display().to_string();
        let read = |source| KeyFileError::Read {
            path: shown.clone(),
            source,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(KeyFileError::Exposed { path: shown, mode });
            }
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Self::from_openssh(&text, &shown)
    }

    /// Parses the text of an OpenSSH private key (`shown` names it in errors).
    pub fn from_openssh(text: &str, shown: &str) -> Result<Self, KeyFileError> {
        let key = ssh_key::PrivateKey::from_openssh(text.trim()).map_err(|err| KeyFileError::Format {
            path: shown.into(),
            reason: err.to_string(),
        })?;
        if key.is_encrypted() {
            return Err(KeyFileError::Encrypted { path: shown.into() });
        }
        let Some(ed25519) = key.key_data().ed25519() else {
            return Err(KeyFileError::NotEd25519 {
                path: shown.into(),
                algorithm: key.algorithm().to_string(),
            });
        };
        let format = |reason: String| KeyFileError::Format {
            path: shown.into(),
            reason,
        };
        let pair = Ed25519KeyPair::from_seed_and_public_key(&ed25519.private.to_bytes(), &ed25519.public.0)
            .map_err(|err| format(format!("the key pair does not match: {err}")))?;
        let blob = key
            .public_key()
            .to_bytes()
            .map_err(|err| format(err.to_string()))?;
        let public_openssh = key
            .public_key()
            .to_openssh()
            .map_err(|err| format(err.to_string()))?;
        Ok(Self {
            pair,
            key_id: key_id(&blob),
            public_openssh,
        })
    }

    /// menos's name for this key (`SHA256:` and 16 hex digits).
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The public key as a line for menos's authorized keys file.
    pub fn public_openssh(&self) -> &str {
        &self.public_openssh
    }

    /// The raw 32-byte public key.
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// Signs a request to `authority` (`host` or `host:port`, as in the
    /// `Host` header), created at `created` (Unix seconds).
    pub fn sign(
        &self,
        method: &str,
        path: &str,
        authority: &str,
        body: Option<&[u8]>,
        created: i64,
    ) -> SignatureHeaders {
        let content_digest = body
            .filter(|b| !b.is_empty())
            .map(|b| format!("sha-256=:{}:", BASE64.encode(Sha256::digest(b))));
        let mut components = vec!["\"@method\"", "\"@path\"", "\"@authority\""];
        if content_digest.is_some() {
            components.push("\"content-digest\"");
        }
        let params = format!(
            "({});keyid=\"{}\";alg=\"ed25519\";created={created}",
            components.join(" "),
            self.key_id
        );
        let mut base = format!(
            "\"@method\": {}\n\"@path\": {path}\n\"@authority\": {authority}\n",
            method.to_ascii_uppercase()
        );
        if let Some(digest) = &content_digest {
            base.push_str(&format!("\"content-digest\": {digest}\n"));
        }
        base.push_str(&format!("\"@signature-params\": {params}"));
        let signature = self.pair.sign(base.as_bytes());
        SignatureHeaders {
            signature_input: format!("sig1={params}"),
            signature: format!("sig1=:{}:", BASE64.encode(signature.as_ref())),
            content_digest,
        }
    }
}

/// menos's key id: `SHA256:` and the first 16 hex digits of the SHA-256 of
/// the public key's SSH wire encoding.
pub fn key_id(public_key_blob: &[u8]) -> String {
    let digest = Sha256::digest(public_key_blob);
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("SHA256:{hex}")
}

#[cfg(test)]
mod tests {
    use ring::signature::{ED25519, UnparsedPublicKey};

    use super::*;

    /// A throwaway key made for this test with `ssh-keygen -t ed25519 -N ''`
    /// (it signs nothing anywhere else).
    const TEST_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACBFR+JXUCVBxfzBbDRgsTkS2NV5lXWMEBIFNRFNsRONJAAAAJjQdUPI0HVD
yAAAAAtzc2gtZWQyNTUxOQAAACBFR+JXUCVBxfzBbDRgsTkS2NV5lXWMEBIFNRFNsRONJA
AAAEC58axHqqutgjkrnz21rL/e6o8TGJpaaGMClAUtlDMsYEVH4ldQJUHF/MFsNGCxORLY
1XmVdYwQEgU1EU2xE40kAAAAE29ueXgta25vd2xlZGdlLXRlc3QBAg==
-----END OPENSSH PRIVATE KEY-----";
    /// `ssh-keygen -lf` of the key above: the same digest menos's key id cuts short.
    const TEST_FINGERPRINT: &str = "SHA256:8dagi3vqEApNx70wMpMnybjPerChKzzrnv/eIYzBPpU";

    fn signer() -> Signer {
        Signer::from_openssh(TEST_KEY, "test key").unwrap()
    }

    #[test]
    fn the_key_id_is_the_start_of_the_ssh_fingerprint_in_hex() {
        let signer = signer();
        let fingerprint = TEST_FINGERPRINT.strip_prefix("SHA256:").unwrap();
        let digest = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(fingerprint)
            .unwrap();
        let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        assert_eq!(signer.key_id(), format!("SHA256:{hex}"));
        assert_eq!(
            signer.key_id(),
            "SHA256:f1d6a08b7bea100a",
            "as menos's own client computes it"
        );
        assert!(
            signer.public_openssh().starts_with("ssh-ed25519 AAAA"),
            "{}",
            signer.public_openssh()
        );
    }

    #[test]
    fn the_signature_covers_method_path_authority_and_params_as_menos_rebuilds_them() {
        let signer = signer();
        let headers = signer.sign(
            "get",
            "/api/v1/content/search",
            "127.0.0.1:8000",
            None,
            1_764_230_400,
        );
        let params = format!(
            "(\"@method\" \"@path\" \"@authority\");keyid=\"{}\";alg=\"ed25519\";created=1764230400",
            signer.key_id()
        );
        assert_eq!(headers.signature_input, format!("sig1={params}"));
        assert_eq!(headers.content_digest, None);
        let base = format!(
            "\"@method\": GET\n\"@path\": /api/v1/content/search\n\"@authority\": 127.0.0.1:8000\n\"@signature-params\": {params}"
        );
        let signature = BASE64
            .decode(
                headers
                    .signature
                    .strip_prefix("sig1=:")
                    .and_then(|s| s.strip_suffix(':'))
                    .unwrap(),
            )
            .unwrap();
        let public = UnparsedPublicKey::new(&ED25519, signer.public_key());
        assert!(public.verify(base.as_bytes(), &signature).is_ok());
        // Another path, another authority or another time: not this signature.
        for other in [
            base.replace("/search", "/1"),
            base.replace("127.0.0.1:8000", "evil:8000"),
            base.replace("1764230400", "1764230401"),
        ] {
            assert!(public.verify(other.as_bytes(), &signature).is_err(), "{other}");
        }
    }

    #[test]
    fn a_body_is_covered_by_its_content_digest() {
        let headers = signer().sign("POST", "/api/v1/content", "menos", Some(b"{\"a\":1}"), 1);
        let digest = headers.content_digest.unwrap();
        assert!(
            digest.starts_with("sha-256=:") && digest.ends_with(':'),
            "{digest}"
        );
        assert!(
            headers
                .signature_input
                .contains("\"@authority\" \"content-digest\")")
        );
    }

    #[test]
    fn keys_that_cannot_sign_are_refused_with_the_reason() {
        let err = Signer::from_openssh("not a key", "k").unwrap_err();
        assert!(err.to_string().contains("ssh-keygen -t ed25519"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id_ed25519");
        std::fs::write(&path, TEST_KEY).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = Signer::from_file(&path).unwrap_err();
            assert!(err.to_string().contains("chmod 600"), "{err}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        assert!(Signer::from_file(&path).is_ok());
        let missing = Signer::from_file(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(missing, KeyFileError::Read { .. }), "{missing}");
    }
}
