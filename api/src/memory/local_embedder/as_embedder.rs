//! The built-in model as memory's [`Embedder`].

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{LocalEmbedder, LocalError};
use crate::memory::embedder::{EmbedError, Embedder};

impl From<LocalError> for EmbedError {
    fn from(err: LocalError) -> Self {
        EmbedError::Local(err.to_string())
    }
}

impl Embedder for LocalEmbedder {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn model(&self) -> &str {
        LocalEmbedder::model(self)
    }

    fn automatic(&self) -> bool {
        LocalEmbedder::automatic(self)
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        async move { Ok(LocalEmbedder::embed(self, texts).await?) }.boxed()
    }

    fn input_tokens(&self) -> BoxFuture<'_, Option<usize>> {
        LocalEmbedder::input_tokens(self).boxed()
    }

    fn prepare<'a>(
        &'a self,
        on_progress: &'a (dyn Fn(usize, usize) + Send + Sync),
    ) -> BoxFuture<'a, Result<(), EmbedError>> {
        async move {
            let bytes = |done: u64, total: Option<u64>| {
                let total = total.unwrap_or(done);
                on_progress(
                    usize::try_from(done).unwrap_or(usize::MAX),
                    usize::try_from(total).unwrap_or(usize::MAX),
                );
            };
            Ok(LocalEmbedder::prepare(self, &bytes).await?)
        }
        .boxed()
    }
}
