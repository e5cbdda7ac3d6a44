//! Subscriptions over a websocket: the graphql-transport-ws protocol, as the
//! graphql-ws library's clients expect it.
//!
//! The server closes with the protocol's codes, so a client retries when it
//! should and stops when it should:
//! - `4400` a message that is not the protocol's;
//! - `4401` a `subscribe` before the connection was acknowledged;
//! - `4403` a `connection_init` whose identity is refused;
//! - `4408` no `connection_init` within `--ws-init-timeout`;
//! - `4409` a `subscribe` with the id of a running operation;
//! - `4429` a second `connection_init`;
//! - `1013` (try again later) a `connection_init` accepted while the server
//!   holds `--max-connections` live connections already;
//! - `1001` the server shuts down.
//!
//! Until its `connection_init` is accepted, a websocket holds a place among
//! the pending upgrades (`--max-pending-connections`, in total and per
//! client address), not among the live connections: a caller without an
//! identity cannot fill the pool authenticated clients are served from.
//! When every pending place is taken, a new upgrade takes the oldest one,
//! whose websocket is closed with `4408` as if its time had run out: a flood
//! of upgrades cannot keep out a client that sends `connection_init` at once.
//!
//! The server pings every `--ws-ping-interval` (proxies drop idle
//! connections) and ends a connection that let two pings go unanswered.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::{Data, Response as GqlResponse};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::stream::{BoxStream, SplitSink};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_stream::StreamMap;

use super::gate::Ticket;
use super::{ConnectionSlot, HttpState};
use crate::api::live::Splice;
use crate::api::rate_limit::Caller;
use crate::api::{Identity, Session};

/// The subprotocol spoken here.
pub const PROTOCOL: &str = "graphql-transport-ws";

/// Longest operation id accepted.
const MAX_ID: usize = 128;

/// A close: its code and reason.
type Close = (u16, String);

/// One operation's results, each with its serialised form when it was
/// rendered from a template (see [`crate::api::live`]); `None` marks its end.
type Results = BoxStream<'static, Option<(GqlResponse, Option<String>)>>;

/// One connection, until it closes or the server shuts down.
pub async fn serve(socket: WebSocket, state: HttpState, peer: Option<String>, pending: Ticket) {
    let (mut sink, mut stream) = socket.split();
    let mut connection = Connection {
        state,
        peer,
        pending: Some(pending),
        slot: None,
        session: None,
        caller: None,
        initialised: false,
        operations: StreamMap::new(),
        answered: HashSet::new(),
    };
    let close = connection.run(&mut sink, &mut stream).await;
    if let Some((code, reason)) = close {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = sink.send(Message::Close(Some(frame))).await;
    }
    let _ = sink.close().await;
}

struct Connection {
    state: HttpState,
    /// The client's address, for rate limits in dev mode.
    peer: Option<String>,
    /// Its place among the pending upgrades, until `connection_init` is
    /// accepted.
    pending: Option<Ticket>,
    /// Its place among the live connections, from then on.
    slot: Option<ConnectionSlot>,
    /// The acknowledged connection's data (its session).
    session: Option<Arc<Data>>,
    /// Who the acknowledged connection is, for rate limits.
    caller: Option<Caller>,
    /// A `connection_init` arrived (acknowledged or not yet).
    initialised: bool,
    /// Running operations by id.
    operations: StreamMap<String, Results>,
    /// Running operations that sent a result already.
    answered: HashSet<String>,
}

type Sink = SplitSink<WebSocket, Message>;

