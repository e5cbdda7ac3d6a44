//! Which web origins may call the server, and the CORS headers that tell a
//! browser so. One rule for every path and transport: `/graphql` over HTTP
//! (JSON, event streams, multipart) and `/graphql/ws` agree on who may call.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{http_error, HttpState};

/// The methods the API takes.
const METHODS: &str = "GET, POST, OPTIONS";
/// The request headers the transports read: the body's type, what the
/// client accepts (an event stream, multipart, JSON), the token, and dev
/// mode's identity.
const HEADERS: &str = "content-type, accept, authorization, x-riverfeed-tenant, \
                       x-riverfeed-user, x-riverfeed-roles";
/// Response headers a page may read beyond the safelisted ones: how long a
/// rate-limited caller waits.
const EXPOSE: &str = "retry-after";
/// How long a browser may keep a preflight's answer, in seconds (Chromium
/// keeps one two hours at most).
const MAX_AGE: &str = "7200";

/// The web origins allowed to call, besides the server's own (a page the
/// server itself served, such as GraphiQL and the demo).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origins {
    /// `--cors-origins '*'`: any origin, without credentials.
    Any,
    /// `--cors-origins` with a list: these exact origins (`scheme://host[:port]`),
    /// credentials allowed.
    Listed(Vec<String>),
    /// Dev mode's default: pages on this machine (`localhost`, `127.0.0.1`,
    /// `[::1]`, any port). Not `null`, the origin of a local file but also of
    /// a sandboxed frame or a `data:` page that any site can open.
    Loopback,
    /// Dev mode with `--cors-origins` listing origins: pages on this machine
    /// and these, credentials allowed.
    LoopbackAnd(Vec<String>),
    /// The default with tokens: no other origin.
    SameOnly,
}

impl Origins {
    /// Parses `--cors-origins`: `*`, or origins separated by commas.
    pub fn parse(list: &str) -> anyhow::Result<Self> {
        let items: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        anyhow::ensure!(
            !items.is_empty(),
            "--cors-origins is empty: give `*` or origins such as https://app.example.com"
        );
        if items.contains(&"*") {
            anyhow::ensure!(
                items.len() == 1,
                "--cors-origins takes `*` alone or a list of origins, not both"
            );
            return Ok(Self::Any);
        }
        let mut origins = Vec::with_capacity(items.len());
        for item in items {
            let origin = item.trim_end_matches('/').to_ascii_lowercase();
            let valid = origin.split_once("://").is_some_and(|(scheme, authority)| {
                matches!(scheme, "http" | "https")
                    && !authority.is_empty()
                    && !authority.contains(['/', '?', '#', '@', ' '])
            });
            anyhow::ensure!(
                valid,
                "--cors-origins: `{item}` is not an origin; write scheme://host[:port], \
                 such as https://app.example.com or http://localhost:5173"
            );
            origins.push(origin);
        }
        Ok(Self::Listed(origins))
    }

    /// The origins allowed in dev mode: the loopback ones stay allowed
    /// beside those listed, as a frontend on this machine keeps working
    /// when one on another is added.
    pub fn in_dev_mode(self) -> Self {
        match self {
            Self::Listed(list) => Self::LoopbackAnd(list),
            Self::SameOnly => Self::Loopback,
            other => other,
        }
    }

    /// Whether a page of `origin` may call, when it is not the server's own.
    fn allows(&self, origin: &str) -> bool {
        let listed = |list: &[String]| list.iter().any(|o| o.eq_ignore_ascii_case(origin));
        let loopback = || {
            origin.split_once("://").is_some_and(|(scheme, authority)| {
                matches!(scheme, "http" | "https") && super::is_loopback(authority)
            })
        };
        match self {
            Self::Any => true,
            Self::Listed(list) => listed(list),
            Self::Loopback => loopback(),
            Self::LoopbackAnd(list) => loopback() || listed(list),
            Self::SameOnly => false,
        }
    }
}

