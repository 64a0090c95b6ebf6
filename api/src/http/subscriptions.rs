//! `GET /v1/subscriptions` (admin scope): each subscription provider and
//! whether its CLI is signed in (`connected`, `expired`, `account`), read
//! from the credential files under the data dir.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::views::List;
use crate::app::App;
use crate::providers::subscription::{self, status::SubscriptionStatus};

#[derive(Debug, Serialize)]
pub struct SubscriptionView {
    pub provider: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(flatten)]
    pub status: SubscriptionStatus,
}

pub async fn list(State(app): State<Arc<App>>) -> Json<List<SubscriptionView>> {
    let views = app
        .providers
        .views()
        .into_iter()
        .filter_map(|view| {
            subscription::sign_in(&view.kind).map(|status| SubscriptionView {
                provider: view.name,
                kind: view.kind,
                status,
            })
        })
        .collect();
    Json(List::new(views))
}
