//! `/v1/providers` and `/v1/aliases` (admin scope): list every provider the
//! gateway routes to, add, edit (a JSON merge patch), test, refresh the
//! models of, and remove the ones added through the API; the same for
//! aliases. Providers from the config file or the environment are listed
//! read-only. Keys and header values are write-only: answers show hints.
//! Every change is an audit event naming what changed, never a value.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use super::body::{JsonObject, typed};
use super::client::ClientIp;
use super::error::ApiError;
use super::keys::actor;
use super::middleware::Caller;
use super::ui_bodies::{Deleted, List};
use crate::app::App;
use crate::audit::{Action, NewEvent};
use crate::config::ConfigError;
use crate::health::DependencyHealth;
use crate::providers::api_added::{SpecError, parse_spec};
use crate::providers::registry::{AliasView, ProviderView, RegistryError};

impl From<RegistryError> for ApiError {
    fn from(err: RegistryError) -> Self {
        let not_found = |message: String, code| ApiError::NotFound { message, code };
        match err {
            RegistryError::Store(SpecError::Db(err)) => ApiError::Db(err),
            RegistryError::Store(SpecError::Invalid(err)) => invalid_fields(err),
            RegistryError::Store(err @ SpecError::NotFound(..)) => {
                not_found(err.to_string(), "provider_not_found")
            }
            err @ RegistryError::AliasNotFound(_) => not_found(err.to_string(), "alias_not_found"),
            RegistryError::InvalidAlias { field, message } => {
                ApiError::bad_request(format!("{field}: {message}"), Some(field))
            }
            err @ RegistryError::Build(_) => ApiError::bad_request(err.to_string(), None),
            other => ApiError::Conflict(other.to_string()),
        }
    }
}

/// A 400 naming the field a config-file entry given to the API got wrong.
pub(super) fn invalid_fields(err: ConfigError) -> ApiError {
    match err {
        ConfigError::Invalid { path, message } => {
            let param = (!path.is_empty()).then_some(path);
            let message = match &param {
                Some(param) => format!("{param}: {message}"),
                None => message,
            };
            ApiError::bad_request(message, param)
        }
        other => ApiError::bad_request(other.to_string(), None),
    }
}

/// Takes `name` out of a body that otherwise holds a config-file entry's fields.
pub(super) fn take_name(body: &mut Value, what_it_becomes: &str) -> Result<String, ApiError> {
    match body.as_object_mut().and_then(|map| map.remove("name")) {
        Some(Value::String(name)) => Ok(name),
        Some(_) => Err(ApiError::bad_request(
            "name: must be a string",
            Some("name".into()),
        )),
        None => Err(ApiError::bad_request(
            format!("name: required ({what_it_becomes})"),
            Some("name".into()),
        )),
    }
}

/// Records a change made through the API (what changed, never a value).
pub(super) async fn audit(
    app: &App,
    caller: &Caller,
    client: ClientIp,
    action: Action,
    target: &str,
    detail: String,
) {
    let event = NewEvent {
        action,
        actor: &actor(caller),
        target: Some(target),
        ip: client.text(),
        detail: Some(detail),
    };
    crate::audit::record(&app.db, event).await;
}

pub(super) fn field_names(body: &Value) -> String {
    body.as_object()
        .map(|map| map.keys().cloned().collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

pub async fn list(State(app): State<Arc<App>>) -> Json<List<ProviderView>> {
    Json(List::new(app.providers.views()))
}

fn unknown(name: &str) -> ApiError {
    ApiError::NotFound {
        message: format!("no provider {name:?}; GET /v1/providers lists them"),
        code: "provider_not_found",
    }
}

pub async fn get(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Json<ProviderView>, ApiError> {
    app.providers.view(&name).map(Json).ok_or_else(|| unknown(&name))
}

/// `POST /v1/providers`: `{ "name": …, …the config file's provider fields }`.
pub async fn create(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    JsonObject(mut body): JsonObject,
) -> Result<(StatusCode, Json<ProviderView>), ApiError> {
    let name = take_name(&mut body, "it becomes the model prefix, as in name/model")?;
    let fields = field_names(&body);
    let spec = parse_spec(body).map_err(invalid_fields)?;
    let view = app.providers.create(&name, spec).await?;
    let detail = format!("added ({} at {})", view.kind, view.base_url);
    audit(&app, &caller, client, Action::ProviderChanged, &name, detail).await;
    tracing::info!(provider = %name, fields = %fields, "provider added through the API");
    Ok((StatusCode::CREATED, Json(view)))
}

/// `PATCH /v1/providers/{name}`: a JSON merge patch over its fields.
pub async fn patch(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<ProviderView>, ApiError> {
    if body.get("name").is_some() {
        return Err(ApiError::bad_request(
            "name: a provider cannot be renamed; add one under the new name and remove this one",
            Some("name".into()),
        ));
    }
    let detail = format!("changed {}", field_names(&body));
    let view = app.providers.update(&name, body).await?;
    app.catalog.forget(&name).await;
    audit(&app, &caller, client, Action::ProviderChanged, &name, detail).await;
    Ok(Json(view))
}

pub async fn delete(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    app.providers.delete(&name).await?;
    app.catalog.forget(&name).await;
    audit(
        &app,
        &caller,
        client,
        Action::ProviderChanged,
        &name,
        "removed".into(),
    )
    .await;
    Ok(Json(Deleted::new(name, "provider.deleted")))
}

/// Asks the provider for its models: up, down, and how long it took.
pub async fn test(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Json<DependencyHealth>, ApiError> {
    let provider = app.router.provider(&name).ok_or_else(|| unknown(&name))?;
    Ok(Json(crate::health::probe_provider(provider.as_ref()).await))
}

/// Lists the provider's models again now (for `/v1/models` too).
pub async fn refresh_models(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Json<List<String>>, ApiError> {
    let provider = app.router.provider(&name).ok_or_else(|| unknown(&name))?;
    let models = app.catalog.refresh(provider.as_ref()).await?;
    Ok(Json(List::new(models)))
}

pub async fn list_aliases(State(app): State<Arc<App>>) -> Json<List<AliasView>> {
    Json(List::new(app.providers.aliases()))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "PutAlias")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "PutAlias"))]
#[serde(deny_unknown_fields)]
pub(super) struct PutAlias {
    /// `provider/model` references, tried in order.
    targets: Vec<String>,
}

/// `PUT /v1/aliases/{name}`: `{ "targets": ["provider/model", …fallbacks] }`.
pub async fn put_alias(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<AliasView>, ApiError> {
    let request: PutAlias = typed(&body)?;
    let view = app.providers.put_alias(&name, request.targets).await?;
    let detail = format!("routes to {}", view.targets.join(", then "));
    audit(&app, &caller, client, Action::AliasChanged, &name, detail).await;
    Ok(Json(view))
}

pub async fn delete_alias(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    app.providers.delete_alias(&name).await?;
    audit(
        &app,
        &caller,
        client,
        Action::AliasChanged,
        &name,
        "removed".into(),
    )
    .await;
    Ok(Json(Deleted::new(name, "alias.deleted")))
}
