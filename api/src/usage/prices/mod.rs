//! The price table: USD per million tokens (input, output, cached input read,
//! cache write) by upstream model name, shipped in `prices.json5` (with where
//! each price came from, and when) and overridden or extended by
//! `usage.prices`. A model without a price costs `None` (unknown), never 0.
//! How a name as traffic carries it (Bedrock profiles, OpenRouter vendors,
//! versions) finds its key: [`names`].

mod names;

use std::collections::BTreeMap;
use std::sync::RwLock;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::providers::{ModelRef, Usage};
use names::{Resolved, normalize};

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from the provider's cache; `input` when absent.
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the provider's cache; `input` when absent.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    /// What a free variant costs.
    pub const FREE: Price = Price {
        input: 0.0,
        output: 0.0,
        cached_input: None,
        cache_write: None,
    };

    /// The cost of one answer. `prompt_tokens` counts cache reads and writes too.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let read = usage.cached_tokens();
        let written = usage.cache_write_tokens();
        let fresh = usage.prompt_tokens.saturating_sub(read + written);
        (fresh as f64 * self.input
            + read as f64 * self.cached_input.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + usage.completion_tokens as f64 * self.output)
            / 1_000_000.0
    }

    /// The most a call can cost: every prompt token fresh, every output token used.
    pub fn ceiling(&self, prompt_tokens: u64, output_tokens: u64) -> f64 {
        (prompt_tokens as f64 * self.input.max(self.cache_write.unwrap_or(0.0))
            + output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

const SHIPPED: &str = include_str!("prices.json5");

pub struct PriceTable {
    /// Normalized name → price: the shipped table with the config's on top.
    by_name: BTreeMap<String, Price>,
    /// Answers already found, by target: every metered call asks, and a
    /// gateway serves a handful of models, so the name matching (lowercasing,
    /// formatting keys, walking the table) is done once per model.
    found: RwLock<FxHashMap<ModelRef, Option<Price>>>,
}

/// Targets remembered before `found` starts over (model names come from
/// clients, so they are bounded).
const FOUND_MAX: usize = 4096;

impl PriceTable {
    /// The shipped prices, then `overrides` (keys: a model name, or
    /// `provider/model` / `provider/*` for one configured provider's models).
    pub fn new(overrides: &BTreeMap<String, Price>) -> Self {
        let shipped: BTreeMap<String, Price> = match json5::from_str(SHIPPED) {
            Ok(table) => table,
            Err(err) => {
                tracing::error!(error = %err, "the shipped price table does not parse; only configured prices apply");
                BTreeMap::new()
            }
        };
        let by_name = shipped
            .iter()
            .chain(overrides)
            .map(|(name, price)| (normalize(name), *price))
            .collect();
        Self {
            by_name,
            found: RwLock::default(),
        }
    }

    /// The price of `target`: the provider-specific entry, then each key the
    /// name resolves to ([`names::resolve`]), exactly or by the longest known
    /// name it starts with.
    pub fn price(&self, target: &ModelRef) -> Option<Price> {
        if let Some(found) = crate::locks::read(&self.found).get(target) {
            return *found;
        }
        let price = self.look_up(target);
        let mut found = crate::locks::write(&self.found);
        if found.len() >= FOUND_MAX {
            found.clear();
        }
        found.insert(target.clone(), price);
        price
    }

    fn look_up(&self, target: &ModelRef) -> Option<Price> {
        let model = normalize(&target.model);
        let provider = normalize(&target.provider);
        let exact = [format!("{provider}/{model}"), format!("{provider}/*")];
        if let Some(price) = exact.iter().find_map(|k| self.by_name.get(k)) {
            return Some(*price);
        }
        match names::resolve(&target.model) {
            Resolved::Free => Some(Price::FREE),
            Resolved::Keys(keys) => keys.iter().find_map(|name| self.longest_prefix(name)),
        }
    }

    fn longest_prefix(&self, name: &str) -> Option<Price> {
        if let Some(price) = self.by_name.get(name) {
            return Some(*price);
        }
        // Candidates sort before `name`; walk back while they share its first character.
        let first = name.chars().next()?;
        self.by_name
            .range(..name.to_string())
            .rev()
            .take_while(|(key, _)| key.starts_with(first))
            .filter(|(key, _)| {
                name.strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.starts_with(['-', ':', '@']))
            })
            .max_by_key(|(key, _)| key.len())
            .map(|(_, price)| *price)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(provider: &str, model: &str) -> ModelRef {
        ModelRef {
            provider: provider.into(),
            model: model.into(),
        }
    }

    fn input_of(table: &PriceTable, provider: &str, name: &str) -> Option<f64> {
        table.price(&model(provider, name)).map(|p| p.input)
    }

    #[test]
    fn matches_exact_dated_vendor_prefixed_and_dotted_names() {
        let table = PriceTable::new(&BTreeMap::new());
        assert_eq!(input_of(&table, "openai", "gpt-4o-mini"), Some(0.15));
        assert_eq!(input_of(&table, "openai", "gpt-4o-mini-2024-07-18"), Some(0.15));
        assert_eq!(input_of(&table, "openai", "gpt-4o-2024-08-06"), Some(2.5));
        assert_eq!(input_of(&table, "openai", "gpt-4.1-mini"), Some(0.4));
        assert_eq!(input_of(&table, "openai", "gpt-5"), Some(1.25));
        assert_eq!(
            input_of(&table, "openai", "gpt-5.4"),
            Some(2.5),
            "not gpt-5's price"
        );
        assert_eq!(input_of(&table, "openai", "gpt-5.4-2026-03-05"), Some(2.5));
        assert_eq!(input_of(&table, "openai", "o3-mini-2025-01-31"), Some(1.1));
        assert_eq!(input_of(&table, "openrouter", "openai/gpt-4o-mini"), Some(0.15));
        assert_eq!(
            input_of(&table, "openrouter", "anthropic/claude-sonnet-4.5"),
            Some(3.0)
        );
        assert_eq!(
            input_of(&table, "anthropic", "claude-sonnet-4-5-20250929"),
            Some(3.0)
        );
        assert_eq!(input_of(&table, "anthropic", "claude-opus-4-5"), Some(5.0));
        assert_eq!(
            input_of(&table, "anthropic", "claude-opus-4-1-20250805"),
            Some(15.0)
        );
        assert_eq!(input_of(&table, "gemini", "gemini-2.5-flash-lite"), Some(0.1));
    }

    #[test]
    fn bedrock_ids_profiles_nova_and_llama_find_their_prices() {
        let table = PriceTable::new(&BTreeMap::new());
        let bedrock = |name| input_of(&table, "bedrock", name);
        assert_eq!(bedrock("anthropic.claude-3-5-sonnet-20241022-v2:0"), Some(3.0));
        assert_eq!(bedrock("anthropic.claude-3-haiku-20240307-v1:0"), Some(0.25));
        assert_eq!(bedrock("us.anthropic.claude-sonnet-4-5-20250929-v1:0"), Some(3.0));
        assert_eq!(bedrock("eu.anthropic.claude-opus-4-1-20250805-v1:0"), Some(15.0));
        assert_eq!(
            bedrock("apac.anthropic.claude-haiku-4-5-20251001-v1:0"),
            Some(1.0)
        );
        assert_eq!(
            bedrock("global.anthropic.claude-opus-4-5-20251101-v1:0"),
            Some(5.0)
        );
        assert_eq!(bedrock("amazon.nova-micro-v1:0"), Some(0.035));
        assert_eq!(bedrock("us.amazon.nova-pro-v1:0"), Some(0.8));
        assert_eq!(bedrock("amazon.nova-premier-v1:0"), Some(2.5));
        assert_eq!(bedrock("meta.llama3-3-70b-instruct-v1:0"), Some(0.72));
        assert_eq!(bedrock("us.meta.llama3-1-8b-instruct-v1:0"), Some(0.22));
        assert_eq!(bedrock("us.meta.llama4-maverick-17b-instruct-v1:0"), Some(0.24));
        assert_eq!(
            bedrock("mistral.mistral-large-2402-v1:0"),
            Some(4.0),
            "not the current Mistral Large's price"
        );
        assert_eq!(
            bedrock("arn:aws:bedrock:us-east-1:111122223333:inference-profile/us.amazon.nova-lite-v1:0"),
            Some(0.06)
        );
    }

    #[test]
    fn gemini_vertex_mistral_deepseek_and_openrouter_names_find_their_prices() {
        let table = PriceTable::new(&BTreeMap::new());
        assert_eq!(input_of(&table, "gemini", "gemini-2.5-pro"), Some(1.25));
        assert_eq!(input_of(&table, "gemini", "models/gemini-2.5-flash"), Some(0.3));
        assert_eq!(
            input_of(&table, "gemini", "gemini-2.5-flash-preview-09-2025"),
            Some(0.3)
        );
        assert_eq!(input_of(&table, "gemini", "gemini-2.0-flash-001"), Some(0.1));
        assert_eq!(input_of(&table, "gemini", "gemini-3-pro-preview"), Some(2.0));
        assert_eq!(
            input_of(&table, "vertex", "publishers/google/models/gemini-2.5-flash-lite"),
            Some(0.1)
        );
        assert_eq!(
            input_of(&table, "vertex", "claude-sonnet-4-5@20250929"),
            Some(3.0)
        );
        assert_eq!(
            input_of(&table, "vertex", "claude-3-5-sonnet-v2@20241022"),
            Some(3.0)
        );
        assert_eq!(input_of(&table, "mistral", "mistral-large-latest"), Some(0.5));
        assert_eq!(input_of(&table, "mistral", "mistral-large-2411"), Some(2.0));
        assert_eq!(input_of(&table, "mistral", "mistral-small-2506"), Some(0.1));
        assert_eq!(input_of(&table, "mistral", "codestral-latest"), Some(0.3));
        assert_eq!(input_of(&table, "mistral", "magistral-medium-2509"), Some(2.0));
        assert_eq!(input_of(&table, "deepseek", "deepseek-chat"), Some(0.28));
        assert_eq!(input_of(&table, "deepseek", "deepseek-reasoner"), Some(0.28));
        let openrouter = |name| input_of(&table, "openrouter", name);
        assert_eq!(openrouter("anthropic/claude-opus-4.1"), Some(15.0));
        assert_eq!(openrouter("google/gemini-2.5-pro"), Some(1.25));
        assert_eq!(openrouter("mistralai/mistral-large-2411"), Some(2.0));
        assert_eq!(openrouter("deepseek/deepseek-chat-v3.1"), Some(0.28));
        assert_eq!(openrouter("deepseek/deepseek-r1"), Some(0.4));
        assert_eq!(openrouter("amazon/nova-pro-v1"), Some(0.8));
        assert_eq!(
            openrouter("meta-llama/llama-3.3-70b-instruct"),
            Some(0.13),
            "OpenRouter's price, not Bedrock's or Groq's"
        );
        assert_eq!(openrouter("openai/gpt-4o-mini:nitro"), Some(0.15));
        assert_eq!(openrouter("meta-llama/llama-3.3-70b-instruct:free"), Some(0.0));
        assert_eq!(
            table
                .price(&model("openrouter", "deepseek/deepseek-r1:free"))
                .map(|p| p.output),
            Some(0.0)
        );
        assert_eq!(
            openrouter("openrouter/auto"),
            None,
            "a router's choice has no one price"
        );
    }

    #[test]
    fn every_shipped_price_parses_and_is_sane() {
        let shipped: BTreeMap<String, Price> = json5::from_str(SHIPPED).unwrap();
        assert!(shipped.len() > 80, "{} prices", shipped.len());
        for (name, price) in &shipped {
            assert!(
                price.input >= 0.0 && price.output >= price.input * 0.5,
                "{name}: {price:?}"
            );
            assert!(
                price.cached_input.is_none_or(|c| c <= price.input),
                "{name}: {price:?}"
            );
        }
    }

    #[test]
    fn unknown_models_have_no_price_and_prefixes_need_a_boundary() {
        let table = PriceTable::new(&BTreeMap::new());
        assert_eq!(input_of(&table, "ollama", "llama3.2"), None);
        assert_eq!(
            input_of(&table, "openai", "gpt-4oo"),
            None,
            "gpt-4o is not a prefix of gpt-4oo"
        );
        assert_eq!(input_of(&table, "openai", "o3x"), None);
    }

    #[test]
    fn the_config_overrides_and_extends() {
        let price = |input| Price {
            input,
            output: 1.0,
            cached_input: None,
            cache_write: None,
        };
        let overrides = BTreeMap::from([
            ("gpt-4o-mini".to_string(), price(9.0)),
            ("local/*".to_string(), price(0.0)),
            ("fake/special".to_string(), price(7.0)),
        ]);
        let table = PriceTable::new(&overrides);
        assert_eq!(input_of(&table, "openai", "gpt-4o-mini"), Some(9.0));
        assert_eq!(input_of(&table, "local", "anything"), Some(0.0));
        assert_eq!(input_of(&table, "fake", "special"), Some(7.0));
        assert_eq!(input_of(&table, "other", "special"), None);
    }

    #[test]
    fn cost_counts_cache_reads_writes_and_output_at_their_prices() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
            cache_write: Some(3.75),
        };
        let usage = Usage::new(1_000_000, 100_000).with_cache(400_000, 100_000);
        // 500k fresh × 3 + 400k × 0.3 + 100k × 3.75 + 100k × 15, per million
        let expected = 1.5 + 0.12 + 0.375 + 1.5;
        assert!((price.cost(&usage) - expected).abs() < 1e-9);
        let plain = Price {
            cached_input: None,
            cache_write: None,
            ..price
        };
        assert!((plain.cost(&Usage::new(1_000_000, 0).with_cache(1_000_000, 0)) - 3.0).abs() < 1e-9);
    }
}
