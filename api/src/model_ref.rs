//! `ModelRef`: the `provider/model` string that routes a request.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    pub provider: String,
    /// The upstream's own model name; may itself contain '/' (`openrouter/meta-llama/llama-3`).
    pub model: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelRefError {
    #[error(
        "model {0:?} has no provider prefix; use \"provider/model\" (for example \"openai/gpt-4o-mini\")"
    )]
    MissingProvider(String),
    #[error("model {0:?} names no model after the provider")]
    MissingModel(String),
}

impl ModelRef {
    pub fn parse(text: &str) -> Result<Self, ModelRefError> {
        let (provider, model) = text
            .split_once('/')
            .ok_or_else(|| ModelRefError::MissingProvider(text.into()))?;
        if provider.is_empty() {
            return Err(ModelRefError::MissingProvider(text.into()));
        }
        if model.trim().is_empty() {
            return Err(ModelRefError::MissingModel(text.into()));
        }
        Ok(Self {
            provider: provider.into(),
            model: model.into(),
        })
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_the_first_slash() {
        let r = ModelRef::parse("openrouter/meta-llama/llama-3.1-8b").unwrap();
        assert_eq!(r.provider, "openrouter");
        assert_eq!(r.model, "meta-llama/llama-3.1-8b");
        assert_eq!(r.to_string(), "openrouter/meta-llama/llama-3.1-8b");
    }

    #[test]
    fn rejects_missing_parts() {
        assert!(matches!(
            ModelRef::parse("gpt-4o"),
            Err(ModelRefError::MissingProvider(_))
        ));
        assert!(matches!(
            ModelRef::parse("/gpt-4o"),
            Err(ModelRefError::MissingProvider(_))
        ));
        assert!(matches!(
            ModelRef::parse("openai/"),
            Err(ModelRefError::MissingModel(_))
        ));
    }
}
