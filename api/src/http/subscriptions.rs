//! `GET /v1/subscriptions` (admin scope): each subscription provider and
//! whether its CLI is signed in (`connected`, `expired`, `account`), read
//! from the credential files under the data dir; and
//! `/v1/subscriptions/{provider}/login`: the CLI's own sign-in started from
//! the UI (`POST`), followed (`GET`: URL, device code, state), fed a pasted
//! code (`POST …/login/code`) or cancelled (`DELETE`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::ApiError;
use super::body::{JsonObject, typed};
use super::ui_bodies::List;
use crate::app::App;
use crate::providers::subscription::device_login::{self, SignInView};
use crate::providers::subscription::{self, status::SubscriptionStatus};

#[derive(Debug, Serialize, schemars::JsonSchema)]
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

/// The subscription provider `name` and its CLI, or a 404 naming the problem.
fn subscription_provider(app: &App, name: &str) -> Result<(&'static str, Option<String>), ApiError> {
    let view = app.providers.view(name).ok_or_else(|| ApiError::NotFound {
        message: format!("no provider {name:?}"),
        code: "provider_not_found",
    })?;
    let cli = subscription::cli_for(&view.kind).ok_or_else(|| ApiError::NotFound {
        message: format!(
            "provider {name:?} is a {} provider, not a subscription one",
            view.kind
        ),
        code: "not_a_subscription",
    })?;
    Ok((cli, view.command))
}

/// `POST /v1/subscriptions/{provider}/login`: starts the CLI's sign-in.
pub async fn start_login(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<SignInView>), ApiError> {
    let (cli, command) = subscription_provider(&app, &name)?;
    let program = command.unwrap_or_else(|| cli.to_string());
    let view = device_login::start(&name, cli, &program, &subscription::config_home(cli))
        .map_err(|message| ApiError::bad_request(message, Some("command".into())))?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

fn no_sign_in(name: &str) -> ApiError {
    ApiError::NotFound {
        message: format!("no sign-in of {name:?} was started on this replica"),
        code: "sign_in_not_found",
    }
}

/// `GET /v1/subscriptions/{provider}/login`: the sign-in's state.
pub async fn login_state(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Json<SignInView>, ApiError> {
    subscription_provider(&app, &name)?;
    device_login::get(&name)
        .map(Json)
        .ok_or_else(|| no_sign_in(&name))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PastedCode {
    code: String,
}

/// `POST /v1/subscriptions/{provider}/login/code` `{"code"}`: a code the
/// sign-in page showed, passed to the CLI.
pub async fn login_code(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<SignInView>, ApiError> {
    subscription_provider(&app, &name)?;
    let body: PastedCode = typed(&body)?;
    if body.code.trim().is_empty() {
        return Err(ApiError::bad_request(
            "code: must not be empty",
            Some("code".into()),
        ));
    }
    device_login::send_code(&name, &body.code)
        .await
        .map_err(|message| ApiError::bad_request(message, Some("code".into())))?;
    device_login::get(&name)
        .map(Json)
        .ok_or_else(|| no_sign_in(&name))
}

/// `DELETE /v1/subscriptions/{provider}/login`: stops a running sign-in.
pub async fn cancel_login(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    subscription_provider(&app, &name)?;
    if device_login::cancel(&name) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_sign_in(&name))
    }
}
