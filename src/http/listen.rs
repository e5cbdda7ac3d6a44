//! Serving HTTP connections, each bounded in time and all of them in number,
//! so a client that sends slowly or not at all cannot hold the server's
//! connections (slowloris):
//!
//! - a request's headers must arrive within `--header-timeout` of the
//!   connection opening or, on a kept-alive connection, of its first byte;
//! - its whole body within `--body-timeout` of its headers (else the handler
//!   reading it answers 408 `REQUEST_TIMEOUT`);
//! - a kept-alive connection with no request for `--idle-timeout` is closed;
//! - beyond `--max-http-connections` open in total, or
//!   `--max-http-connections-per-address` from one client address, a new
//!   connection is closed at accept (after a best-effort 503).
//!
//! A connection upgraded to a websocket keeps its place until it closes;
//! the websocket's own timers (`--ws-init-timeout`, pings) bound it then.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::Router;
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;
use tracing::{debug, warn};

use super::gate::{Gate, Ticket};

/// How long and how many: see the module's documentation.
#[derive(Clone, Copy, Debug)]
pub struct ListenLimits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Duration,
    /// Connections open at once; `None` means room for every live and
    /// pending connection plus [`REQUEST_ROOM`] (see [`ListenLimits::total`]).
    pub max_connections: Option<usize>,
    pub max_connections_per_address: usize,
}

impl Default for ListenLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
            max_connections_per_address: 256,
        }
    }
}

/// Connections kept for plain requests beyond the live and pending ones,
/// when `--max-http-connections` is not given.
pub const REQUEST_ROOM: usize = 1_024;

impl ListenLimits {
    /// Connections open at once in total: a live connection (websocket,
    /// event stream) holds its HTTP connection, so the default leaves room
    /// for all of them and for plain requests beside.
    pub fn total(&self, ws: &super::WsLimits) -> usize {
        self.max_connections
            .unwrap_or(ws.max_connections + ws.max_pending + REQUEST_ROOM)
    }
}

/// Serves `router` on `listener` until `shutdown`; then stops accepting,
/// lets requests in flight finish and returns when every connection has
/// closed (upgraded websockets end on `shutdown` themselves).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ListenLimits,
    total: usize,
    shutdown: CancellationToken,
) {
    let gate = Gate::new(total, limits.max_connections_per_address);
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                accept_failed(err, &shutdown).await;
                continue;
            }
        };
        let ticket = match gate.admit(peer.ip()) {
            Ok(ticket) => ticket,
            Err(full) => {
                debug!(%peer, ?full, "connection refused: too many open");
                refuse(stream);
                continue;
            }
        };
        let task = connection(
            stream,
            peer,
            ticket,
            router.clone(),
            limits,
            shutdown.clone(),
        );
        connections.spawn(task);
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// An accept that failed: a connection reset before it was accepted is
/// nothing; anything else (out of file descriptors) is logged and retried
/// after a pause rather than in a hot loop.
async fn accept_failed(err: std::io::Error, shutdown: &CancellationToken) {
    use std::io::ErrorKind::*;
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused
    ) {
        return;
    }
    warn!(%err, "cannot accept a connection");
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        _ = shutdown.cancelled() => {}
    }
}

