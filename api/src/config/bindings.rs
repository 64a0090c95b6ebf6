//! `bindings`: OpenClaw's routing of chats to agents: which agent answers a
//! channel, an account, a guild, a chat or one peer. Taken as written; the
//! plugins match them.

use serde::Deserialize;

/// OpenClaw's binding: which agent answers a channel, account, chat or peer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBinding {
    pub agent_id: String,
    #[serde(rename = "match")]
    pub matcher: RawBindingMatch,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBindingMatch {
    pub channel: String,
    pub account_id: Option<String>,
    pub guild_id: Option<String>,
    pub chat_id: Option<String>,
    pub peer: Option<RawPeer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPeer {
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub agent_id: String,
    pub channel: String,
    pub account_id: Option<String>,
    pub guild_id: Option<String>,
    pub chat_id: Option<String>,
    pub peer: Option<(String, String)>,
}

pub(super) fn binding(raw: RawBinding) -> Binding {
    Binding {
        agent_id: raw.agent_id,
        channel: raw.matcher.channel,
        account_id: raw.matcher.account_id,
        guild_id: raw.matcher.guild_id,
        chat_id: raw.matcher.chat_id,
        peer: raw.matcher.peer.map(|p| (p.kind, p.id)),
    }
}
