//! Google's Gemini models over the provider's [`Transport`], two ways in: Google AI Studio's
//! Gemini API (`type: "gemini"`, the key in `x-goog-api-key`, never in the
//! URL) and Vertex AI (`type: "vertex"`, a project and location in the URL,
//! an OAuth2 bearer from [`auth`]). Both speak `generateContent` and
//! `streamGenerateContent?alt=sse`, translated both ways to OpenAI's chat
//! completions: requests (`request`), responses and errors (`response`),
//! streams (`stream`).

mod auth;
mod request;
mod response;
mod stream;

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::transport::Transport;
use super::{ChatCall, ChatChunkStream, CompletionReply, EmbeddingsCall, Provider, ProviderError};
use crate::config::{ProviderConfig, ProviderKind};

/// How a request is authorized.
enum Access {
    /// Google AI Studio: `x-goog-api-key`.
    ApiKey(Option<SecretString>),
    Vertex(auth::Credentials),
}

pub struct Gemini {
    name: String,
    kind: ProviderKind,
    transport: Transport,
    /// Everything before `/{model}:generateContent`.
    models_url: String,
    access: Access,
    headers: Vec<(String, SecretString)>,
    /// Models listed without asking (Vertex has no list of its own here).
    models: Vec<String>,
    timeout: Duration,
}

impl Gemini {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        let transport = Transport::new(config)?;
        let base = config.base_url.as_str().trim_end_matches('/');
        let (models_url, access) = match &config.vertex {
            Some(vertex) => {
                let url = format!(
                    "{base}/v1/projects/{}/locations/{}/publishers/google/models",
                    vertex.project, vertex.location
                );
                let credentials = match (&vertex.credentials_file, &config.api_key) {
                    (Some(path), _) => {
                        let shown = path.display().to_string();
                        match std::fs::read_to_string(path) {
                            Ok(text) => auth::Credentials::service_account(
                                &config.name,
                                &shown,
                                &text,
                                transport.client().clone(),
                                config.timeout,
                            )?,
                            // Not there yet (a mounted secret, the example config):
                            // the provider starts and says so on each call and in /health.
                            Err(err) => auth::Credentials::Unreadable(format!(
                                "cannot read the credentialsFile {shown}: {err}"
                            )),
                        }
                    }
                    (None, Some(token)) => auth::Credentials::Static(token.clone()),
                    (None, None) => {
                        return Err(ProviderError::InvalidRequest(format!(
                            "providers.{}.credentialsFile: vertex needs a service account key or an access token",
                            config.name
                        )));
                    }
                };
                (url, Access::Vertex(credentials))
            }
            None => (
                format!("{base}/v1beta/models"),
                Access::ApiKey(config.api_key.clone()),
            ),
        };
        Ok(Self {
            name: config.name.clone(),
            kind: config.kind,
            transport,
            models_url,
            access,
            headers: config.headers.clone(),
            models: config.models.clone(),
            timeout: config.timeout,
        })
    }

    async fn request(
        &self,
        method: reqwest::Method,
        url: String,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        let mut builder = self.transport.client().request(method, url);
        match &self.access {
            Access::ApiKey(Some(key)) => builder = builder.header("x-goog-api-key", key.expose_secret()),
            Access::ApiKey(None) => {}
            Access::Vertex(credentials) => {
                let token = credentials.bearer(&self.name).await?;
                builder = builder.bearer_auth(token.expose_secret());
            }
        }
        for (name, value) in &self.headers {
            builder = builder.header(name, value.expose_secret());
        }
        Ok(builder)
    }

    fn model_url(&self, model: &str, method: &str) -> Result<String, ProviderError> {
        // The model goes into the URL path.
        if model.is_empty()
            || !model
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
        {
            return Err(ProviderError::InvalidRequest(format!(
                "model: {model:?} is not a Gemini model name (letters, digits, '-', '_', '.', '@')"
            )));
        }
        Ok(format!("{}/{model}:{method}", self.models_url))
    }

    /// Sends a request and returns the response once its status is a success.
    async fn send(&self, builder: reqwest::RequestBuilder) -> Result<reqwest::Response, ProviderError> {
        let map = |err| ProviderError::from_reqwest(&self.name, err, self.timeout);
        let response = super::within(&self.name, self.timeout, builder.send(), map).await?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        let (message, google_status) = match serde_json::from_slice::<response::ErrorBody>(&body) {
            Ok(parsed) => (parsed.error.message, parsed.error.status),
            Err(_) => (format!("the upstream failed with HTTP {status}"), None),
        };
        Err(ProviderError::Upstream {
            provider: self.name.clone(),
            status,
            message,
            kind: None,
            code: match status {
                404 => Some("model_not_found".into()),
                _ => google_status.map(|s| s.to_ascii_lowercase()),
            },
            param: None,
        })
    }

    async fn generate(
        &self,
        model: &str,
        call: &ChatCall,
        stream: bool,
    ) -> Result<reqwest::Response, ProviderError> {
        if stream && call.request.n.is_some_and(|n| n > 1) {
            return Err(ProviderError::InvalidRequest(
                "n: a streamed gemini answer has one choice".into(),
            ));
        }
        let body = request::generate_request(&call.request)?;
        let url = match stream {
            true => format!("{}?alt=sse", self.model_url(model, "streamGenerateContent")?),
            false => self.model_url(model, "generateContent")?,
        };
        let builder = self.request(reqwest::Method::POST, url).await?.json(&body);
        self.send(builder).await
    }

    fn bad_response(&self, detail: impl ToString) -> ProviderError {
        ProviderError::bad_response(&self.name, detail)
    }
}

impl Provider for Gemini {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        self.kind
    }

    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>> {
        async move {
            let response = self.generate(model, call, false).await?;
            let map = |err| ProviderError::from_reqwest(&self.name, err, self.timeout);
            let bytes = super::within(&self.name, self.timeout, response.bytes(), map).await?;
            let parsed: response::Response =
                serde_json::from_slice(&bytes).map_err(|err| self.bad_response(err))?;
            Ok(CompletionReply::Typed(response::to_completion(parsed, model)))
        }
        .boxed()
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>> {
        async move {
            let response = self.generate(model, call, true).await?;
            let translator = stream::StreamTranslator::new(&self.name, model);
            Ok(super::sse::chunks(&self.name, response, translator))
        }
        .boxed()
    }

    fn embeddings<'a>(
        &'a self,
        _: &'a str,
        _: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        super::no_embeddings(&self.name, self.kind)
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        async move {
            let mut models = self.models.clone();
            match &self.access {
                // Vertex lists no publisher models per project: getting a
                // token proves the credentials; the configured models are listed.
                Access::Vertex(credentials) => {
                    credentials.bearer(&self.name).await?;
                }
                Access::ApiKey(_) => {
                    let url = format!("{}?pageSize=1000", self.models_url);
                    let builder = self.request(reqwest::Method::GET, url).await?;
                    let list: Value = self
                        .send(builder)
                        .await?
                        .json()
                        .await
                        .map_err(|err| self.bad_response(err))?;
                    let listed = list["models"].as_array().into_iter().flatten().filter_map(|m| {
                        let generates = m["supportedGenerationMethods"]
                            .as_array()
                            .is_none_or(|methods| methods.iter().any(|x| x == "generateContent"));
                        let name = m["name"].as_str()?;
                        generates.then(|| name.trim_start_matches("models/").to_string())
                    });
                    for name in listed {
                        if !models.contains(&name) {
                            models.push(name);
                        }
                    }
                }
            }
            Ok(models)
        }
        .boxed()
    }
}
