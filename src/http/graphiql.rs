//! GraphiQL at `/graphiql`, served whole from the binary: the page, its
//! identity bar, and the GraphiQL and React bundles `build.rs` brings in from
//! their pinned npm packages. It loads nothing from anywhere else, so it
//! works with no internet, and its policy says so to the browser.

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::{SecureRandom as _, SystemRandom};

use crate::descriptor::Catalog;

/// One bundle of a pinned package.
struct Bundle {
    /// What the page calls it (`{{graphiql.js}}`).
    key: &'static str,
    /// The name it is served under, with its version: it never changes.
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/graphiql_bundles.rs"));

/// The page's own files (ours, so they may change from one build to the next).
const OWN: &[(&str, &str, &str)] = &[
    (
        "page.js",
        "text/javascript; charset=utf-8",
        include_str!("graphiql/page.js"),
    ),
    (
        "page.css",
        "text/css; charset=utf-8",
        include_str!("graphiql/page.css"),
    ),
];

/// Only this server: scripts and styles from its files, fonts and images
/// from them or inlined in GraphiQL's stylesheet (`data:`), requests to it
/// (the websocket included). GraphiQL's dialogs add a `<style>` element
/// (to stop the page scrolling behind them): it carries the page's nonce
/// (`{nonce}`, new for every response), which `page.js` hands to it.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-{nonce}'; \
     font-src 'self' data:; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The page, with the bundles' versioned names filled in.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    BUNDLES.iter().fold(
        include_str!("graphiql/index.html").to_owned(),
        |page, bundle| page.replace(&format!("{{{{{}}}}}", bundle.key), bundle.name),
    )
});

/// The query the page opens with: who the viewer is and their feed, each
/// action's descriptor selected for every type `catalog` serves.
pub fn default_query(catalog: &Catalog) -> String {
    let fragments: String = catalog
        .selection()
        .lines()
        .map(|line| format!("\n            {line}"))
        .collect();
    format!(
        "# Who you are (picked above) and your feed. Ctrl-Enter runs it.
{{
  viewer {{ userId name }}
  feed(first: 10) {{
    edges {{
      node {{
        relevancy
        reason {{ kind actorId }}
        action {{
          actor {{ userId name }}
          descriptor {{
            __typename{fragments}
          }}
        }}
      }}
    }}
    pageInfo {{ hasNextPage endCursor }}
  }}
}}
"
    )
}

/// `text` as an HTML attribute's value.
pub(super) fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', "&#10;")
}

pub async fn page(State(state): State<super::HttpState>) -> Response {
    let mut bytes = [0u8; 16];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        return super::http_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_SERVER_ERROR",
            "no randomness for the page's nonce",
        );
    }
    let nonce = URL_SAFE_NO_PAD.encode(bytes);
    (
        [
            (
                header::CONTENT_SECURITY_POLICY,
                POLICY.replace("{nonce}", &nonce),
            ),
            (header::CACHE_CONTROL, "no-cache".to_owned()),
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
        ],
        PAGE.replace("{{nonce}}", &nonce).replace(
            "{{default_query}}",
            &attribute(&default_query(&state.app.descriptors)),
        ),
    )
        .into_response()
}

pub async fn asset(Path(file): Path<String>) -> Response {
    if let Some(bundle) = BUNDLES.iter().find(|bundle| bundle.name == file) {
        return (
            [
                (header::CONTENT_TYPE, bundle.content_type),
                // Its name carries its version.
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            bundle.body,
        )
            .into_response();
    }
    match OWN.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *body,
        )
            .into_response(),
        None => super::not_found().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_query_selects_every_type_served_and_parses() {
        let catalog = Catalog::builtin();
        let query = default_query(&catalog);
        async_graphql::parser::parse_query(&query).expect("the default query parses");
        for ty in catalog.types() {
            assert!(query.contains(&format!("... on {} {{", ty.name)), "{query}");
        }
        let kept = attribute(&query);
        assert!(!kept.contains('"') && !kept.contains('<') && !kept.contains('\n'));
    }

    #[test]
    fn the_page_names_every_bundle_by_its_versioned_name() {
        let left = PAGE
            .replace("{{nonce}}", "")
            .replace("{{default_query}}", "");
        assert!(!left.contains("{{"), "a placeholder is left: {left}");
        for bundle in BUNDLES {
            assert!(
                PAGE.contains(&format!("/graphiql/assets/{}\"", bundle.name)),
                "{} is not on the page",
                bundle.name
            );
            assert!(bundle.body.len() > 1000, "{} is empty", bundle.name);
        }
    }
}
