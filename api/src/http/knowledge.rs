//! `GET /v1/knowledge` (admin): the knowledge sources with what `/health`
//! leaves out: menos's address, the key Onyx signs with (its id and the
//! `authorized_keys` line menos needs) and what menos last said.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::app::App;
use crate::knowledge::Probe;

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "KnowledgeSources")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "KnowledgeSources"))]
pub struct Sources {
    /// `null` without `knowledge.menos`.
    pub menos: Option<MenosView>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MenosView {
    pub url: String,
    /// menos's name for Onyx's key (`SHA256:` and 16 hex digits).
    pub key_id: String,
    /// The line to add to menos's authorized keys.
    pub public_key: String,
    pub probe: Probe,
}

pub async fn sources(State(app): State<Arc<App>>) -> Json<Sources> {
    let menos = match &app.menos {
        Some(menos) => Some(MenosView {
            url: menos.url().to_string(),
            key_id: menos.signer().key_id().to_string(),
            public_key: menos.signer().public_openssh().to_string(),
            probe: menos.probe().await,
        }),
        None => None,
    };
    Json(Sources { menos })
}
