//! Which tokens a server that checks them accepts: HS256 and public keys,
//! over HTTP and in a websocket's `connection_init`; sessions that expire;
//! the `token` command.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use riverfeed::auth::{mint_hs256, Authenticator, JwtVerifier};
use serde_json::json;

use super::{
    as_user, bearer, claims, code, hs256, now, start, token, AUDIENCE, EC_PRIVATE, EC_PUBLIC,
    RSA_PRIVATE, RSA_PUBLIC, SECRET, VIEWER,
};
use crate::common::{Backend, WsClient};

async fn tokens_are_checked(backend: Backend) {
    let Some(server) = start(backend, hs256(), |_| {}).await else {
        return;
    };
    let good = as_user(&server, "acme", "alice");
    assert_eq!(
        good.data(VIEWER, json!({})).await["viewer"]["userId"],
        "alice"
    );

    // Dev-mode headers mean nothing once tokens are configured.
    let headers_only = server.client("acme", "alice");
    assert_eq!(
        code(&headers_only, VIEWER, json!({})).await,
        "UNAUTHENTICATED"
    );

    let mut expired = claims("acme", "alice", &[]);
    expired.exp = now() - 3600;
    let mut other_audience = claims("acme", "alice", &[]);
    other_audience.aud = Some("someone-else".into());
    let mut no_audience = claims("acme", "alice", &[]);
    no_audience.aud = None;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let body =
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims("acme", "alice", &["admin"])).unwrap());
    let attacks: Vec<(&str, String)> = vec![
        ("malformed token", "not-a-jwt".into()),
        ("garbage segments", "a.b.c".into()),
        (
            "bad signature",
            mint_hs256(
                &claims("acme", "alice", &[]),
                b"another-secret-another-secret-!!",
            )
            .unwrap(),
        ),
        ("alg none", format!("{header}.{body}.")),
        ("expired", mint_hs256(&expired, SECRET).unwrap()),
        (
            "wrong audience",
            mint_hs256(&other_audience, SECRET).unwrap(),
        ),
        (
            "RS256 where HS256 is configured",
            jsonwebtoken::encode(
                &Header::new(Algorithm::RS256),
                &claims("acme", "alice", &[]),
                &EncodingKey::from_rsa_pem(RSA_PRIVATE).unwrap(),
            )
            .unwrap(),
        ),
    ];
    for (name, token) in &attacks {
        let client = bearer(&server, token);
        assert_eq!(
            code(&client, VIEWER, json!({})).await,
            "UNAUTHENTICATED",
            "{name}"
        );
    }
    let mut basic = server.anonymous();
    basic
        .headers
        .insert("authorization", "Basic YWxpY2U6cHc=".parse().unwrap());
    assert_eq!(code(&basic, VIEWER, json!({})).await, "UNAUTHENTICATED");
    assert_eq!(
        code(&server.anonymous(), VIEWER, json!({})).await,
        "UNAUTHENTICATED"
    );

    // A token whose roles are all unknown may do nothing.
    let roleless = bearer(&server, &token("acme", "alice", &["guest"]));
    assert_eq!(code(&roleless, VIEWER, json!({})).await, "FORBIDDEN");

    // Websockets: the token in connection_init, either way round.
    for payload in [
        json!({ "Authorization": format!("Bearer {}", token("acme", "alice", &[])) }),
        json!({ "token": token("acme", "alice", &[]) }),
    ] {
        let mut ws = WsClient::connect(&server.ws_url(), payload).await;
        ws.subscribe("1", "subscription { feedEvents { kind } }")
            .await;
        server.wait_live_topics(1).await;
        drop(ws);
    }
    for (name, token) in &attacks {
        let close = WsClient::refused(&server.ws_url(), json!({ "token": token })).await;
        let reason = close["reason"].as_str().unwrap_or_default();
        assert_eq!(close["code"], 4403, "ws {name}: {close}");
        assert!(reason.starts_with("UNAUTHENTICATED"), "ws {name}: {close}");
    }
    let close = WsClient::refused(&server.ws_url(), json!({})).await;
    assert_eq!(close["code"], 4403, "{close}");
    assert!(close["reason"]
        .as_str()
        .unwrap_or_default()
        .contains("no identity"));

    // Introspection is off with tokens unless switched on, and says so.
    for query in [
        "{ __schema { queryType { name } } }",
        "{ __type(name: \"Query\") { name } }",
    ] {
        assert_eq!(
            code(&good, query, json!({})).await,
            "INTROSPECTION_DISABLED",
            "{query}"
        );
    }
    assert_eq!(
        good.data("{ __typename }", json!({})).await["__typename"],
        "Query"
    );
    server.stop().await;
}

