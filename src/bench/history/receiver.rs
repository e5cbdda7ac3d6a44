//! The webhook receiver: an HTTP endpoint on loopback that answers every
//! delivery `204` at once and keeps it, by endpoint, with its `webhook-id`.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// One delivery the receiver acknowledged.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub hook: usize,
    pub id: String,
    pub body: Value,
}

type Kept = Arc<Mutex<Vec<Delivery>>>;

/// A running receiver; stops when dropped.
pub struct Receiver {
    pub base: String,
    kept: Kept,
    stop: CancellationToken,
}

impl Receiver {
    pub async fn start() -> anyhow::Result<Receiver> {
        let kept = Kept::default();
        let app = Router::new()
            .route("/hook/{hook}", post(keep))
            .with_state(kept.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
        });
        Ok(Receiver { base, kept, stop })
    }

    /// Every delivery so far.
    pub fn all(&self) -> Vec<Delivery> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn keep(
    State(kept): State<Kept>,
    Path(hook): Path<usize>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
    kept.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Delivery { hook, id, body });
    StatusCode::NO_CONTENT
}