/// Tells a refused client why, if its socket takes it at once, and closes.
fn refuse(stream: TcpStream) {
    const BODY: &str = r#"{"errors":[{"message":"too many connections are open; try again later","extensions":{"code":"TOO_MANY_CONNECTIONS"}}]}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// Serves one connection until it closes, times out, or the server stops.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    router: Router,
    limits: ListenLimits,
    shutdown: CancellationToken,
) {
    let watch = Arc::new(Watch::new());
    let io = TokioIo::new(Watched {
        stream,
        watch: watch.clone(),
        _place: ticket,
    });
    let service = hyper::service::service_fn({
        let watch = watch.clone();
        move |request: Request<Incoming>| {
            let busy = Busy::begin(&watch);
            let deadline = Instant::now() + limits.body_timeout;
            let mut request = request.map(|body| Body::new(Timed::new(body, deadline)));
            request.extensions_mut().insert(ConnectInfo(peer));
            let mut router = router.clone();
            async move {
                let response = router.call(request).await?;
                Ok::<_, Infallible>(response.map(|body| Body::new(Guarded { body, _busy: busy })))
            }
        }
    });
    // Timers are this module's (see `Watch`), so hyper gets none: its own
    // header timer would also run while a kept-alive connection idles.
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let deadline = watch.deadline(&limits);
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(err) = served {
                    debug!(%peer, %err, "connection ended with an error");
                }
                return;
            }
            _ = watch.changed.notified() => {}
            _ = sleep_until(deadline) => {
                if watch.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                    // Dropping the connection closes its socket.
                    debug!(%peer, "connection closed: header or idle timeout");
                    return;
                }
            }
            _ = shutdown.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a connection is doing, for its timers.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// No request in flight since `since`; `reading` once a byte of the
    /// next request came (a new connection waits for its first request's
    /// headers from the start).
    Waiting { since: Instant, reading: bool },
    /// Requests in flight: from their headers to the end of their response.
    Busy(usize),
}

struct Watch {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Watch {
    fn new() -> Self {
        Self {
            phase: Mutex::new(Phase::Waiting {
                since: Instant::now(),
                reading: true,
            }),
            changed: Notify::new(),
        }
    }

    fn update(&self, change: impl FnOnce(Phase) -> Option<Phase>) {
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(next) = change(*phase) {
            *phase = next;
            self.changed.notify_one();
        }
    }

    /// Bytes arrived.
    fn read(&self) {
        self.update(|phase| match phase {
            Phase::Waiting { reading: false, .. } => Some(Phase::Waiting {
                since: Instant::now(),
                reading: true,
            }),
            _ => None,
        });
    }

    /// When the connection is to close unless something happens first.
    fn deadline(&self, limits: &ListenLimits) -> Option<Instant> {
        match *self.phase.lock().unwrap_or_else(|e| e.into_inner()) {
            Phase::Waiting {
                since,
                reading: true,
            } => Some(since + limits.header_timeout),
            Phase::Waiting {
                since,
                reading: false,
            } => Some(since + limits.idle_timeout),
            Phase::Busy(_) => None,
        }
    }
}

/// A request in flight; the connection waits again when the last one's
/// response is done (or dropped).
struct Busy(Arc<Watch>);

impl Busy {
    fn begin(watch: &Arc<Watch>) -> Self {
        watch.update(|phase| {
            Some(match phase {
                Phase::Busy(n) => Phase::Busy(n + 1),
                Phase::Waiting { .. } => Phase::Busy(1),
            })
        });
        Self(watch.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.update(|phase| {
            Some(match phase {
                Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
                _ => Phase::Waiting {
                    since: Instant::now(),
                    reading: false,
                },
            })
        });
    }
}

/// The socket, telling its connection's [`Watch`] when bytes arrive, and
/// holding the connection's place among the open ones (an upgraded
/// websocket keeps it until it closes).
struct Watched {
    stream: TcpStream,
    watch: Arc<Watch>,
    _place: Ticket,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.watch.read();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A request body that must arrive whole by a deadline.
struct Timed {
    body: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Timed {
    fn new(body: Incoming, deadline: Instant) -> Self {
        Self {
            body,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
        }
    }
}

/// A request body did not arrive within `--body-timeout`.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
pub struct BodyTimeout;

/// Whether reading a body failed because it did not arrive in time.
pub fn timed_out(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if err.is::<BodyTimeout>() {
            return true;
        }
        cause = err.source();
    }
    false
}

impl hyper::body::Body for Timed {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        // The deadline first: a body that trickles is always ready with a
        // little more.
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BodyTimeout.into())));
        }
        Pin::new(&mut self.body)
            .poll_frame(cx)
            .map_err(axum::BoxError::from)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that keeps its request in flight until it is done.
struct Guarded {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
