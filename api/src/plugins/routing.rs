//! Which agent answers a chat message, by OpenClaw's binding rules: the most
//! specific matching binding wins — a peer (the user, or the group/channel
//! itself), then the guild or chat, then the bot account, then the whole
//! channel (platform) — and with none the default agent answers. A binding
//! that names something the message does not match is not a candidate; among
//! equally specific ones the first in the config wins.

use onyx_plugin_sdk::IncomingMessage;

use crate::config::Binding;

/// The bot account every plugin runs as, for `match.accountId`.
pub const DEFAULT_ACCOUNT: &str = "default";

fn peer_matches(kind: &str, id: &str, message: &IncomingMessage) -> bool {
    match kind {
        "user" | "dm" | "direct" => id == message.user_id,
        "group" | "channel" | "chat" => id == message.chat_id,
        _ => id == message.user_id || id == message.chat_id,
    }
}

/// How specific a binding is for this message; `None` when it does not match.
fn specificity(binding: &Binding, message: &IncomingMessage) -> Option<u8> {
    if binding.channel != message.platform && binding.channel != "*" {
        return None;
    }
    let mut score = 1;
    if let Some(account) = &binding.account_id {
        if account != DEFAULT_ACCOUNT && account != "*" {
            return None;
        }
        score = 2;
    }
    if let Some(guild) = &binding.guild_id {
        if message.guild_id.as_deref() != Some(guild.as_str()) {
            return None;
        }
        score = 3;
    }
    if let Some(chat) = &binding.chat_id {
        if *chat != message.chat_id {
            return None;
        }
        score = 3;
    }
    if let Some((kind, id)) = &binding.peer {
        if !peer_matches(kind, id, message) {
            return None;
        }
        score = 4;
    }
    Some(score)
}

/// The agent id of the best binding, or `None` for the default agent.
pub fn route<'a>(bindings: &'a [Binding], message: &IncomingMessage) -> Option<&'a str> {
    let mut best: Option<(u8, &Binding)> = None;
    for binding in bindings {
        if let Some(score) = specificity(binding, message)
            && best.is_none_or(|(top, _)| score > top)
        {
            best = Some((score, binding));
        }
    }
    best.map(|(_, b)| b.agent_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(agent: &str, channel: &str) -> Binding {
        Binding {
            agent_id: agent.into(),
            channel: channel.into(),
            account_id: None,
            guild_id: None,
            chat_id: None,
            peer: None,
        }
    }

    fn message(platform: &str, guild: Option<&str>, chat: &str, user: &str) -> IncomingMessage {
        IncomingMessage {
            platform: platform.into(),
            chat_id: chat.into(),
            guild_id: guild.map(String::from),
            user_id: user.into(),
            text: "hi".into(),
            ..IncomingMessage::default()
        }
    }

    #[test]
    fn the_most_specific_binding_wins() {
        let bindings = vec![
            binding("everyone", "discord"),
            Binding {
                guild_id: Some("g1".into()),
                ..binding("server", "discord")
            },
            Binding {
                guild_id: Some("g1".into()),
                peer: Some(("user".into(), "u7".into())),
                ..binding("personal", "discord")
            },
            Binding {
                chat_id: Some("c9".into()),
                ..binding("team-chat", "telegram")
            },
            binding("tg", "telegram"),
        ];
        let route = |m: &IncomingMessage| route(&bindings, m).map(String::from);
        assert_eq!(
            route(&message("discord", Some("g1"), "c1", "u7")).as_deref(),
            Some("personal")
        );
        assert_eq!(
            route(&message("discord", Some("g1"), "c1", "u8")).as_deref(),
            Some("server")
        );
        assert_eq!(
            route(&message("discord", Some("g2"), "c1", "u7")).as_deref(),
            Some("everyone")
        );
        assert_eq!(
            route(&message("discord", None, "dm", "u7")).as_deref(),
            Some("everyone")
        );
        assert_eq!(
            route(&message("telegram", None, "c9", "u1")).as_deref(),
            Some("team-chat")
        );
        assert_eq!(
            route(&message("telegram", None, "c1", "u1")).as_deref(),
            Some("tg")
        );
        assert_eq!(
            route(&message("slack", None, "c1", "u1")),
            None,
            "no binding: the default agent"
        );
    }

    #[test]
    fn ties_go_to_the_first_binding() {
        let bindings = vec![binding("first", "telegram"), binding("second", "telegram")];
        assert_eq!(
            route(&bindings, &message("telegram", None, "c", "u")),
            Some("first")
        );
    }
}
