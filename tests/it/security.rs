//! Identity, tenancy and access control against a server that checks tokens.
//! Every refusal is checked for its `extensions.code`.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use riverfeed::auth::{mint_hs256, Authenticator, Claims, JwtVerifier};
use riverfeed::http::WsLimits;
use riverfeed::server::ServeOptions;
use serde_json::{json, Value};

use crate::common::{first_error_code, store_url, Backend, Client, Stopped, TestServer, WsClient};

const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";
const AUDIENCE: &str = "riverfeed-tests";
const RSA_PRIVATE: &[u8] = include_bytes!("../keys/rsa-private.pem");
const RSA_PUBLIC: &[u8] = include_bytes!("../keys/rsa-public.pem");
const EC_PRIVATE: &[u8] = include_bytes!("../keys/ec-private.pem");
const EC_PUBLIC: &[u8] = include_bytes!("../keys/ec-public.pem");

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

fn token(tenant: &str, user: &str, roles: &[&str]) -> String {
    mint_hs256(&claims(tenant, user, roles), SECRET).expect("mint")
}

async fn start(
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

fn hs256() -> Authenticator {
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

async fn roles_decide_who_acts_for_whom(backend: Backend) {
    let Some(server) = start(backend, hs256(), |_| {}).await else {
        return;
    };
    let alice = as_user(&server, "acme", "alice");
    let service = bearer(&server, &token("acme", "backend", &["service"]));
    let admin = bearer(&server, &token("acme", "support", &["admin"]));
    service
        .data(
            "mutation { bob: upsertUser(input: {id: \"bob\", name: \"Bob\"}) { id } carol: upsertUser(input: {id: \"carol\", name: \"Carol\"}) { id } }",
            json!({}),
        )
        .await;

    let forbidden_for_users = [
        ("upsert someone else", "mutation { upsertUser(input: {id: \"bob\", name: \"Mallory\"}) { id } }"),
        ("record as someone else", "mutation { recordAction(input: {actorId: \"bob\", descriptor: {statusPost: {text: \"I quit\"}}}) { actionId } }"),
        ("follow for someone else", "mutation { follow(userId: \"carol\", asUserId: \"bob\") }"),
        ("befriend for someone else", "mutation { befriend(userId: \"carol\", asUserId: \"bob\") }"),
        ("join a group", "mutation { joinGroup(groupId: \"execs\", kind: TEAM) { groupId } }"),
        ("put someone in a group", "mutation { joinGroup(groupId: \"execs\", kind: TEAM, userId: \"bob\") { groupId } }"),
        ("take someone out of a group", "mutation { leaveGroup(groupId: \"execs\", userId: \"bob\") }"),
        ("read another feed", "{ feed(ownerId: \"bob\") { edges { cursor } } }"),
        ("rename a ref", "mutation { renameRef(refId: \"app-1\", name: \"Someone Else\") }"),
        ("assign", "mutation { assign(userId: \"alice\", refId: \"app-1\") }"),
        ("unassign", "mutation { unassign(userId: \"bob\", refId: \"app-1\") }"),
        ("set a supervisor", "mutation { setSupervisor(userId: \"alice\", supervisorId: \"bob\") { id } }"),
    ];
    for (name, query) in forbidden_for_users {
        assert_eq!(
            code(&alice, query, json!({})).await,
            "FORBIDDEN",
            "user: {name}"
        );
    }
    // Nor may a user put words in another's mouth inside a descriptor.
    let forged = "mutation { recordAction(input: {descriptor: {applicationRating: {raterId: \"bob\", raterName: \"Bob\", positionId: \"p\", positionName: \"P\", applicantId: \"a\", applicantName: \"A\", ratingScore: 1}}}) { actionId } }";
    assert_eq!(code(&alice, forged, json!({})).await, "FORBIDDEN");
    let forged_request = "mutation { recordAction(input: {descriptor: {applicantRatingRequested: {applicantId: \"a\", applicantName: \"A\", positionId: \"p\", positionName: \"P\", raterId: \"carol\", raterName: \"Carol\", requestedById: \"bob\", requestedByName: \"Bob\"}}}) { actionId } }";
    assert_eq!(code(&alice, forged_request, json!({})).await, "FORBIDDEN");
    let own = forged.replace("raterId: \"bob\"", "raterId: \"alice\"");
    alice.data(&own, json!({})).await;
    // A user still acts as itself.
    assert_eq!(
        alice
            .data("mutation { follow(userId: \"bob\") }", json!({}))
            .await["follow"],
        true
    );
    alice
        .data(
            "mutation { upsertUser(input: {id: \"alice\", name: \"Alice\"}) { id } }",
            json!({}),
        )
        .await;

    // The service acts for users of its tenant.
    service
        .data(
            "mutation { follow(userId: \"bob\", asUserId: \"carol\") }",
            json!({}),
        )
        .await;
    service
        .data(
            "mutation { joinGroup(groupId: \"execs\", kind: TEAM, userId: \"bob\") { groupId } }",
            json!({}),
        )
        .await;
    let data = service
        .data(
            "mutation { recordAction(input: {actorId: \"bob\", descriptor: {statusPost: {text: \"hello from bob\"}}}) { actionId actorId } }",
            json!({}),
        )
        .await;
    assert_eq!(data["recordAction"]["actorId"], "bob");
    let renamed = service
        .data(
            "mutation { renameRef(refId: \"app-1\", name: \"Nobody\") }",
            json!({}),
        )
        .await;
    assert_eq!(renamed["renameRef"], 0, "no action names app-1");
    let id = data["recordAction"]["actionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let bob = as_user(&server, "acme", "bob");
    bob.wait_delivered(&id).await;

    // Assignments and supervision are the application's to set.
    let data = service
        .data("mutation { assign(userId: \"bob\", refId: \"app-1\") setSupervisor(userId: \"bob\", supervisorId: \"carol\") { supervisor { name } } }", json!({}))
        .await;
    assert_eq!(
        data,
        json!({ "assign": true, "setSupervisor": { "supervisor": { "name": "Carol" } } })
    );
    let body = service
        .post(
            "mutation { assign(userId: \"ghost\", refId: \"app-1\") }",
            json!({}),
        )
        .await;
    assert_eq!(first_error_code(&body).as_deref(), Some("BAD_USER_INPUT"));
    let of_bob = "{ user(id: \"bob\") { assignments supervisor { userId } } }";
    assert_eq!(
        bob_view(&server).data(of_bob, json!({})).await["user"],
        json!({ "assignments": ["app-1"], "supervisor": { "userId": "carol" } })
    );
    assert_eq!(
        alice.data(of_bob, json!({})).await["user"]["assignments"],
        json!([]),
        "others do not see a user's assignments"
    );

    // Groups of others: only those shared with the viewer.
    service
        .data("mutation { joinGroup(groupId: \"all-hands\", kind: DEPARTMENT, userId: \"bob\") { groupId } }", json!({}))
        .await;
    service
        .data("mutation { joinGroup(groupId: \"all-hands\", kind: DEPARTMENT, userId: \"alice\") { groupId } }", json!({}))
        .await;
    let groups = "{ user(id: \"bob\") { groups { groupId } } }";
    let seen = alice.data(groups, json!({})).await;
    assert_eq!(
        seen["user"]["groups"],
        json!([{ "groupId": "all-hands" }]),
        "not execs"
    );
    let seen = service.data(groups, json!({})).await;
    assert_eq!(seen["user"]["groups"].as_array().unwrap().len(), 2);

    // The service may not read feeds; the admin reads any, as its owner sees it.
    let query = "{ feed(ownerId: \"carol\") { edges { node { actionId } } } }";
    assert_eq!(code(&service, query, json!({})).await, "FORBIDDEN");
    let data = admin.data(query, json!({})).await;
    assert_eq!(data["feed"]["edges"][0]["node"]["actionId"], id.as_str());
    // Nobody reads another user's feed by accident: without ownerId it is one's own.
    assert!(admin.feed_ids("").await.0.is_empty());
    server.stop().await;
}

fn bob_view(server: &TestServer) -> Client {
    as_user(server, "acme", "bob")
}

async fn tenants_never_see_each_other(backend: Backend) {
    let Some(server) = start(backend, hs256(), |_| {}).await else {
        return;
    };
    // The same user ids in two tenants.
    let acme_bob = as_user(&server, "acme", "bob");
    let acme_alice = as_user(&server, "acme", "alice");
    let globex_alice = as_user(&server, "globex", "alice");
    let globex_service = bearer(&server, &token("globex", "backend", &["service"]));
    acme_bob.upsert_user("bob", "Bob of Acme").await;
    acme_alice.follow("bob").await;
    let id = acme_bob
        .post_status("acme only", json!({ "refIds": ["applicant-7"] }))
        .await;
    acme_bob.wait_delivered(&id).await;
    let missing = "5f0000000000000000000000";

    // Reads: an id of another tenant answers as an id that does not exist.
    for (other, label) in [(id.as_str(), "acme's action"), (missing, "no action")] {
        let data = globex_alice
            .data(
                "query($id: ID!) { action(id: $id) { actionId } actions(ids: [$id]) { actionId } }",
                json!({ "id": other }),
            )
            .await;
        assert_eq!(
            data,
            json!({ "action": null, "actions": [null] }),
            "{label}"
        );
        for mutation in [
            "mutation($id: ID!) { hideAction(id: $id) { id } }",
            "mutation($id: ID!) { deleteAction(id: $id) }",
        ] {
            let body = globex_service.post(mutation, json!({ "id": other })).await;
            assert_eq!(
                first_error_code(&body).as_deref(),
                Some("NOT_FOUND"),
                "{label}: {body}"
            );
        }
    }
    let data = globex_alice
        .data(
            "mutation($id: ID!) { hideFeedItem(actionId: $id) }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["hideFeedItem"], false);
    let data = globex_alice
        .data(
            "{ slice(refId: \"applicant-7\") { edges { cursor } } user(id: \"bob\") { userId } }",
            json!({}),
        )
        .await;
    assert_eq!(data, json!({ "slice": { "edges": [] }, "user": null }));
    assert!(globex_alice.feed_ids("").await.0.is_empty());
    // Writes: acme's bob is as unknown in globex as someone who never existed.
    for user in ["bob", "nobody-at-all"] {
        let body = globex_alice
            .post(
                "mutation($u: ID!) { follow(userId: $u) }",
                json!({ "u": user }),
            )
            .await;
        assert_eq!(
            first_error_code(&body).as_deref(),
            Some("BAD_USER_INPUT"),
            "{user}: {body}"
        );
        let message = body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .replace(user, "<id>");
        assert_eq!(message, "unknown user(s): <id>; upsert them first");
    }
    // Acme is untouched.
    assert_eq!(acme_alice.feed_ids("").await.0, vec![id]);
    server.stop().await;
}

async fn hidden_actions_leave_feeds_slices_and_subscriptions_at_once(backend: Backend) {
    let Some(server) = start(backend, hs256(), |_| {}).await else {
        return;
    };
    let bob = as_user(&server, "acme", "bob");
    let alice = as_user(&server, "acme", "alice");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let id = bob
        .post_status("regrettable", json!({ "refIds": ["applicant-9"] }))
        .await;
    bob.wait_delivered(&id).await;
    let mut ws = WsClient::connect(
        &server.ws_url(),
        json!({ "token": token("acme", "alice", &[]) }),
    )
    .await;
    ws.subscribe(
        "1",
        "subscription { feedEvents { kind item { actionId action { actionId } } } }",
    )
    .await;
    server.wait_live_topics(1).await;

    bob.data(
        "mutation($id: ID!) { hideAction(id: $id) { id } }",
        json!({ "id": id }),
    )
    .await;
    // The fan-out's own ADDED may still be on its way (the action reads
    // DONE once committed, and the worker publishes right after).
    let mut event = ws.next_payload().await;
    if event["data"]["feedEvents"]["kind"] == "ADDED" {
        assert_eq!(event["data"]["feedEvents"]["item"]["actionId"], id.as_str());
        event = ws.next_payload().await;
    }
    assert_eq!(event["data"]["feedEvents"]["kind"], "REMOVED");
    assert_eq!(event["data"]["feedEvents"]["item"]["action"], Value::Null);
    assert!(alice.feed_ids("").await.0.is_empty());
    let data = alice
        .data(
            "{ slice(refId: \"applicant-9\") { edges { cursor } } }",
            json!({}),
        )
        .await;
    assert_eq!(data["slice"]["edges"], json!([]));
    // The actor still sees it, marked hidden.
    let data = bob
        .data(
            "query($id: ID!) { action(id: $id) { hidden } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["action"]["hidden"], true);
    server.stop().await;
}

async fn narrowing_an_action_takes_it_from_readers_at_once(backend: Backend) {
    let Some(server) = start(backend, hs256(), |_| {}).await else {
        return;
    };
    let bob = as_user(&server, "acme", "bob");
    let alice = as_user(&server, "acme", "alice");
    let carol = as_user(&server, "acme", "carol");
    bob.upsert_user("bob", "Bob").await;
    carol.upsert_user("carol", "Carol").await;
    alice.follow("bob").await;
    let id = bob
        .post_status("first draft", json!({ "refIds": ["position-3"] }))
        .await;
    bob.wait_delivered(&id).await;
    assert_eq!(alice.feed_ids("").await.0, vec![id.clone()]);

    let change = "mutation($id: ID!, $readers: [ID!]) { setActionScope(id: $id, scope: RESTRICTED, readers: $readers) { scope } }";
    // Alice may read it but not change it.
    let body = alice
        .post(change, json!({ "id": id, "readers": ["alice"] }))
        .await;
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("FORBIDDEN"),
        "{body}"
    );
    let data = bob
        .data(change, json!({ "id": id, "readers": ["carol"] }))
        .await;
    assert_eq!(data["setActionScope"]["scope"], "RESTRICTED");

    // Now Alice may not even read it: changing it answers as for no action.
    let body = alice
        .post(change, json!({ "id": id, "readers": ["alice"] }))
        .await;
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("NOT_FOUND"),
        "{body}"
    );
    let body = alice
        .post(
            "mutation($id: ID!) { deleteAction(id: $id) }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("NOT_FOUND"),
        "{body}"
    );

    // Alice lost it at once, before any clean-up: feed, action, slice.
    assert!(alice.feed_ids("").await.0.is_empty());
    let data = alice
        .data(
            "query($id: ID!) { action(id: $id) { actionId } slice(refId: \"position-3\") { edges { cursor } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data, json!({ "action": null, "slice": { "edges": [] } }));
    // Carol, a new reader, gets it delivered.
    bob.wait_delivered(&id).await;
    assert_eq!(carol.feed_ids("").await.0, vec![id.clone()]);
    assert_eq!(
        bob.feed_ids("").await.0,
        vec![id],
        "the actor keeps one item"
    );
    server.stop().await;
}

async fn connections_and_subscriptions_are_capped(backend: Backend) {
    let limits = WsLimits {
        max_connections: 2,
        max_subscriptions: 2,
        ..WsLimits::default()
    };
    let Some(server) = start(backend, hs256(), |o| o.ws_limits = limits).await else {
        return;
    };
    let payload = json!({ "token": token("acme", "alice", &[]) });
    let mut first = WsClient::connect(&server.ws_url(), payload.clone()).await;
    let _second = WsClient::connect(&server.ws_url(), payload.clone()).await;
    let refused = reqwest::Client::new()
        .get(format!("{}/graphql/ws", server.base))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("sec-websocket-protocol", "graphql-transport-ws")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("TOO_MANY_CONNECTIONS")
    );

    // A connection's subscriptions start concurrently: which of the three is
    // refused is not fixed, only that one is.
    let query = "subscription { feedEvents { kind } }";
    for id in ["a", "b", "c"] {
        first.subscribe(id, query).await;
    }
    let message = first.next().await.expect("an answer");
    assert_eq!(
        message["payload"]["errors"][0]["extensions"]["code"], "TOO_MANY_SUBSCRIPTIONS",
        "{message}"
    );
    let refused = message["id"].as_str().unwrap().to_owned();
    let done = first.next().await.expect("its end");
    assert_eq!(
        (done["type"].as_str(), done["id"].as_str()),
        (Some("complete"), Some(&*refused))
    );
    // The two others live: an event reaches both.
    server.wait_live_topics(1).await;
    let alice = as_user(&server, "acme", "alice");
    alice.post_status("ping", json!({})).await;
    let mut ids = vec![first.next_payload_id().await, first.next_payload_id().await];
    ids.sort();
    let mut expected: Vec<String> = ["a", "b", "c"]
        .iter()
        .filter(|i| **i != refused)
        .map(|i| i.to_string())
        .collect();
    expected.sort();
    assert_eq!(ids, expected);
    server.stop().await;
}

crate::on_both_backends!(
    tokens_are_checked,
    public_key_tokens,
    roles_decide_who_acts_for_whom,
    tenants_never_see_each_other,
    hidden_actions_leave_feeds_slices_and_subscriptions_at_once,
    narrowing_an_action_takes_it_from_readers_at_once,
    connections_and_subscriptions_are_capped,
);

#[tokio::test]
async fn dev_mode_stays_on_loopback_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServeOptions::new(format!("embedded:{}", dir.path().display()));
    options.listen = "0.0.0.0:0".parse().unwrap();
    let err = riverfeed::server::start(options.clone())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("loopback"), "{err}");
    drop(dir);

    // With a token key the same address is fine.
    let dir = tempfile::tempdir().unwrap();
    options.store = format!("embedded:{}", dir.path().display());
    options.auth = Arc::new(hs256());
    let server = riverfeed::server::start(options)
        .await
        .expect("starts with tokens");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn dev_mode_answers_only_this_machine() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("embedded");
    let http = reqwest::Client::new();
    let url = format!("{}/graphql", server.base);
    let ask = |host: Option<&'static str>, origin: Option<&'static str>| {
        let mut request = http
            .post(&url)
            .header("x-riverfeed-tenant", "acme")
            .header("x-riverfeed-user", "alice")
            .json(&json!({ "query": "{ viewer { userId } }" }));
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    for (host, origin, status) in [
        (None, None, 200),
        (Some("localhost:8080"), Some("http://localhost:3000"), 200),
        (Some("127.0.0.1"), Some("http://[::1]:5173"), 200),
        // DNS rebinding: a page of attacker.example whose name now points here.
        (
            Some("attacker.example:8080"),
            Some("http://attacker.example:8080"),
            403,
        ),
        // A page of another site calling the local server.
        (None, Some("https://evil.example"), 403),
    ] {
        let response = ask(host, origin).await.unwrap();
        assert_eq!(
            response.status(),
            status,
            "host {host:?}, origin {origin:?}"
        );
        if status == 403 {
            let body: Value = response.json().await.unwrap();
            assert_eq!(first_error_code(&body).as_deref(), Some("FORBIDDEN"));
        }
    }
    // The same for a cross-site websocket.
    let upgrade = http
        .get(format!("{}/graphql/ws", server.base))
        .header("origin", "https://evil.example")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("sec-websocket-protocol", "graphql-transport-ws")
        .send()
        .await
        .unwrap();
    assert_eq!(upgrade.status(), 403);
    server.stop().await;
}

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