impl Connection {
    /// Runs the connection; the close to send, if any.
    async fn run(
        &mut self,
        sink: &mut Sink,
        stream: &mut futures_util::stream::SplitStream<WebSocket>,
    ) -> Option<Close> {
        let limits = self.state.limits;
        let init_deadline = tokio::time::sleep(limits.init_timeout);
        tokio::pin!(init_deadline);
        let mut pings =
            tokio::time::interval_at(Instant::now() + limits.ping_interval, limits.ping_interval);
        pings.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Pings sent since the client last answered (or said anything).
        let mut unanswered = 0u32;
        let shutdown = self.state.shutdown.clone();
        let replaced = self
            .pending
            .as_ref()
            .map(Ticket::told_to_leave)
            .unwrap_or_default();
        loop {
            tokio::select! {
                message = stream.next() => {
                    let Some(Ok(message)) = message else { return None };
                    unanswered = 0;
                    let text = match message {
                        Message::Text(text) => text,
                        Message::Binary(_) => {
                            return Some((4400, "binary messages are not part of graphql-transport-ws".into()))
                        }
                        Message::Close(_) => return None,
                        Message::Ping(_) | Message::Pong(_) => continue,
                    };
                    let outgoing = match self.receive(text.as_str()).await {
                        Ok(outgoing) => outgoing,
                        Err(close) => return Some(close),
                    };
                    for message in outgoing {
                        if send(sink, &message).await.is_err() {
                            return None;
                        }
                    }
                }
                Some((id, result)) = self.operations.next(), if !self.operations.is_empty() => {
                    let message = match result {
                        // Serialised once for every subscriber of the event,
                        // with this one's own values written in.
                        Some((_, Some(payload))) => {
                            self.answer(&id);
                            next_message(&id, &payload)
                        }
                        // A request that failed before it ran (it did not
                        // parse or validate, or was refused) is an `error`,
                        // which ends the operation.
                        Some((response, None)) if !self.answered.contains(&id)
                            && super::respond::failed_before_running(&response) => {
                            self.operations.remove(&id);
                            error_message(&id, response).to_string()
                        }
                        Some((response, None)) => {
                            self.answer(&id);
                            json!({ "id": id, "type": "next", "payload": response }).to_string()
                        }
                        None => {
                            self.operations.remove(&id);
                            self.answered.remove(&id);
                            json!({ "id": id, "type": "complete" }).to_string()
                        }
                    };
                    if send_text(sink, message).await.is_err() {
                        return None;
                    }
                }
                _ = &mut init_deadline, if !self.initialised => {
                    return Some((4408, "connection initialisation timeout".into()));
                }
                _ = replaced.cancelled(), if self.pending.is_some() => {
                    return Some((
                        4408,
                        "connection initialisation timeout: newer websockets awaiting \
                         connection_init took this one's place"
                            .into(),
                    ));
                }
                _ = pings.tick() => {
                    if unanswered >= 2 {
                        return Some((1011, "two pings went unanswered".into()));
                    }
                    unanswered += 1;
                    if send(sink, &json!({ "type": "ping" })).await.is_err() {
                        return None;
                    }
                }
                _ = shutdown.cancelled() => return Some((1001, "server shutting down".into())),
            }
        }
    }

