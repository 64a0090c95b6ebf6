//! Outside knowledge agents can search. Today menos, the content vault that
//! shares Onyx's infrastructure (seed 003 D2): Onyx asks it for content
//! with ed25519-signed requests (`signing`, RFC 9421 as menos signs) and
//! offers the answers to agents as the `menos_search` tool; `/health` and
//! the Status page show whether menos answers and accepts Onyx's key.

pub mod menos;
pub mod signing;

pub use menos::{Menos, Probe, SearchHit, SearchResults};
pub use signing::{KeyFileError, Signer};

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// `knowledge.menos.keyFile` cannot sign (a startup error).
    #[error("knowledge.menos.keyFile: {0}")]
    KeyFile(#[from] KeyFileError),
    #[error("could not set up the HTTP client: {0}")]
    Client(String),
    /// The request is wrong: what to fix.
    #[error("{0}")]
    Invalid(String),
    #[error("menos is unreachable: {0}")]
    Unreachable(String),
    /// menos answered with an error status.
    #[error("menos answered {status}: {detail}")]
    Refused { status: u16, detail: String },
    #[error("menos's answer is unusable: {0}")]
    BadAnswer(String),
}
