//! Talking to the server as clients do: GraphQL over HTTP with a pooled client
//! and dev-mode identity headers, and graphql-transport-ws subscriptions.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A GraphQL-over-HTTP client for one tenant; every call names its user.
#[derive(Clone)]
pub struct Gql {
    http: reqwest::Client,
    url: String,
    base: String,
    tenant: String,
    addr: SocketAddr,
}

/// The identity the application's backend uses for bookkeeping reads.
pub const SERVICE_USER: &str = "bench-service";

impl Gql {
    pub fn new(addr: SocketAddr, tenant: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true)
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Self {
            http,
            url: format!("http://{addr}/graphql"),
            base: format!("http://{addr}"),
            tenant: tenant.to_owned(),
            addr,
        })
    }

    /// Sends one operation as `user` (with the `service` role when asked) and
    /// returns the whole response body.
    pub async fn send(
        &self,
        user: &str,
        service: bool,
        query: &str,
        variables: &Value,
    ) -> anyhow::Result<Value> {
        self.send_as(user, service, query, variables).await
    }

    /// As [`Gql::send`], the response read as `T`: a load generator reads
    /// what it checks into a lean type instead of a tree of every field.
    pub async fn send_as<T: serde::de::DeserializeOwned>(
        &self,
        user: &str,
        service: bool,
        query: &str,
        variables: &Value,
    ) -> anyhow::Result<T> {
        let mut request = self
            .http
            .post(&self.url)
            .header("x-riverfeed-tenant", &self.tenant)
            .header("x-riverfeed-user", user)
            .json(&json!({ "query": query, "variables": variables }));
        if service {
            request = request.header("x-riverfeed-roles", "service");
        }
        let response = request.send().await.context("GraphQL request failed")?;
        let status = response.status();
        let body: T = response
            .json()
            .await
            .with_context(|| format!("GraphQL response (HTTP {status}) is not JSON"))?;
        Ok(body)
    }

    /// Posts `query` to the bench's in-memory route (`/bench/reference`) as
    /// [`Gql::send_as`] posts it to `/graphql`, and reads the answer as `T`.
    pub async fn reference_as<T: serde::de::DeserializeOwned>(
        &self,
        user: &str,
        query: &str,
        variables: &Value,
    ) -> anyhow::Result<T> {
        let response = self
            .http
            .post(format!("{}/bench/reference", self.base))
            .header("x-riverfeed-tenant", &self.tenant)
            .header("x-riverfeed-user", user)
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .context("reference request failed")?;
        response.json().await.context("the reference is not JSON")
    }

    /// As [`Gql::send`], but a response with `errors` is an error; returns `data`.
    pub async fn data(
        &self,
        user: &str,
        service: bool,
        query: &str,
        variables: &Value,
    ) -> anyhow::Result<Value> {
        let body = self.send(user, service, query, variables).await?;
        if let Some(errors) = body.get("errors") {
            anyhow::bail!("GraphQL errors: {errors}");
        }
        Ok(body["data"].clone())
    }

    /// Records an action as `actor`; returns its id.
    pub async fn record(&self, actor: &str, input: &Value) -> anyhow::Result<String> {
        let data = self
            .data(
                actor,
                false,
                "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }",
                &json!({ "input": input }),
            )
            .await?;
        data["recordAction"]["actionId"]
            .as_str()
            .map(str::to_owned)
            .context("recordAction answered no id")
    }

    /// Waits until every action of `ids` has been fanned out (`DONE`); `each`
    /// hears of every action as it finishes. Returns when the last one is
    /// seen done.
    ///
    /// The worker claims the oldest actions first, so this asks about the
    /// oldest 100 still pending (the API's list limit) until they are done,
    /// then moves on: the polling stays a light load next to what it measures.
    pub async fn wait_done(
        &self,
        ids: &[String],
        timeout: Duration,
        mut each: impl FnMut(&str),
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        // One action: poll often, this is the resolution of its fan-out time.
        let pause = if ids.len() <= 1 {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(5)
        };
        let mut pending: std::collections::VecDeque<String> = ids.iter().cloned().collect();
        while !pending.is_empty() {
            let take = pending.len().min(100);
            let chunk: Vec<String> = pending.drain(..take).collect();
            let data = self
                .data(
                    SERVICE_USER,
                    true,
                    "query($ids: [ID!]!) { actions(actionIds: $ids) { actionId fanOut { state } } }",
                    &json!({ "ids": chunk }),
                )
                .await?;
            let mut still = Vec::new();
            for (i, id) in chunk.into_iter().enumerate() {
                if data["actions"][i]["fanOut"]["state"] == "DONE" {
                    each(&id);
                } else {
                    still.push(id);
                }
            }
            if still.is_empty() {
                continue;
            }
            for id in still.into_iter().rev() {
                pending.push_front(id);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{} actions were not fanned out within {timeout:?}",
                pending.len()
            );
            tokio::time::sleep(pause).await;
        }
        Ok(Instant::now())
    }

    /// The number of live topics the hub holds (from `/metrics`).
    pub async fn live_topics(&self) -> anyhow::Result<u64> {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await?
            .text()
            .await?;
        text.lines()
            .find_map(|l| l.strip_prefix("riverfeed_live_topics "))
            .and_then(|v| v.trim().parse().ok())
            .context("/metrics has no riverfeed_live_topics")
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/graphql/ws", self.addr)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The HTTP client, for requests outside GraphQL.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a graphql-transport-ws connection as `user` and subscribes to its
/// home feed's events. Small buffers: a subscriber mostly idles.
pub async fn subscribe_feed(url: &str, tenant: &str, user: &str) -> anyhow::Result<Socket> {
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "graphql-transport-ws".parse()?);
    let config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0);
    let (mut socket, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(config), true).await?;
    let init = json!({
        "type": "connection_init",
        "payload": { "x-riverfeed-tenant": tenant, "x-riverfeed-user": user },
    });
    socket.send(Message::Text(init.to_string().into())).await?;
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) if text.contains("connection_ack") => break,
            Some(Ok(Message::Text(text))) if text.contains("\"ping\"") => {
                pong(&mut socket).await?;
            }
            Some(Ok(Message::Text(text))) => anyhow::bail!("expected connection_ack: {text}"),
            Some(Ok(_)) => continue,
            Some(Err(err)) => return Err(err.into()),
            None => anyhow::bail!("the server closed the connection before acking"),
        }
    }
    let subscribe = json!({
        "id": "feed",
        "type": "subscribe",
        "payload": { "query": "subscription { feedEvents { kind item { actionId } } }" },
    });
    socket
        .send(Message::Text(subscribe.to_string().into()))
        .await?;
    Ok(socket)
}

pub async fn pong(socket: &mut Socket) -> anyhow::Result<()> {
    socket
        .send(Message::Text(r#"{"type":"pong"}"#.into()))
        .await?;
    Ok(())
}