    /// Handles one client message: what to send back, or the close to end
    /// the connection with.
    async fn receive(&mut self, text: &str) -> Result<Vec<Value>, Close> {
        let message: Value = serde_json::from_str(text)
            .map_err(|err| (4400, format!("invalid message: not JSON ({err})")))?;
        let kind = message
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| (4400, "invalid message: no `type`".to_owned()))?;
        match kind {
            "connection_init" => {
                if self.initialised {
                    return Err((4429, "too many initialisation requests".into()));
                }
                self.initialised = true;
                let payload = message.get("payload").cloned().unwrap_or(Value::Null);
                if !(payload.is_null() || payload.is_object()) {
                    return Err((4400, "invalid message: `payload` must be an object".into()));
                }
                let session = self.authenticate(&payload)?;
                let limits = self.state.limits;
                let slot = ConnectionSlot::take(&self.state.connections, limits.max_connections)
                    .ok_or_else(|| {
                        (
                            1013,
                            format!(
                                "TOO_MANY_CONNECTIONS: this server holds at most {} live \
                                 connections; try again later",
                                limits.max_connections
                            ),
                        )
                    })?;
                self.slot = Some(slot);
                self.pending = None;
                self.caller = Some(super::caller(
                    &self.state,
                    &session.identity,
                    self.peer.as_deref(),
                ));
                let mut data = Data::default();
                data.insert(session);
                self.session = Some(Arc::new(data));
                Ok(vec![json!({ "type": "connection_ack" })])
            }
            "ping" => {
                let mut pong = json!({ "type": "pong" });
                if let Some(payload) = message.get("payload").filter(|p| p.is_object()) {
                    pong["payload"] = payload.clone();
                }
                Ok(vec![pong])
            }
            "pong" => Ok(Vec::new()),
            "subscribe" => {
                let id = operation_id(&message)?;
                let Some(session) = self.session.clone() else {
                    return Err((4401, "unauthorized: subscribe before connection_ack".into()));
                };
                if self.operations.contains_key(&id) {
                    return Err((4409, format!("subscriber for {id} already exists")));
                }
                let payload = message
                    .get("payload")
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or_else(|| {
                        (
                            4400,
                            "invalid message: `subscribe` needs a `payload` object".to_owned(),
                        )
                    })?;
                Ok(self.start(id, payload, session).into_iter().collect())
            }
            "complete" => {
                let id = operation_id(&message)?;
                // The client stopped listening: no `complete` goes back.
                self.operations.remove(&id);
                self.answered.remove(&id);
                Ok(Vec::new())
            }
            other => Err((4400, format!("invalid message type {other:?}"))),
        }
    }

    /// Notes that operation `id` sent a result (its id copied once, not
    /// for every event).
    fn answer(&mut self, id: &str) {
        if !self.answered.contains(id) {
            self.answered.insert(id.to_owned());
        }
    }

    /// The session for a `connection_init` payload, or a 4403 close.
    fn authenticate(&self, payload: &Value) -> Result<Session, Close> {
        let state = &self.state;
        let session = Session::new(state.auth.from_payload(payload), &state.app)
            .with_subscription_limit(state.limits.max_subscriptions);
        match &session.identity {
            Identity::Viewer(_) => Ok(session),
            Identity::Invalid(reason) => Err((4403, format!("UNAUTHENTICATED: {reason}"))),
            Identity::Anonymous => Err((
                4403,
                "UNAUTHENTICATED: connection_init carries no identity".into(),
            )),
        }
    }

    /// Starts an operation; an `error` message when it cannot run.
    fn start(&mut self, id: String, payload: Value, session: Arc<Data>) -> Option<Value> {
        let request = match self.state.persisted.request(payload) {
            Ok(request) => request,
            Err(refused) => return Some(error_message(&id, refused.response())),
        };
        let request = match &self.caller {
            Some(caller) => request.data(caller.clone()),
            None => request,
        };
        let splice = Splice::default();
        let request = request.data(splice.clone());
        let results = self
            .state
            .schema
            .execute_stream_with_session_data(request, session)
            .map(move |response| Some((response, splice.take())))
            .chain(futures_util::stream::once(async { None }));
        self.operations.insert(id, results.boxed());
        None
    }
}

/// The `error` message for a request that did not run.
fn error_message(id: &str, response: GqlResponse) -> Value {
    json!({ "id": id, "type": "error", "payload": response.errors })
}

/// A message's operation id, or a 4400 close.
fn operation_id(message: &Value) -> Result<String, Close> {
    match message.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() && id.len() <= MAX_ID => Ok(id.to_owned()),
        Some(_) => Err((
            4400,
            format!("invalid message: `id` must be 1 to {MAX_ID} characters"),
        )),
        None => Err((4400, "invalid message: no `id`".into())),
    }
}

/// A `next` message around a payload serialised already, as `json!` would
/// write it.
fn next_message(id: &str, payload: &str) -> String {
    let id = Value::from(id).to_string();
    format!(r#"{{"id":{id},"type":"next","payload":{payload}}}"#)
}

async fn send(sink: &mut Sink, message: &Value) -> Result<(), axum::Error> {
    send_text(sink, message.to_string()).await
}

async fn send_text(sink: &mut Sink, message: String) -> Result<(), axum::Error> {
    sink.send(Message::Text(message.into())).await
}

/// Defaults of `--ws-init-timeout` and `--ws-ping-interval`.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(15);
