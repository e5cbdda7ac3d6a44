//! Identity, tenancy and access control against a server that checks tokens.
//! Every refusal is checked for its `extensions.code`.
//!
//! - [`tokens`]: which tokens are accepted, over HTTP and websockets
//! - [`access`]: roles, tenants, and access to actions hidden or narrowed
//! - [`connections`]: dev mode kept to this machine, websocket caps,
//!   bare upgrades kept apart from authenticated connections
//! - [`cors`]: which web pages may call
//! - [`requests`]: what one request may cost the server
//! - [`ids`]: ids kept in one Unicode form, hidden characters refused
//! - [`slow_clients`]: header, body and idle timeouts, connections per address

mod access;
mod connections;
mod cors;
mod ids;
mod requests;
mod slow_clients;
mod tokens;

use std::sync::Arc;

use riverfeed::auth::{mint_hs256, Authenticator, Claims, JwtVerifier};
use riverfeed::server::ServeOptions;
use serde_json::Value;

use crate::common::{store_url, Backend, Client, Stopped, TestServer};

const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";
const AUDIENCE: &str = "riverfeed-tests";
const RSA_PRIVATE: &[u8] = include_bytes!("../../keys/rsa-private.pem");
const RSA_PUBLIC: &[u8] = include_bytes!("../../keys/rsa-public.pem");
const EC_PRIVATE: &[u8] = include_bytes!("../../keys/ec-private.pem");
const EC_PUBLIC: &[u8] = include_bytes!("../../keys/ec-public.pem");

fn now() -> u64 {
    chrono::Utc::now().timestamp() as u64
}

fn claims(tenant: &str, user: &str, roles: &[&str]) -> Claims {
    Claims {
        sub: user.into(),
        tenant: tenant.into(),
        roles: (!roles.is_empty()).then(|| roles.iter().map(|r| r.to_string()).collect()),
        exp: now() + 600,
        iat: Some(now()),
        iss: None,
        aud: Some(AUDIENCE.into()),
        nbf: None,
    }
}

pub(crate) fn token(tenant: &str, user: &str, roles: &[&str]) -> String {
    mint_hs256(&claims(tenant, user, roles), SECRET).expect("mint")
}

pub(crate) async fn start(
    backend: Backend,
    auth: Authenticator,
    tweak: impl FnOnce(&mut ServeOptions),
) -> Option<TestServer> {
    let (store, dir) = store_url(backend)?;
    let auth = Arc::new(auth);
    Some(
        TestServer::start_with(Stopped { store, dir }, |store| {
            let mut options = ServeOptions::new(store);
            options.auth = auth;
            tweak(&mut options);
            options
        })
        .await,
    )
}

pub(crate) fn hs256() -> Authenticator {
    Authenticator::Jwt(Box::new(JwtVerifier::hs256(SECRET, None, Some(AUDIENCE))))
}

/// A client that sends `Authorization: Bearer <token>`.
fn bearer(server: &TestServer, token: &str) -> Client {
    let mut client = server.anonymous();
    client.headers.insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    client
}

fn as_user(server: &TestServer, tenant: &str, user: &str) -> Client {
    bearer(server, &token(tenant, user, &[]))
}

async fn code(client: &Client, query: &str, variables: Value) -> String {
    client.error_code(query, variables).await
}

const VIEWER: &str = "{ viewer { userId } }";
