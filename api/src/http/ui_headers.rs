//! Security headers on every control UI response: a strict
//! Content-Security-Policy whose only inline script allowed is SvelteKit's
//! bootstrap, by its SHA-256 (computed once from the embedded index.html, so a
//! rebuilt UI needs no edit here), plus no sniffing, no referrer, no framing.

use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use sha2::{Digest, Sha256};

/// `'sha256-…'` for each inline `<script>` (one without `src`) in `html`.
pub(super) fn inline_script_hashes(html: &str) -> Vec<String> {
    let mut hashes = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<script") {
        rest = &rest[start..];
        let Some(open_end) = rest.find('>') else { break };
        let tag = &rest[..open_end];
        let body = &rest[open_end + 1..];
        let Some(close) = body.find("</script") else { break };
        if !tag.contains(" src=") {
            let digest = Sha256::digest(&body.as_bytes()[..close]);
            let encoded = base64::engine::general_purpose::STANDARD.encode(digest);
            hashes.push(format!("'sha256-{encoded}'"));
        }
        rest = &body[close..];
    }
    hashes
}

/// The policy for a UI whose index.html is `index`. Styles: files only, plus
/// `style` attributes (Svelte sets them; they cannot run code).
pub(super) fn policy(index: &str) -> String {
    let scripts = inline_script_hashes(index).join(" ");
    format!(
        "default-src 'self'; script-src 'self' {scripts}; style-src 'self'; style-src-attr 'unsafe-inline'; \
         img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

fn cached_policy(index: Option<&str>) -> &'static HeaderValue {
    static POLICY: OnceLock<HeaderValue> = OnceLock::new();
    POLICY.get_or_init(|| {
        let text = policy(index.unwrap_or_default());
        HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("default-src 'self'"))
    })
}

/// Adds the headers; `index` is the embedded index.html (read once).
pub(super) fn add(headers: &mut HeaderMap, index: Option<&str>) {
    headers.insert(header::CONTENT_SECURITY_POLICY, cached_policy(index).clone());
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_inline_scripts_only() {
        let html = "<script src=\"/a.js\"></script><div><script>\n\tboot();\n</script></div>";
        let hashes = inline_script_hashes(html);
        let expected = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(b"\n\tboot();\n"));
        assert_eq!(hashes, [format!("'sha256-{expected}'")]);
        let policy = policy(html);
        assert!(
            policy.contains(&format!("script-src 'self' 'sha256-{expected}';")),
            "{policy}"
        );
        assert!(!policy.contains("unsafe-eval"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    }
}
