//! Who may act for whom and read what: roles, tenants kept apart, and
//! actions hidden or narrowed leaving their readers at once.

use serde_json::{json, Value};

use super::{as_user, bearer, code, hs256, start, token};
use crate::common::{first_error_code, Backend, Client, TestServer, WsClient};

async fn roles_decide_who_acts_for_whom(backend: Backend) {
    let Some(server) = start(backend, hs256(), |_| {}).await else {
        return;
    };
    let alice = as_user(&server, "acme", "alice");
    let service = bearer(&server, &token("acme", "backend", &["service"]));
    let admin = bearer(&server, &token("acme", "support", &["admin"]));
    service
        .data(
            "mutation { bob: upsertUser(input: {userId: \"bob\", name: \"Bob\"}) { id } carol: upsertUser(input: {userId: \"carol\", name: \"Carol\"}) { id } }",
            json!({}),
        )
        .await;

    let forbidden_for_users = [
        ("upsert someone else", "mutation { upsertUser(input: {userId: \"bob\", name: \"Mallory\"}) { id } }"),
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
            "mutation { upsertUser(input: {userId: \"alice\", name: \"Alice\"}) { id } }",
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
    let of_bob = "{ user(userId: \"bob\") { assignments supervisor { userId } } }";
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
    let groups = "{ user(userId: \"bob\") { groups { groupId } } }";
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
                "query($id: ID!) { action(actionId: $id) { actionId } actions(actionIds: [$id]) { actionId } }",
                json!({ "id": other }),
            )
            .await;
        assert_eq!(
            data,
            json!({ "action": null, "actions": [null] }),
            "{label}"
        );
        for mutation in [
            "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
            "mutation($id: ID!) { deleteAction(actionId: $id) }",
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
            "{ slice(refId: \"applicant-7\") { edges { cursor } } user(userId: \"bob\") { userId } }",
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
        "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
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
            "query($id: ID!) { action(actionId: $id) { hidden } }",
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

    let change = "mutation($id: ID!, $readers: [ID!]) { setActionScope(actionId: $id, scope: RESTRICTED, readers: $readers) { scope } }";
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
            "mutation($id: ID!) { deleteAction(actionId: $id) }",
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
            "query($id: ID!) { action(actionId: $id) { actionId } slice(refId: \"position-3\") { edges { cursor } } }",
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

crate::on_both_backends!(
    roles_decide_who_acts_for_whom,
    tenants_never_see_each_other,
    hidden_actions_leave_feeds_slices_and_subscriptions_at_once,
    narrowing_an_action_takes_it_from_readers_at_once,
);

// A narrowed action leaves its reader's feed before any cleanup under
// every model (the cross-model test reads once the worker is done):
// proved under every other model too.
crate::under_other_models!(narrowing_an_action_takes_it_from_readers_at_once,);