/// The request's origin, when it names one other than the server's own
/// (whose authority is the `Host` the request was sent to).
fn foreign_origin(headers: &HeaderMap) -> Option<&str> {
    let origin = headers.get(header::ORIGIN)?.to_str().ok()?;
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let own = origin
        .split_once("://")
        .is_some_and(|(_, authority)| host.is_some_and(|h| h.eq_ignore_ascii_case(authority)));
    (!own).then_some(origin)
}

/// Answers preflights, refuses requests from origins not allowed, and tells
/// the browser which origins may read the others' responses. A request
/// without an `Origin` (curl, a server, a native client) is not a browser's
/// and passes.
pub async fn guard(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let origins: &Origins = &state.origins;
    let Some(origin) = foreign_origin(request.headers()).map(str::to_owned) else {
        let mut response = next.run(request).await;
        vary(origins, response.headers_mut());
        return response;
    };
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if !origins.allows(&origin) {
        let mut refused = http_error(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            format!(
                "pages of {origin} may not call this server; allow the origin with --cors-origins"
            ),
        );
        vary(origins, refused.headers_mut());
        return refused;
    }
    let mut response = if preflight {
        let mut answer = StatusCode::NO_CONTENT.into_response();
        let headers = answer.headers_mut();
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(METHODS),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(HEADERS),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(MAX_AGE),
        );
        answer
    } else {
        let mut answer = next.run(request).await;
        answer.headers_mut().insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSE),
        );
        answer
    };
    let headers = response.headers_mut();
    match origins {
        Origins::Any => {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
        }
        _ => {
            if let Ok(value) = HeaderValue::from_str(&origin) {
                headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
            }
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }
    vary(origins, headers);
    response
}

/// Unless any origin is answered alike, the answer depends on the `Origin`:
/// a cache must keep one per origin.
fn vary(origins: &Origins, headers: &mut HeaderMap) {
    if *origins != Origins::Any {
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
}

#[cfg(test)]
mod tests {
    use super::Origins;

    #[test]
    fn origins_are_parsed_exactly_or_refused_with_the_reason() {
        assert_eq!(Origins::parse(" * ").unwrap(), Origins::Any);
        assert_eq!(
            Origins::parse("https://App.example.com/, http://localhost:5173").unwrap(),
            Origins::Listed(vec![
                "https://app.example.com".into(),
                "http://localhost:5173".into()
            ])
        );
        for (list, says) in [
            (" , ", "is empty"),
            ("*,https://app.example.com", "`*` alone"),
            ("app.example.com", "not an origin"),
            ("https://app.example.com/feed", "not an origin"),
            ("ftp://app.example.com", "not an origin"),
            ("https://user@app.example.com", "not an origin"),
        ] {
            let err = Origins::parse(list).expect_err(list).to_string();
            assert!(err.contains(says), "{list}: {err}");
        }
    }

    #[test]
    fn dev_mode_allows_pages_on_this_machine_only() {
        for origin in [
            "http://localhost:5173",
            "http://127.0.0.1:3000",
            "https://[::1]:8443",
            "http://localhost",
        ] {
            assert!(Origins::Loopback.allows(origin), "{origin}");
        }
        for origin in [
            "null",
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "file://localhost",
        ] {
            assert!(!Origins::Loopback.allows(origin), "{origin}");
        }
        assert!(!Origins::SameOnly.allows("http://localhost:5173"));
        let listed = Origins::parse("https://app.example.com").unwrap();
        assert!(listed.allows("https://APP.example.com"));
        assert!(!listed.allows("https://app.example.com:8443"));
        assert!(!listed.allows("http://app.example.com"));
        assert!(!listed.allows("http://localhost:5173"));
    }

    #[test]
    fn dev_mode_adds_listed_origins_to_the_loopback_ones() {
        let dev = Origins::parse("https://app.example.com")
            .unwrap()
            .in_dev_mode();
        for origin in ["https://app.example.com", "http://localhost:5173"] {
            assert!(dev.allows(origin), "{origin}");
        }
        assert!(!dev.allows("https://evil.example"));
        assert_eq!(Origins::parse("*").unwrap().in_dev_mode(), Origins::Any);
    }
}
