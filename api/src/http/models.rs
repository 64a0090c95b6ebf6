//! `GET /v1/models`: every provider's models, aliases, and the enabled agents
//! as `onyx:{id}`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::ui_bodies::{List, ModelView};
use crate::app::App;

pub async fn list_models(State(app): State<Arc<App>>) -> Json<List<ModelView>> {
    let mut data: Vec<ModelView> = app
        .agents
        .registry
        .list()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.enabled)
        .map(|a| ModelView {
            id: format!("onyx:{}", a.id),
            object: "model",
            created: 0,
            owned_by: "onyx".into(),
            name: Some(a.name),
        })
        .collect();
    data.extend(
        app.catalog
            .list(&app.router)
            .await
            .into_iter()
            .map(ModelView::from),
    );
    Json(List::new(data))
}
