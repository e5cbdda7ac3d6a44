//! GraphQL responses over HTTP as the GraphQL-over-HTTP specification has
//! them: the media type the client accepts (`application/json` unless it
//! asks for `application/graphql-response+json`), and with the latter a 4xx
//! and no `data` for a request that failed before it ran (it did not parse,
//! did not validate, or its variables did not coerce).

use async_graphql::{BatchResponse, Response as GqlResponse};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::http_error;

/// The legacy type, and what a client without an `Accept` gets.
pub const JSON: &str = "application/json";
/// The specification's own type, with its status codes.
pub const GRAPHQL_RESPONSE_JSON: &str = "application/graphql-response+json";

/// The media type a response is sent as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Media {
    Json,
    GraphqlResponseJson,
}

impl Media {
    fn content_type(self) -> &'static str {
        match self {
            Media::Json => "application/json; charset=utf-8",
            Media::GraphqlResponseJson => "application/graphql-response+json; charset=utf-8",
        }
    }
}

/// The media type to answer with, from the `Accept` header: the supported
/// one the client weighs highest (the first listed on a tie); a missing
/// header or a wildcard gets `application/json`. `Err` is a 406 for a
/// client that accepts neither.
#[allow(clippy::result_large_err)]
pub fn negotiate(headers: &HeaderMap) -> Result<Media, Response> {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if accept.is_empty() {
        return Ok(Media::Json);
    }
    let mut best: Option<(f32, Media)> = None;
    for range in accept.iter().flat_map(|v| v.split(',')) {
        let mut parts = range.split(';');
        let kind = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let media = match kind.as_str() {
            GRAPHQL_RESPONSE_JSON => Media::GraphqlResponseJson,
            JSON | "*/*" | "application/*" => Media::Json,
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(weight, _)| q > weight) {
            best = Some((q, media));
        }
    }
    best.map(|(_, media)| media).ok_or_else(|| {
        http_error(
            StatusCode::NOT_ACCEPTABLE,
            "NOT_ACCEPTABLE",
            format!("this endpoint answers {JSON} or {GRAPHQL_RESPONSE_JSON}; the Accept header allows neither"),
        )
    })
}

/// Whether a response is a request error: no data, and only errors that
/// belong to no field (parse, validation, variables).
pub(super) fn failed_before_running(response: &GqlResponse) -> bool {
    !response.errors.is_empty()
        && matches!(response.data, async_graphql::Value::Null)
        && response.errors.iter().all(|e| e.path.is_empty())
}

/// One GraphQL response as `media`.
pub fn single(media: Media, response: GqlResponse) -> Response {
    let retry_after = crate::api::rate_limit::refused_for(&response);
    let request_error = retry_after.is_some()
        || (media == Media::GraphqlResponseJson && failed_before_running(&response));
    let status = if retry_after.is_some() {
        StatusCode::TOO_MANY_REQUESTS
    } else if request_error {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut headers = HeaderMap::new();
    if let Some(cache) = response
        .cache_control
        .value()
        .and_then(|v| HeaderValue::from_str(&v).ok())
    {
        headers.insert(header::CACHE_CONTROL, cache);
    }
    headers.extend(response.http_headers.clone());
    if let Some(after) = retry_after {
        headers
            .entry(header::RETRY_AFTER)
            .or_insert_with(|| HeaderValue::from(after));
    }
    let mut body = match serde_json::to_value(&response) {
        Ok(body) => body,
        Err(err) => return encoding_failed(err),
    };
    if request_error {
        // The request never ran: there is no `data` at all, not a null one.
        if let Some(body) = body.as_object_mut() {
            body.remove("data");
        }
    }
    typed(media, status, headers, &body)
}

/// A batch's responses as `media`: 200, each carrying its errors, unless
/// the rate limit refused every one of them (429, as a single refused
/// request). Where the caller stands goes in the headers as for one request:
/// `RateLimit-Policy` and `RateLimit` after the batch's last charge, and
/// `Retry-After` (the longest wait) when any item was refused.
pub fn batch(media: Media, response: BatchResponse) -> Response {
    let all = match response {
        BatchResponse::Single(one) => return single(media, one),
        BatchResponse::Batch(all) => all,
    };
    let mut headers = HeaderMap::new();
    let mut retry_after: Option<u64> = None;
    let mut refused = 0;
    for one in &all {
        // Only the rate limit's own headers: what else an item set belongs
        // to it alone.
        for (name, value) in &one.http_headers {
            if crate::api::rate_limit::STANDING_HEADERS.contains(&name.as_str()) {
                headers.insert(name.clone(), value.clone());
            }
        }
        if let Some(after) = crate::api::rate_limit::refused_for(one) {
            refused += 1;
            retry_after = retry_after.max(Some(after));
        }
    }
    if let Some(after) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(after));
    }
    let status = if refused > 0 && refused == all.len() {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    match serde_json::to_value(&all) {
        Ok(body) => typed(media, status, headers, &body),
        Err(err) => encoding_failed(err),
    }
}

fn typed(
    media: Media,
    status: StatusCode,
    mut headers: HeaderMap,
    body: &serde_json::Value,
) -> Response {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.content_type()),
    );
    (status, headers, body.to_string()).into_response()
}

fn encoding_failed(err: serde_json::Error) -> Response {
    tracing::error!(cause = %err, "cannot encode a GraphQL response");
    http_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "INTERNAL_SERVER_ERROR",
        "the response could not be encoded",
    )
}
