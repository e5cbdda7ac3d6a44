//! Subscriptions over plain HTTP, for clients that hold no websocket:
//!
//! - **Server-sent events**, the graphql-sse protocol in its
//!   distinct-connections mode: a request that accepts `text/event-stream`
//!   gets one stream of `next` events and a `complete` one. Errors of the
//!   request itself (it did not parse or validate) come in the stream, as
//!   graphql-sse's clients expect.
//! - **Multipart**, Apollo's multipart HTTP subscriptions: a request that
//!   accepts `multipart/mixed;subscriptionSpec=1.0` gets `multipart/mixed`
//!   parts of `{"payload": result}`, a `{}` heartbeat every few seconds, and
//!   the closing boundary at the end.
//!
//! Both hold one of the server's connection places while open, carry the
//! identity of the request's headers, pass the same results as the
//! websocket (`LAGGED` included; `feedEvents(after:)` resumes) and end when
//! the server shuts down. A request the rate limit refuses is answered
//! `429` before any stream starts.

use std::time::Duration;

use async_graphql::{Request as GqlRequest, Response as GqlResponse};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tokio::sync::oneshot;

use super::{ConnectionSlot, HttpState};
use crate::api::live::Splice;
use crate::api::rate_limit::{self, Admission, Standing};

/// How often an idle event stream sends a comment line.
const SSE_KEEPALIVE: Duration = Duration::from_secs(12);
/// How often an idle multipart response sends a `{}` part.
const MULTIPART_HEARTBEAT: Duration = Duration::from_secs(5);

/// The streaming transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streaming {
    EventStream,
    Multipart,
}

/// The streaming transport the `Accept` header prefers, if any: an event
/// stream, or multipart with Apollo's subscription spec, weighed against
/// the JSON types by `q` and then by order. (urql lists `text/event-stream`
/// after the JSON types for its queries, and wants JSON; graphql-sse asks
/// for the stream alone.)
pub fn requested(headers: &HeaderMap) -> Option<Streaming> {
    // The best (q, -position) of each kind.
    let mut json: Option<(f32, isize)> = None;
    let mut streams: Option<((f32, isize), Streaming)> = None;
    let ranges = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','));
    for (position, range) in ranges.enumerate() {
        let mut parts = range.split(';').map(str::trim);
        let kind = parts.next().unwrap_or_default().to_ascii_lowercase();
        let params: Vec<String> = parts.map(str::to_ascii_lowercase).collect();
        let q = params
            .iter()
            .find_map(|p| p.strip_prefix("q=")?.parse::<f32>().ok())
            .unwrap_or(1.0);
        if q <= 0.0 {
            continue;
        }
        let rank = (q, -(position as isize));
        let better = |best: Option<(f32, isize)>| best.is_none_or(|b| rank > b);
        match kind.as_str() {
            "text/event-stream" if better(streams.map(|(r, _)| r)) => {
                streams = Some((rank, Streaming::EventStream));
            }
            "multipart/mixed"
                if params.iter().any(|p| p.starts_with("subscriptionspec="))
                    && better(streams.map(|(r, _)| r)) =>
            {
                streams = Some((rank, Streaming::Multipart));
            }
            "application/json" | "application/graphql-response+json" | "*/*" | "application/*"
                if better(json) =>
            {
                json = Some(rank);
            }
            _ => {}
        }
    }
    let (rank, streaming) = streams?;
    json.is_none_or(|json| rank > json).then_some(streaming)
}

