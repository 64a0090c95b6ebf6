//! The older MCP transport, HTTP+SSE (protocol 2024-11-05), which servers
//! still deployed speak: a GET opens an event stream whose first `endpoint`
//! event names where to POST messages; answers arrive as `message` events.
//! The official Rust SDK no longer ships a client for it.

use std::collections::HashMap;
use std::future::Future;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use url::Url;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SseError(String);

pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: http::HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
}

impl SseTransport {
    /// Opens the event stream and waits for the endpoint to post to.
    pub async fn connect(
        client: reqwest::Client,
        url: Url,
        headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<Self, String> {
        let headers: http::HeaderMap = headers.into_iter().collect();
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(http::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|err| format!("cannot reach {url}: {}", crate::error_chain::chain(&err)))?;
        if !response.status().is_success() {
            return Err(format!(
                "{url} answered the event-stream request with {}",
                response.status()
            ));
        }
        let mut events = response.bytes_stream().eventsource();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event == "endpoint" => {
                    let endpoint = url
                        .join(event.data.trim())
                        .map_err(|err| format!("{url} sent an endpoint that is not a URL: {err}"))?;
                    // Its headers (and token) go only to the server's own origin.
                    if endpoint.origin() != url.origin() {
                        return Err(format!(
                            "{url} named an endpoint at another origin ({}); refused",
                            endpoint.origin().ascii_serialization()
                        ));
                    }
                    break endpoint;
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(format!("the event stream from {url} broke: {err}")),
                None => {
                    return Err(format!(
                        "{url} closed the event stream before naming its endpoint"
                    ));
                }
            }
        };
        let (sender, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if event.event != "message" {
                    continue;
                }
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&event.data) {
                    Ok(message) => {
                        if sender.send(message).await.is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        tracing::debug!(error = %err, "an MCP server sent a message that is not JSON-RPC")
                    }
                }
            }
        });
        Ok(Self {
            client,
            endpoint,
            headers,
            incoming,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let response = request.send().await.map_err(|err| {
                SseError(format!(
                    "cannot post to the server: {}",
                    crate::error_chain::chain(&err)
                ))
            })?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseError(format!(
                    "the server refused a message with {}",
                    response.status()
                )))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), SseError>> + Send {
        self.reader.abort();
        std::future::ready(Ok(()))
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
