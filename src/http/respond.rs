//! GraphQL responses over HTTP as the GraphQL-over-HTTP specification has
//! them: the media type the client accepts (`application/json` unless it
//! asks for `application/graphql-response+json`), and with the latter a 4xx
//! and no `data` for a request that failed before it ran (it did not parse,
//! did not validate, or its variables did not coerce).

use async_graphql::Response as GqlResponse;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::http_error;
use crate::api::error::{STORAGE_RETRY_AFTER, STORAGE_UNAVAILABLE};
use crate::api::plan::Filled;

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

/// Whether any of a response's errors says the store could not take it.
fn storage_refused(response: &GqlResponse) -> bool {
    response.errors.iter().any(|error| {
        error.extensions.as_ref().is_some_and(|extensions| {
            matches!(
                extensions.get("code"),
                Some(async_graphql::Value::String(code)) if code == STORAGE_UNAVAILABLE
            )
        })
    })
}

/// Whether a request failed as a whole because the store could not take
/// it: an error says so, and no field was answered (`data` is null, or
/// every field of it is).
fn failed_for_storage(response: &GqlResponse) -> bool {
    use async_graphql::Value;
    storage_refused(response)
        && match &response.data {
            Value::Null => true,
            Value::Object(fields) => fields.values().all(|v| *v == Value::Null),
            _ => false,
        }
}

/// Whether a request failed as a whole for the store, its `data` written
/// by a plan when `planned` holds it.
fn failed_whole(response: &GqlResponse, planned: Option<&Filled>) -> bool {
    match planned {
        Some(planned) => storage_refused(response) && !planned.answered,
        None => failed_for_storage(response),
    }
}

/// One GraphQL response as `media`. A request the store could not take
/// (`STORAGE_UNAVAILABLE`) is told when to try again (`Retry-After`), and
/// answered 503 when nothing of it was answered.
pub fn single(media: Media, response: GqlResponse) -> Response {
    answer(media, response, None)
}

/// One GraphQL response as `media`, as [`single`]; its `data` written by a
/// plan when `planned` holds it.
pub fn answer(media: Media, response: GqlResponse, planned: Option<Filled>) -> Response {
    let rate_limited = crate::api::rate_limit::refused_for(&response);
    let retry_after =
        rate_limited.or_else(|| storage_refused(&response).then_some(STORAGE_RETRY_AFTER));
    let request_error = rate_limited.is_some()
        || (media == Media::GraphqlResponseJson && failed_before_running(&response));
    let status = if rate_limited.is_some() {
        StatusCode::TOO_MANY_REQUESTS
    } else if failed_whole(&response, planned.as_ref()) {
        StatusCode::SERVICE_UNAVAILABLE
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
    if let Some(planned) = planned {
        return match with_data(&response, &planned.data) {
            Ok(body) => typed_bytes(media, status, headers, body),
            Err(err) => encoding_failed(err),
        };
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
/// request), or every one failed as a whole for the store (503). Where the
/// caller stands goes in the headers as for one request:
/// `RateLimit-Policy` and `RateLimit` after the batch's last charge, and
/// `Retry-After` (the longest wait) when any item was refused by the rate
/// limit or the store.
pub fn batch(media: Media, all: Vec<(GqlResponse, Option<Filled>)>) -> Response {
    let mut headers = HeaderMap::new();
    let mut retry_after: Option<u64> = None;
    let mut refused = 0;
    let mut storage_failed = 0;
    for (one, planned) in &all {
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
        } else if storage_refused(one) {
            retry_after = retry_after.max(Some(STORAGE_RETRY_AFTER));
            storage_failed += usize::from(failed_whole(one, planned.as_ref()));
        }
    }
    if let Some(after) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(after));
    }
    let status = if refused > 0 && refused == all.len() {
        StatusCode::TOO_MANY_REQUESTS
    } else if storage_failed > 0 && storage_failed == all.len() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut body = vec![b'['];
    for (i, (one, planned)) in all.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let item = match planned {
            Some(planned) => with_data(one, &planned.data),
            None => serde_json::to_vec(one),
        };
        match item {
            Ok(item) => body.extend_from_slice(&item),
            Err(err) => return encoding_failed(err),
        }
    }
    body.push(b']');
    typed_bytes(media, status, headers, body)
}

/// A response's JSON with `data` as written by a plan: the response (whose
/// own `data` is null) serialised, its leading `{"data":null` replaced.
fn with_data(response: &GqlResponse, data: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    const NULL_DATA: &[u8] = b"{\"data\":null";
    let rest = serde_json::to_vec(response)?;
    let tail = rest.strip_prefix(NULL_DATA).ok_or_else(|| {
        <serde_json::Error as serde::ser::Error>::custom("a planned response carries data")
    })?;
    let mut body = Vec::with_capacity(NULL_DATA.len() + data.len() + tail.len());
    body.extend_from_slice(b"{\"data\":");
    body.extend_from_slice(data);
    body.extend_from_slice(tail);
    Ok(body)
}

fn typed_bytes(
    media: Media,
    status: StatusCode,
    mut headers: HeaderMap,
    body: Vec<u8>,
) -> Response {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.content_type()),
    );
    (status, headers, body).into_response()
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

#[cfg(test)]
mod tests {
    use async_graphql::{Name, ServerError, Value};

    use super::*;
    use crate::api::error::coded_server_error;

    fn refused_at(field: &str) -> ServerError {
        let mut err = coded_server_error(STORAGE_UNAVAILABLE, "the store cannot take this");
        err.path = vec![async_graphql::PathSegment::Field(field.to_owned())];
        err
    }

    fn response(fields: &[(&str, Value)], errors: Vec<ServerError>) -> GqlResponse {
        let data = fields
            .iter()
            .map(|(name, value)| (Name::new(name), value.clone()))
            .collect();
        let mut response = GqlResponse::new(Value::Object(data));
        response.errors = errors;
        response
    }

    fn retry_after(answer: &Response) -> Option<&str> {
        answer
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
    }

    #[test]
    fn a_request_the_store_refused_whole_is_503_and_a_partial_one_200() {
        let whole = response(&[("a", Value::Null)], vec![refused_at("a")]);
        let answer = single(Media::Json, whole);
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after(&answer), Some("5"));

        let partial = response(
            &[("a", Value::Null), ("b", Value::from(1))],
            vec![refused_at("a")],
        );
        let answer = single(Media::Json, partial);
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(retry_after(&answer), Some("5"));

        let fine = response(&[("a", Value::from(1))], vec![]);
        let answer = single(Media::Json, fine);
        assert_eq!(
            (answer.status(), retry_after(&answer)),
            (StatusCode::OK, None)
        );
    }

    #[test]
    fn a_batch_is_503_only_when_the_store_refused_every_operation() {
        let refused = || response(&[("a", Value::Null)], vec![refused_at("a")]);
        let answered = || response(&[("a", Value::from(1))], vec![]);
        let answer = batch(Media::Json, vec![(refused(), None), (refused(), None)]);
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after(&answer), Some("5"));
        let answer = batch(Media::Json, vec![(refused(), None), (answered(), None)]);
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(retry_after(&answer), Some("5"));
    }
}
