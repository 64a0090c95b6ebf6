//! A chat-completions request as a vendor CLI takes it: one system prompt and
//! one user turn. The CLIs keep their own conversation per process and accept
//! only user input, so earlier turns of a stateless request travel as a
//! transcript before the last message.

use crate::providers::types::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice};

#[derive(Debug, PartialEq)]
pub struct Prompt {
    /// The system and developer messages, joined (empty when there are none).
    pub system: String,
    /// What the CLI is sent as the user's turn.
    pub user: String,
}

/// Why a request cannot go to a CLI; the text names the field.
pub fn render(request: &ChatRequest, kind: &str) -> Result<Prompt, String> {
    if let Some(ToolChoice::Named { .. }) = &request.tool_choice {
        return Err(format!(
            "tool_choice: {kind} providers answer in text and cannot be made to call a tool"
        ));
    }
    if let Some(ToolChoice::Mode(mode)) = &request.tool_choice
        && mode == "required"
    {
        return Err(format!(
            "tool_choice: {kind} providers answer in text and cannot be made to call a tool"
        ));
    }
    let mut system = Vec::new();
    let mut turns = Vec::new();
    for (index, message) in request.messages.iter().enumerate() {
        let text = text_of(message, index, kind)?;
        match message.role {
            Role::System | Role::Developer => system.push(text),
            _ => turns.push((message, text)),
        }
    }
    let Some((last, last_text)) = turns.pop() else {
        return Err("messages: the conversation has no user message".into());
    };
    let mut user = String::new();
    if !turns.is_empty() {
        user.push_str("Earlier in this conversation:\n\n");
        for (message, text) in &turns {
            user.push_str(&transcript_line(message, text));
            user.push_str("\n\n");
        }
        user.push_str("---\n\n");
    }
    if last.role == Role::User {
        user.push_str(&last_text);
    } else {
        user.push_str(&transcript_line(last, &last_text));
        user.push_str("\n\nContinue from here.");
    }
    Ok(Prompt {
        system: system.join("\n\n"),
        user,
    })
}

fn text_of(message: &Message, index: usize, kind: &str) -> Result<String, String> {
    if let Some(Content::Parts(parts)) = &message.content
        && parts.iter().any(|p| !matches!(p, ContentPart::Text { .. }))
    {
        return Err(format!(
            "messages[{index}].content: {kind} providers take text parts only"
        ));
    }
    Ok(message.text_content())
}

fn transcript_line(message: &Message, text: &str) -> String {
    match message.role {
        Role::Assistant => {
            let mut line = format!("Assistant: {text}");
            for call in message.tool_calls.iter().flatten() {
                line.push_str(&format!(
                    "\n[called tool {} with {}]",
                    call.function.name, call.function.arguments
                ));
            }
            line
        }
        Role::Tool | Role::Function => format!("Tool result: {text}"),
        _ => format!("User: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(body: serde_json::Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn one_user_message_goes_as_it_is_with_the_system_prompt_apart() {
        let prompt = render(
            &request(json!({"model": "m", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": "No emoji."},
                {"role": "user", "content": [{"type": "text", "text": "Say hello"}]},
            ]})),
            "claude-subscription",
        )
        .unwrap();
        assert_eq!(
            prompt,
            Prompt {
                system: "Be brief.\n\nNo emoji.".into(),
                user: "Say hello".into(),
            }
        );
    }

    #[test]
    fn earlier_turns_become_a_transcript_before_the_last_message() {
        let prompt = render(
            &request(json!({"model": "m", "messages": [
                {"role": "user", "content": "My name is Ada."},
                {"role": "assistant", "content": "Hello Ada."},
                {"role": "user", "content": "What is my name?"},
            ]})),
            "claude-subscription",
        )
        .unwrap();
        assert_eq!(prompt.system, "");
        assert_eq!(
            prompt.user,
            "Earlier in this conversation:\n\nUser: My name is Ada.\n\nAssistant: Hello Ada.\n\n---\n\nWhat is my name?"
        );
    }

    #[test]
    fn images_forced_tools_and_empty_conversations_are_refused_by_field() {
        let image = request(json!({"model": "m", "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
        ]}));
        assert!(
            render(&image, "k")
                .unwrap_err()
                .starts_with("messages[0].content:")
        );
        let forced = request(json!({"model": "m", "tool_choice": "required", "messages": [
            {"role": "user", "content": "hi"},
        ]}));
        assert!(render(&forced, "k").unwrap_err().starts_with("tool_choice:"));
        let empty = request(json!({"model": "m", "messages": [{"role": "system", "content": "x"}]}));
        assert!(render(&empty, "k").unwrap_err().starts_with("messages:"));
    }
}
