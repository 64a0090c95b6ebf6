//! Which agents a caller may reach, and the extractors that decide a
//! request's agent once, for the scope check and the handler alike.
//!
//! The auth middleware puts an [`AgentReach`] on every request it admits:
//! every agent (admin and unscoped keys, the UI's session, a key-less
//! gateway) or only the agents a key is scoped to (`POST /v1/keys` with
//! `agents`). A handler that works on an agent takes it through one of the
//! extractors here ([`AgentPath`], [`AgentQuery`], [`AgentFilter`],
//! [`AgentInBody`]; `owned` for what an agent owns: sessions, runs, tasks,
//! stored responses), each of which reads it once, checks it and hands over a
//! [`CheckedAgent`], which nothing else can make. Only the routes of the
//! `agent` tier in `http::router` admit a scoped key at all; every other
//! route refuses it before its handler runs.

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::Extensions;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::body::{JsonObject, typed};
use super::error::ApiError;
use crate::agents::MAIN;
use crate::auth::KeyError;

/// The agents a caller may reach.
#[derive(Debug, Clone)]
pub enum AgentReach {
    Every,
    /// A key scoped to these agents (never empty).
    Only(Arc<[String]>),
}

impl AgentReach {
    /// The agent, if the caller may reach it; a 403 naming the key's agents otherwise.
    pub fn check(&self, agent: &str) -> Result<CheckedAgent, ApiError> {
        match self {
            Self::Only(agents) if !agents.iter().any(|a| a == agent) => {
                Err(self.refuse(format_args!("agent {agent:?} is not one of them")))
            }
            _ => Ok(CheckedAgent(agent.to_string())),
        }
    }

    pub fn is_scoped(&self) -> bool {
        matches!(self, Self::Only(_))
    }

    /// The agent a request that names none acts as: `main`, or the first
    /// agent of a scoped key.
    pub fn default_agent(&self) -> CheckedAgent {
        match self {
            Self::Only(agents) => CheckedAgent(agents.first().cloned().unwrap_or_else(|| MAIN.into())),
            Self::Every => CheckedAgent(MAIN.into()),
        }
    }

    /// The 403 a scoped key gets, saying which agents it has and why not this.
    pub fn refuse(&self, why: impl std::fmt::Display) -> ApiError {
        let agents = match self {
            Self::Only(agents) => agents.join(", "),
            Self::Every => String::new(),
        };
        KeyError::OutOfScope(format!("this API key is scoped to the agents {agents}: {why}")).into()
    }

    /// The caller's reach, as the auth middleware put it on the request. A
    /// route it did not run on reaches nothing (fail closed).
    pub fn of(extensions: &Extensions) -> Result<Self, ApiError> {
        extensions
            .get::<Self>()
            .cloned()
            .ok_or(ApiError::Forbidden("this route does not know who is asking"))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AgentReach {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Self::of(&parts.extensions)
    }
}

/// An agent id the caller may reach; made only by [`AgentReach::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAgent(String);

impl CheckedAgent {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for CheckedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A path parameter by name (percent-decoded), for the extractors here and in `owned`.
pub(super) async fn path_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<String, ApiError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::bad_request("the path could not be read", None))?;
    params
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
        .ok_or(ApiError::Forbidden("this route names no agent to check"))
}

/// The agent named by the path's `{agent}` segment.
pub struct AgentPath(pub CheckedAgent);

impl<S: Send + Sync> FromRequestParts<S> for AgentPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let agent = path_param(parts, state, "agent").await?;
        AgentReach::of(&parts.extensions)?.check(&agent).map(Self)
    }
}

/// The `agent` query parameter, `main` when absent or empty.
pub struct AgentQuery(pub CheckedAgent);

fn agent_param(parts: &Parts) -> Result<Option<String>, ApiError> {
    let mut params = super::query::parse(parts.uri.query())?;
    Ok(params.remove("agent").filter(|agent| !agent.is_empty()))
}

impl<S: Send + Sync> FromRequestParts<S> for AgentQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let agent = agent_param(parts)?.unwrap_or_else(|| MAIN.into());
        AgentReach::of(&parts.extensions)?.check(&agent).map(Self)
    }
}

/// The `agent` query parameter of a list: `None` lists every agent's, which
/// a scoped key may not ask for (it must name one of its agents).
pub struct AgentFilter(pub Option<CheckedAgent>);

impl<S: Send + Sync> FromRequestParts<S> for AgentFilter {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let reach = AgentReach::of(&parts.extensions)?;
        match agent_param(parts)? {
            Some(agent) => reach.check(&agent).map(|agent| Self(Some(agent))),
            None if reach.is_scoped() => Err(reach.refuse("name one with ?agent=")),
            None => Ok(Self(None)),
        }
    }
}

/// A JSON object body with an `agent` field (`main` when absent), checked,
/// then read as `T`. The field is rewritten to the checked agent before `T`
/// is read, so a `T` that keeps its own copy of it agrees.
pub struct AgentInBody<T> {
    pub agent: CheckedAgent,
    pub body: T,
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for AgentInBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let reach = AgentReach::of(req.extensions())?;
        let JsonObject(mut body) = JsonObject::from_request(req, state).await?;
        let agent = match body.get("agent") {
            None | Some(Value::Null) => MAIN,
            Some(Value::String(agent)) if agent.is_empty() => MAIN,
            Some(Value::String(agent)) => agent.as_str(),
            Some(_) => {
                return Err(ApiError::BadRequest {
                    message: "agent: must be a string".into(),
                    param: Some("agent".into()),
                    code: Some("invalid_type"),
                });
            }
        };
        let agent = reach.check(agent)?;
        body["agent"] = Value::String(agent.as_str().into());
        Ok(Self {
            body: typed(&body)?,
            agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_reach_checks_and_refuses_naming_its_agents() {
        let every = AgentReach::Every;
        assert_eq!(every.check("main").unwrap().as_str(), "main");
        assert_eq!(every.default_agent().as_str(), MAIN);
        let scoped = AgentReach::Only(vec!["ops".to_string(), "dev".to_string()].into());
        assert_eq!(scoped.check("dev").unwrap().as_str(), "dev");
        assert_eq!(scoped.default_agent().as_str(), "ops");
        let refused = scoped.check("main").unwrap_err();
        assert_eq!(refused.status(), 403);
        let text = refused.to_string();
        assert!(text.contains("ops, dev") && text.contains("\"main\""), "{text}");
        assert!(
            AgentReach::of(&Extensions::new()).is_err(),
            "no reach: fail closed"
        );
    }
}
