//! argon2id password hashes in PHC format (`$argon2id$v=19$…`), and
//! [`PasswordChecks`]: checking them a few at a time.

use std::time::Duration;

use argon2::password_hash::phc::Output;
use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, PasswordHasher, Version};
use tokio::sync::Semaphore;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("the password is empty")]
    Empty,
    #[error("could not hash the password: {0}")]
    Hash(String),
}

pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    if password.is_empty() {
        return Err(PasswordError::Empty);
    }
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|err| PasswordError::Hash(err.to_string()))
}

/// False for a wrong password and for a malformed hash alike.
pub fn verify_password(password: &str, hash: &str) -> bool {
    verify_in(password, hash, &mut Vec::new())
}

/// [`verify_password`], hashing in `memory` (grown to the hash's memory
/// cost, kept for the next check): a checker thread allocates its blocks
/// once, where argon2's own verifier allocates and frees 19 MiB per check
/// and the allocator keeps much of what was freed (measured: +155 MiB peak
/// RSS for 16 logins at once through two threads; bench/README.md).
fn verify_in(password: &str, hash: &str, memory: &mut Vec<Block>) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (&parsed.salt, &parsed.hash) else {
        return false;
    };
    let algorithm = Algorithm::try_from(parsed.algorithm.as_str());
    let version = parsed.version.map(Version::try_from).transpose();
    let (Ok(algorithm), Ok(version), Ok(params)) = (algorithm, version, Params::try_from(&parsed)) else {
        return false;
    };
    let blocks = params.block_count();
    if memory.len() < blocks {
        memory.resize(blocks, Block::default());
    }
    let mut computed = vec![0u8; expected.len()];
    let argon2 = Argon2::new(algorithm, version.unwrap_or_default(), params);
    let Some(memory) = memory.get_mut(..blocks) else {
        return false;
    };
    argon2
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut computed, memory)
        .is_ok()
        // `Output`'s equality is constant-time.
        && Output::new(&computed).is_ok_and(|computed| computed == *expected)
}

/// Checks at once: each allocates its hash's memory (19 MiB with argon2's
/// defaults), so unbounded parallel logins would let anyone who reaches
/// `/auth/login` exhaust the machine's.
const AT_ONCE: usize = 2;
/// How long a check waits for its turn before the login is refused as busy.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

/// Every check was taken; the caller should try again shortly.
#[derive(Debug, thiserror::Error)]
#[error("too many logins are being checked right now; try again in a moment")]
pub struct Busy;

/// One check for a checker thread, and where its answer goes.
struct Check {
    password: String,
    hash: String,
    answer: tokio::sync::oneshot::Sender<bool>,
}

/// Password checks, at most [`AT_ONCE`] at a time, each on one of
/// [`AT_ONCE`] threads of their own (started at the first login). Checks
/// never run on the async workers, and always on the same few threads: each
/// thread's allocator reuses the memory its last check freed, where tokio's
/// blocking pool would spread the checks over many threads, each keeping its
/// own freed 19 MiB (measured: +288 MiB peak RSS for 32 logins at once;
/// bench/README.md, "UI logins at once").
pub struct PasswordChecks {
    turns: Semaphore,
    checkers: std::sync::OnceLock<std::sync::mpsc::SyncSender<Check>>,
}

impl Default for PasswordChecks {
    fn default() -> Self {
        Self {
            turns: Semaphore::new(AT_ONCE),
            checkers: std::sync::OnceLock::new(),
        }
    }
}

impl PasswordChecks {
    /// Whether `password` matches `hash`, once a turn is free (or [`Busy`]).
    pub async fn verify(&self, password: String, hash: String) -> Result<bool, Busy> {
        let turn = tokio::time::timeout(QUEUE_WAIT, self.turns.acquire())
            .await
            .map_err(|_| Busy)?
            .map_err(|_| Busy)?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        let check = Check {
            password,
            hash,
            answer,
        };
        // A turn is held, so a checker is free (or finishing): the queue never grows.
        self.checkers().try_send(check).map_err(|_| Busy)?;
        let matched = answered.await.map_err(|_| Busy)?;
        drop(turn);
        Ok(matched)
    }

    fn checkers(&self) -> &std::sync::mpsc::SyncSender<Check> {
        self.checkers.get_or_init(|| {
            let (queue, checks) = std::sync::mpsc::sync_channel::<Check>(AT_ONCE);
            let checks = std::sync::Arc::new(std::sync::Mutex::new(checks));
            for n in 0..AT_ONCE {
                let checks = checks.clone();
                let started = std::thread::Builder::new()
                    .name(format!("onyx-password-{n}"))
                    .spawn(move || check_until_closed(&checks));
                if let Err(err) = started {
                    tracing::error!(error = %err, "could not start a password checker thread");
                }
            }
            queue
        })
    }
}

/// A checker thread: takes checks off the queue until the queue is dropped.
fn check_until_closed(checks: &std::sync::Mutex<std::sync::mpsc::Receiver<Check>>) {
    let mut memory = Vec::new();
    loop {
        let next = match checks.lock() {
            Ok(checks) => checks.recv(),
            Err(_) => return,
        };
        let Ok(check) = next else {
            return;
        };
        let _ = check
            .answer
            .send(verify_in(&check.password, &check.hash, &mut memory));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn checks_take_turns_and_give_them_back() {
        let checks = std::sync::Arc::new(PasswordChecks::default());
        let hash = hash_password("right").unwrap();
        let tries: Vec<_> = (0..5)
            .map(|n| {
                let (checks, hash) = (checks.clone(), hash.clone());
                tokio::spawn(async move {
                    let password = if n == 0 { "right" } else { "wrong" };
                    checks.verify(password.into(), hash).await.unwrap()
                })
            })
            .collect();
        let mut matched = Vec::new();
        for attempt in tries {
            matched.push(attempt.await.unwrap());
        }
        assert_eq!(matched, [true, false, false, false, false]);
        assert_eq!(
            checks.turns.available_permits(),
            AT_ONCE,
            "every turn is given back"
        );
    }

    #[test]
    fn hashing_in_kept_memory_agrees_with_argon2s_own_check() {
        use argon2::PasswordVerifier;
        let hash = hash_password("correct horse").unwrap();
        let parsed = PasswordHash::new(&hash).unwrap();
        let mut memory = Vec::new();
        for (password, right) in [
            ("correct horse", true),
            ("wrong horse", false),
            ("correct horse", true),
        ] {
            let theirs = Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok();
            assert_eq!(theirs, right, "{password}");
            assert_eq!(verify_in(password, &hash, &mut memory), right, "{password}");
        }
        assert_eq!(
            memory.len(),
            Params::default().block_count(),
            "allocated once, kept"
        );
        // Another hash's parameters (smaller memory, argon2i, v=16) in the same memory.
        let small = Params::new(1024, 2, 1, None).unwrap();
        let argon2i = Argon2::new(Algorithm::Argon2i, Version::V0x10, small);
        let other = argon2i.hash_password(b"pw").unwrap().to_string();
        assert!(verify_in("pw", &other, &mut memory));
        assert!(!verify_in("px", &other, &mut memory));
        assert!(
            !verify_in("pw", "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ", &mut memory),
            "no hash part"
        );
    }

    #[test]
    fn round_trips_and_rejects_wrong_passwords() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
        assert!(!verify_password("correct horse", "not-a-hash"));
        assert!(matches!(hash_password(""), Err(PasswordError::Empty)));
    }
}