async fn public_key_tokens(backend: Backend) {
    for (public, private, algorithm) in [
        (
            RSA_PUBLIC,
            EncodingKey::from_rsa_pem(RSA_PRIVATE).unwrap(),
            Algorithm::RS256,
        ),
        (
            EC_PUBLIC,
            EncodingKey::from_ec_pem(EC_PRIVATE).unwrap(),
            Algorithm::ES256,
        ),
    ] {
        let verifier = JwtVerifier::from_public_key_pem(public, None, Some(AUDIENCE)).unwrap();
        assert_eq!(verifier.algorithm(), algorithm);
        let Some(server) = start(backend, Authenticator::Jwt(Box::new(verifier)), |o| {
            o.introspection = Some(true)
        })
        .await
        else {
            return;
        };
        let signed = jsonwebtoken::encode(
            &Header::new(algorithm),
            &claims("acme", "alice", &[]),
            &private,
        )
        .unwrap();
        let client = bearer(&server, &signed);
        assert_eq!(
            client.data(VIEWER, json!({})).await["viewer"]["userId"],
            "alice"
        );
        // HS/RS confusion: HS256 "signed" with the public key as the secret.
        let confused = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims("acme", "alice", &["admin"]),
            &EncodingKey::from_secret(public),
        )
        .unwrap();
        assert_eq!(
            code(&bearer(&server, &confused), VIEWER, json!({})).await,
            "UNAUTHENTICATED"
        );
        let data = client
            .data("{ __schema { queryType { name } } }", json!({}))
            .await;
        assert_eq!(
            data["__schema"]["queryType"]["name"], "Query",
            "switched on"
        );
        server.stop().await;
    }
}

crate::on_both_backends!(tokens_are_checked, public_key_tokens);

#[test]
fn a_session_stops_when_its_token_expires() {
    let verifier = JwtVerifier::hs256(SECRET, None, Some(AUDIENCE));
    let mut fresh = claims("acme", "alice", &[]);
    fresh.exp = now() + 600;
    assert!(!verifier
        .verify(&mint_hs256(&fresh, SECRET).unwrap())
        .unwrap()
        .expired());
    // Checked at connect time within the leeway, then past it while connected:
    let mut viewer = verifier
        .verify(&mint_hs256(&fresh, SECRET).unwrap())
        .unwrap();
    viewer.expires_at = Some(now() - riverfeed::auth::LEEWAY_SECS - 1);
    assert!(
        viewer.expired(),
        "viewer() and live subscriptions refuse it now"
    );
}

#[tokio::test]
async fn the_token_command_mints_what_the_server_accepts() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_riverfeed"))
        .args([
            "token", "--tenant", "acme", "--user", "alice", "--role", "service",
        ])
        .env("RIVERFEED_JWT_SECRET", std::str::from_utf8(SECRET).unwrap())
        .output()
        .await
        .expect("runs");
    assert!(output.status.success(), "{output:?}");
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let viewer = JwtVerifier::hs256(SECRET, None, None)
        .verify(&token)
        .expect("accepted");
    assert_eq!(
        (viewer.tenant.as_str(), viewer.user.as_str()),
        ("acme", "alice")
    );
    assert!(viewer.acts_for_others());
}
