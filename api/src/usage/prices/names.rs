//! How the model names that traffic carries become price-table keys, in one
//! place: a name is lowercased, stripped of what says where or how it runs
//! (an ARN's path, a Bedrock inference profile's geography, a Bedrock
//! vendor, a `publishers/…/models/` path, an OpenRouter vendor) and of `.`
//! as a separator inside a version; the table then matches the candidates
//! in order, each exactly or by its longest known prefix (which takes care
//! of dated and versioned suffixes: `-20250929`, `-v1:0`, `@20241022`,
//! `:nitro`).

/// Bedrock inference profiles put the geography first (`us.anthropic.…`,
/// `global.anthropic.…`): the price is the source region's, as for the model.
const PROFILE_PREFIXES: &[&str] = &["us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"];

/// Bedrock model ids name their vendor before a dot (`anthropic.claude-…`).
const BEDROCK_VENDORS: &[&str] = &[
    "anthropic",
    "amazon",
    "meta",
    "mistral",
    "cohere",
    "ai21",
    "deepseek",
    "openai",
    "qwen",
    "writer",
];

/// What a name resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Keys to look up, most specific first.
    Keys(Vec<String>),
    /// OpenRouter's `:free` variants: no charge, whatever the model.
    Free,
}

/// The keys to look up for a model name, most specific first.
pub fn resolve(model: &str) -> Resolved {
    let name = model.trim().to_ascii_lowercase();
    if name.ends_with(":free") {
        return Resolved::Free;
    }
    // `arn:aws:bedrock:…:inference-profile/us.anthropic.claude-…`, and
    // Vertex's `publishers/anthropic/models/claude-…`: the last segment.
    let name = match name.strip_prefix("arn:") {
        Some(arn) => arn.rsplit('/').next().unwrap_or(arn).to_string(),
        None => name,
    };
    let mut keys: Vec<String> = Vec::new();
    let mut push = |key: String| {
        if !key.is_empty() && !keys.contains(&key) {
            keys.push(key);
        }
    };
    let without_path = name.rsplit('/').next().unwrap_or(&name).to_string();
    // The name as given (`meta-llama/llama-3.3-70b-instruct` is priced per host).
    push(normalize(&name));
    let unprofiled = strip_profile(&without_path);
    // Bedrock's own form keeps the vendor (`meta.llama3-3-70b-instruct`):
    // open-weight models cost what their host charges.
    push(normalize(unprofiled));
    push(normalize(strip_vendor(unprofiled)));
    Resolved::Keys(keys)
}

fn strip_profile(name: &str) -> &str {
    match name.split_once('.') {
        Some((first, rest)) if PROFILE_PREFIXES.contains(&first) && rest.contains('.') => rest,
        _ => name,
    }
}

fn strip_vendor(name: &str) -> &str {
    match name.split_once('.') {
        Some((vendor, rest)) if BEDROCK_VENDORS.contains(&vendor) => rest,
        _ => name,
    }
}

/// Lowercase, with `.` as `-` (`claude-sonnet-4.5` and `claude-sonnet-4-5` are
/// one model; the table's keys are written either way).
pub fn normalize(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('.', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(model: &str) -> Vec<String> {
        match resolve(model) {
            Resolved::Keys(keys) => keys,
            Resolved::Free => panic!("{model} resolved as free"),
        }
    }

    #[test]
    fn bedrock_profiles_vendors_and_versions_resolve_to_the_model() {
        assert_eq!(
            keys("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            [
                "us-anthropic-claude-sonnet-4-5-20250929-v1:0",
                "anthropic-claude-sonnet-4-5-20250929-v1:0",
                "claude-sonnet-4-5-20250929-v1:0"
            ]
        );
        assert_eq!(
            keys("anthropic.claude-3-5-haiku-20241022-v1:0").last().unwrap(),
            "claude-3-5-haiku-20241022-v1:0"
        );
        assert_eq!(
            keys("global.anthropic.claude-haiku-4-5-20251001-v1:0")
                .last()
                .unwrap(),
            "claude-haiku-4-5-20251001-v1:0"
        );
        assert_eq!(
            keys("arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-pro-v1:0"),
            ["eu-amazon-nova-pro-v1:0", "amazon-nova-pro-v1:0", "nova-pro-v1:0"]
        );
        // The vendor stays in the second key: Llama costs what Bedrock charges.
        assert_eq!(
            keys("us.meta.llama3-3-70b-instruct-v1:0")[1],
            "meta-llama3-3-70b-instruct-v1:0"
        );
    }

    #[test]
    fn a_dotted_version_is_not_a_profile_or_a_vendor() {
        assert_eq!(keys("gpt-4.1-mini"), ["gpt-4-1-mini"]);
        assert_eq!(keys("claude-sonnet-4.5"), ["claude-sonnet-4-5"]);
        assert_eq!(keys("llama3.2"), ["llama3-2"]);
        // `us.` alone (no vendor after it) is left as it is.
        assert_eq!(keys("us.something"), ["us-something"]);
    }

    #[test]
    fn openrouter_vertex_and_gemini_paths_keep_the_full_name_first() {
        assert_eq!(
            keys("meta-llama/llama-3.3-70b-instruct"),
            ["meta-llama/llama-3-3-70b-instruct", "llama-3-3-70b-instruct"]
        );
        assert_eq!(
            keys("anthropic/claude-sonnet-4.5:nitro"),
            ["anthropic/claude-sonnet-4-5:nitro", "claude-sonnet-4-5:nitro"]
        );
        assert_eq!(
            keys("publishers/google/models/gemini-2.5-pro").last().unwrap(),
            "gemini-2-5-pro"
        );
        assert_eq!(
            keys("models/gemini-2.5-flash").last().unwrap(),
            "gemini-2-5-flash"
        );
        assert_eq!(
            keys("claude-3-5-sonnet-v2@20241022"),
            ["claude-3-5-sonnet-v2@20241022"]
        );
    }

    #[test]
    fn openrouter_free_variants_are_free() {
        assert_eq!(resolve("meta-llama/llama-3.3-70b-instruct:free"), Resolved::Free);
        assert_eq!(resolve("DeepSeek/DeepSeek-R1:FREE"), Resolved::Free);
        assert_ne!(resolve("free-model"), Resolved::Free);
    }
}