/// Runs `request` and answers with its results as `streaming`.
pub async fn respond(state: &HttpState, streaming: Streaming, request: GqlRequest) -> Response {
    let slot = match ConnectionSlot::for_request(state) {
        Ok(slot) => slot,
        Err(full) => return full,
    };
    let (admitted, request) = if state.rate_limited {
        let (sender, receiver) = oneshot::channel();
        (Some(receiver), request.data(Admission::new(sender)))
    } else {
        (None, request)
    };
    let splice = Splice::default();
    let mut results = state.schema.execute_stream(request.data(splice.clone()));
    // Before the status goes out: was the operation admitted? The rate limit
    // says so as it charges; a request that fails sooner answers at once.
    let mut first: Option<GqlResponse> = None;
    let mut standing: Option<Standing> = None;
    if let Some(mut admitted) = admitted {
        tokio::select! {
            response = results.next() => first = response,
            outcome = &mut admitted => standing = outcome.ok().flatten(),
        }
        if first.is_none() && standing.is_some_and(|s| s.retry_after.is_some()) {
            first = results.next().await;
        }
        if first.as_ref().and_then(rate_limit::refused_for).is_some() {
            if let Some(refused) = first {
                return super::respond::single(super::respond::Media::Json, refused);
            }
        }
    }
    let results: BoxStream<'static, GqlResponse> = match first {
        Some(first) => futures_util::stream::once(async move { first })
            .chain(results)
            .boxed(),
        None => results,
    };
    // Each result with its serialised form when it was rendered from a
    // template (see `crate::api::live`), taken as the result comes.
    let results = results
        .take_until(state.shutdown.clone().cancelled_owned())
        .map(move |response| Event {
            spliced: splice.take(),
            response,
        });
    let (content_type, body) = match streaming {
        Streaming::EventStream => (
            "text/event-stream; charset=utf-8",
            event_stream(results.boxed(), slot),
        ),
        Streaming::Multipart => (
            "multipart/mixed;boundary=\"graphql\";subscriptionSpec=\"1.0\"",
            multipart(results.boxed(), slot),
        ),
    };
    let mut response = (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body.map(Ok::<_, std::convert::Infallible>)),
    )
        .into_response();
    // A proxy must pass each event on as it comes.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(standing) = standing {
        for (name, value) in standing.headers() {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// A result of the operation, and its serialised form when it has one.
struct Event {
    response: GqlResponse,
    spliced: Option<String>,
}

impl Event {
    /// The result as JSON.
    fn json(&self) -> String {
        match &self.spliced {
            Some(json) => json.clone(),
            None => match serde_json::to_string(&self.response) {
                Ok(json) => json,
                Err(err) => {
                    tracing::error!(cause = %err, "cannot encode a GraphQL response");
                    String::new()
                }
            },
        }
    }
}

/// What comes next on a stream: a result, a beat of an idle one, or the end.
enum Step {
    Result(Box<Event>),
    Beat,
    End,
}

/// Results interleaved with beats every `every` of silence, then `End`.
fn with_beats(results: BoxStream<'static, Event>, every: Duration) -> BoxStream<'static, Step> {
    futures_util::stream::unfold(Some(results), move |results| async move {
        let mut results = results?;
        tokio::select! {
            next = results.next() => match next {
                Some(response) => Some((Step::Result(Box::new(response)), Some(results))),
                None => Some((Step::End, None)),
            },
            _ = tokio::time::sleep(every) => Some((Step::Beat, Some(results))),
        }
    })
    .boxed()
}

fn event_stream(
    results: BoxStream<'static, Event>,
    slot: ConnectionSlot,
) -> BoxStream<'static, Bytes> {
    with_beats(results, SSE_KEEPALIVE)
        .map(move |step| {
            // The slot is held for as long as the body streams.
            let _held = &slot;
            Bytes::from(match step {
                Step::Result(event) => match event.json() {
                    json if json.is_empty() => json,
                    json => format!("event: next\ndata: {json}\n\n"),
                },
                Step::Beat => ":\n\n".to_owned(),
                Step::End => "event: complete\ndata:\n\n".to_owned(),
            })
        })
        .boxed()
}

fn multipart(
    results: BoxStream<'static, Event>,
    slot: ConnectionSlot,
) -> BoxStream<'static, Bytes> {
    const PART: &str = "\r\n--graphql\r\ncontent-type: application/json; charset=utf-8\r\n\r\n";
    with_beats(results, MULTIPART_HEARTBEAT)
        .map(move |step| {
            let _held = &slot;
            Bytes::from(match step {
                Step::Result(event) => match &event.spliced {
                    Some(json) => format!("{PART}{{\"payload\":{json}}}"),
                    None => {
                        let payload = serde_json::json!({ "payload": event.response });
                        format!("{PART}{payload}")
                    }
                },
                Step::Beat => format!("{PART}{{}}"),
                Step::End => "\r\n--graphql--\r\n".to_owned(),
            })
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn streams_are_asked_for_by_accept() {
        assert_eq!(
            requested(&accept("text/event-stream")),
            Some(Streaming::EventStream)
        );
        assert_eq!(
            requested(&accept(
                "multipart/mixed;boundary=\"graphql\";subscriptionSpec=1.0,application/json"
            )),
            Some(Streaming::Multipart)
        );
        // @defer's multipart is not a subscription stream.
        assert_eq!(
            requested(&accept(
                "multipart/mixed;deferSpec=20220824, application/json"
            )),
            None
        );
        assert_eq!(
            requested(&accept(
                "application/graphql-response+json, application/json;q=0.9"
            )),
            None
        );
        assert_eq!(
            requested(&accept("text/event-stream;q=0, application/json")),
            None
        );
        assert_eq!(requested(&HeaderMap::new()), None);
        // urql's queries list the stream after JSON: JSON wins the tie.
        assert_eq!(
            requested(&accept(
                "application/graphql-response+json, application/json, text/event-stream, multipart/mixed"
            )),
            None
        );
        assert_eq!(
            requested(&accept("application/json;q=0.9, text/event-stream;q=0.5")),
            None
        );
        assert_eq!(
            requested(&accept("text/event-stream, application/json;q=0.9")),
            Some(Streaming::EventStream)
        );
        // Apollo's subscriptions put multipart first.
        assert_eq!(
            requested(&accept(
                "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9"
            )),
            Some(Streaming::Multipart)
        );
    }
}
