//! What the model sees of an MCP tool result: its text, a note for each
//! image, audio clip or resource, structured content as JSON when there is
//! no text, all cut to the configured length.

use serde_json::Value;

/// A tool call's result in words, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    pub text: String,
    pub is_error: bool,
}

impl CallOutcome {
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}

/// Renders a `tools/call` result (as JSON, whatever its protocol version).
pub fn render(result: &Value, max_chars: usize) -> CallOutcome {
    let mut parts: Vec<String> = Vec::new();
    for item in result["content"].as_array().into_iter().flatten() {
        parts.push(match item["type"].as_str().unwrap_or_default() {
            "text" => item["text"].as_str().unwrap_or_default().to_string(),
            "image" | "audio" => {
                let kind = item["type"].as_str().unwrap_or_default();
                let mime = item["mimeType"].as_str().unwrap_or("unknown type");
                let bytes = item["data"].as_str().map_or(0, |d| d.len() * 3 / 4);
                format!("[{kind}: {mime}, about {bytes} bytes, not shown]")
            }
            "resource" => {
                let resource = &item["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                match resource["text"].as_str() {
                    Some(text) => format!("[resource {uri}]\n{text}"),
                    None => format!(
                        "[resource {uri}: {}, binary, not shown]",
                        resource["mimeType"].as_str().unwrap_or("unknown type")
                    ),
                }
            }
            "resource_link" => format!(
                "[resource link: {} {}]",
                item["name"].as_str().unwrap_or_default(),
                item["uri"].as_str().unwrap_or_default()
            ),
            other => format!("[{other} content, not shown]"),
        });
    }
    let has_text = parts.iter().any(|p| !p.trim().is_empty());
    if !has_text && let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        parts.push(structured.to_string());
    }
    let text = cut(&parts.join("\n"), max_chars);
    let is_error = result["isError"].as_bool().unwrap_or(false);
    CallOutcome {
        text: if is_error && text.is_empty() {
            "the tool failed and said nothing".into()
        } else {
            text
        },
        is_error,
    }
}

/// At most `max` characters, with a note of what was cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => {
            let rest = text[end..].chars().count();
            format!("{}\n[… {rest} more characters cut]", &text[..end])
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_images_structured_content_and_errors_are_rendered() {
        let out = render(
            &json!({"content": [
                {"type": "text", "text": "The sum is 5"},
                {"type": "image", "data": "aGVsbG8h", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
                {"type": "resource_link", "uri": "test://1", "name": "one"}
            ]}),
            1000,
        );
        assert!(!out.is_error);
        assert!(
            out.text
                .starts_with("The sum is 5\n[image: image/png, about 6 bytes")
        );
        assert!(out.text.contains("[resource file:///a.txt]\ninside"));
        assert!(out.text.contains("[resource link: one test://1]"));

        let structured = render(
            &json!({"content": [], "structuredContent": {"temperature": 21}}),
            1000,
        );
        assert_eq!(structured.text, r#"{"temperature":21}"#);

        let failed = render(
            &json!({"content": [{"type": "text", "text": "no such city"}], "isError": true}),
            1000,
        );
        assert!(failed.is_error);
        assert_eq!(failed.text, "no such city");
    }

    #[test]
    fn long_output_is_cut_with_a_note() {
        let out = render(
            &json!({"content": [{"type": "text", "text": "é".repeat(50)}]}),
            10,
        );
        assert_eq!(
            out.text,
            format!("{}\n[… 40 more characters cut]", "é".repeat(10))
        );
    }
}
