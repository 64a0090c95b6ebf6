//! ADAPTERS: deleted by WS-C (issue 40, workstream C). The chat vocabulary's
//! old path: it lives in [`crate::chat`] now, and callers not yet moved
//! import it from here.

pub use crate::chat::ChatChunk as Chunk;
pub use crate::chat::*;
