//! Planned reads: a feed page, the viewer and the badge counts run from a
//! plan and answer byte for byte as async-graphql's executor does, errors
//! included; what no plan covers runs on async-graphql; `/metrics` says
//! which executor ran each operation. (The differential harness compares
//! the two executors over many more documents.)

use serde_json::{json, Value};

use crate::common::{Backend, Client, TestServer};

mod by_id;
mod live;

/// A frontend's feed page: actions, actors, descriptors and counts.
const PAGE: &str =
    "query Page($first: Int, $after: String) { feed(first: $first, after: $after) { \
    edges { cursor node { __typename id actionId ownerId relevancy cursor \
    reason { kind actorId rule by at } \
    action { id actionId actorId conducted to expiresAt hidden scope readers refIds tags \
    commentCount likeCount viewerHasLiked actor { id userId name __typename } \
    descriptor { __typename ... on StatusPost { text } ...Rated } } } } \
    pageInfo { hasPreviousPage hasNextPage startCursor endCursor } eventsCursor } } \
    fragment Rated on ApplicationRating { ratingScore applicantName }";

/// Aliases, a key asked twice, inline fragments on the `Node` interface,
/// `@include` / `@skip` by variable and by literal, the root's typename.
const SHAPES: &str = "query Shapes($withActor: Boolean!, $hide: Boolean = false) { __typename \
    me: viewer { userId name } counts: notificationCounts { unseenCount unreadCount } \
    top: feed(first: 2) { nodes { ... on Node { id } action { actor @include(if: $withActor) { name } \
    likes: likeCount likeCount scope @skip(if: $hide) } action { actionId } } \
    pageInfo @skip(if: false) { hasNextPage } } }";

/// The lists of actions: a slice, a profile, discussions.
const LISTS: &str = "query Lists($ref: String!, $who: ID!) { \
    slice(refId: $ref, first: 2) { edges { cursor node { actionId actor { name } likeCount } } \
    pageInfo { hasNextPage endCursor } } \
    actorFeed(userId: $who) { nodes { __typename actionId descriptor { ... on StatusPost { text } } } } \
    discussions { __typename nodes { actionId } pageInfo { hasPreviousPage } } }";

/// Each body twice, planner off then on, as text: they must be equal.
async fn both_ways(server: &TestServer, client: &Client, query: &str, variables: Value) -> String {
    server.server.planner.set_enabled(false);
    let general = client.post(query, variables.clone()).await;
    server.server.planner.set_enabled(true);
    // The first request with a document keeps it; the next runs planned.
    let _ = client.post(query, variables.clone()).await;
    let planned = client.post(query, variables).await;
    let (general, planned) = (canonical(server, general), canonical(server, planned));
    if planned != general {
        let at = planned
            .bytes()
            .zip(general.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let from = at.saturating_sub(200);
        panic!(
            "the executors differ for {query} at byte {at}:\nplanned: …{}\ngeneral: …{}",
            &planned[from..(at + 200).min(planned.len())],
            &general[from..(at + 200).min(general.len())]
        );
    }
    planned
}

/// A body as text, each cursor replaced by what it holds (each sealing
/// draws a fresh nonce, so equal cursors differ as text).
pub(crate) fn canonical(server: &TestServer, mut body: Value) -> String {
    fn walk(key: &riverfeed::api::cursor::CursorKey, value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields.iter_mut() {
                    match field {
                        Value::String(cursor) if name.ends_with("ursor") => {
                            if let Ok(mut held) = key.open(cursor) {
                                // Changes since the read: it holds the time
                                // of the read, which differs between runs.
                                if name == "eventsCursor" {
                                    held.truncate(10);
                                }
                                *cursor = format!("cursor:{held:?}");
                            }
                        }
                        _ => walk(key, field),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| walk(key, item)),
            _ => {}
        }
    }
    let key = server.server.cursors.as_ref().expect("an API server");
    walk(key, &mut body);
    body.to_string()
}

/// How many operations named `name` the executor `executor` ran (0 while
/// none did).
async fn executions(server: &TestServer, name: &str, executor: &str) -> u64 {
    let metric =
        format!("riverfeed_graphql_executions_total{{name=\"{name}\",executor=\"{executor}\"}}");
    server.counter(&metric).await
}

#[tokio::test]
async fn a_feed_page_runs_planned_and_answers_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (ann, bob) = (server.client("acme", "ann"), server.client("acme", "bob"));
    ann.upsert_user("ann", "Ann \"the reader\" Lee").await;
    bob.upsert_user("bob", "Bob ✓").await;
    ann.follow("bob").await;
    let mut last = String::new();
    for n in 0..4 {
        last = bob
            .post_status(
                &format!("news {n}: <b>&\u{2028}"),
                json!({ "refIds": ["r1"] }),
            )
            .await;
    }
    bob.wait_delivered(&last).await;
    ann.data(
        "mutation($id: ID!) { like(actionId: $id) { likeCount } }",
        json!({ "id": last }),
    )
    .await;

    let page = both_ways(&server, &ann, PAGE, json!({ "first": 3 })).await;
    let body: Value = serde_json::from_str(&page).expect("json");
    let edges = body["data"]["feed"]["edges"].as_array().expect("edges");
    assert_eq!(edges.len(), 3, "{page}");
    assert_eq!(edges[0]["node"]["action"]["viewerHasLiked"], json!(true));
    assert_eq!(edges[0]["node"]["action"]["actor"]["name"], json!("Bob ✓"));
    let after = edges[2]["cursor"].clone();
    both_ways(&server, &ann, PAGE, json!({ "first": 3, "after": after })).await;
    assert!(executions(&server, "Page", "planned").await >= 2);

    both_ways(&server, &ann, SHAPES, json!({ "withActor": true })).await;
    // Planned, the fields come in the order they were asked for.
    let shapes = ann.post(SHAPES, json!({ "withActor": true })).await;
    let keys: Vec<&String> = shapes["data"].as_object().expect("data").keys().collect();
    assert_eq!(keys, ["__typename", "me", "counts", "top"]);
    both_ways(
        &server,
        &ann,
        SHAPES,
        json!({ "withActor": false, "hide": true }),
    )
    .await;
    assert!(executions(&server, "Shapes", "planned").await >= 2);

    both_ways(&server, &ann, LISTS, json!({ "ref": "r1", "who": "bob" })).await;
    assert!(executions(&server, "Lists", "planned").await >= 1);
    // A list's own argument refused: its code and path.
    let one = "query One($ref: String!) { slice(refId: $ref) { nodes { actionId } } }";
    let refused = both_ways(&server, &ann, one, json!({ "ref": " " })).await;
    assert!(refused.contains("\"path\":[\"slice\"]"), "{refused}");

    // An error in a planned field: its code, path and location, data null.
    let bad = both_ways(&server, &ann, PAGE, json!({ "after": "not-a-cursor" })).await;
    assert!(bad.contains("\"path\":[\"feed\"]"), "{bad}");
    // A variable async-graphql would refuse is left to it.
    both_ways(&server, &ann, PAGE, json!({ "first": "many" })).await;
    // An action's fan-out is planned, the lease a worker holds too (read
    // below the page); a root no plan covers runs on async-graphql, the
    // whole operation.
    let fan_out =
        "query FanOut { feed(first: 1) { nodes { action { fanOut { state worker } } } } }";
    both_ways(&server, &ann, fan_out, json!({})).await;
    assert!(executions(&server, "FanOut", "planned").await >= 1);
    let other =
        "query Other { feed(first: 1) { nodes { actionId } } __type(name: \"Marker\") { name } }";
    both_ways(&server, &ann, other, json!({})).await;
    assert_eq!(executions(&server, "Other", "fallback").await, 3);
    // No identity: the planned path never sees it.
    let anonymous = server.anonymous();
    both_ways(&server, &anonymous, PAGE, json!({})).await;
    server.stop().await;
}

/// The bell as a frontend shows it: each group with its counts, actors,
/// members and the action it is about.
const BELL: &str = "query Bell($first: Int, $after: String, $n: Int) { \
    notifications(first: $first, after: $after) { __typename unseenCount unreadCount \
    edges { cursor node { __typename id key reason count unreadCount actorCount firstAt lastAt \
    seen read refId actors(first: 2) { id name } \
    action { actionId actorId likeCount viewerHasLiked actor { name } } \
    notifications(first: $n) { __typename id reason actorId actor { userId name } \
    action { actionId } commentId refId at seen read } } } \
    nodes { ... on Node { id } } pageInfo { hasNextPage endCursor } } }";

#[tokio::test]
async fn the_bell_runs_planned_and_answers_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    ann.upsert_user("ann", "Ann").await;
    let mut posts = Vec::new();
    for n in 0..3 {
        posts.push(ann.post_status(&format!("post {n}"), json!({})).await);
    }
    let like = "mutation($id: ID!) { like(actionId: $id) { likeCount } }";
    let comment = "mutation($id: ID!) { comment(actionId: $id, text: \"so true\") { commentId } }";
    for (who, name) in [("bob", "Bob"), ("cat", "Cat")] {
        let client = server.client("acme", who);
        client.upsert_user(who, name).await;
        client.data(like, json!({ "id": posts[0] })).await;
    }
    let (bob, dan) = (server.client("acme", "bob"), server.client("acme", "dan"));
    bob.data(comment, json!({ "id": posts[0] })).await;
    dan.data(like, json!({ "id": posts[1] })).await;
    dan.data(comment, json!({ "id": posts[2] })).await;
    let counts = "{ notificationCounts { unreadCount } }";
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while ann.data(counts, json!({})).await["notificationCounts"]["unreadCount"] != json!(4) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "four groups never came"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // Hidden after it was noticed: its group shows no action.
    ann.data(
        "mutation($id: ID!) { hideAction(actionId: $id) { hidden } }",
        json!({ "id": posts[2] }),
    )
    .await;
    // Two pages of the four groups, the second from the first's cursor.
    let first = both_ways(&server, &ann, BELL, json!({ "first": 2, "n": 2 })).await;
    let first: Value = serde_json::from_str(&first).expect("json");
    // (The comparison's text holds cursors opened: read one as sent.)
    let sent = ann.data(BELL, json!({ "first": 2 })).await;
    let after = sent["notifications"]["pageInfo"]["endCursor"].clone();
    let vars = json!({ "first": 3, "after": after, "n": 1 });
    let rest = both_ways(&server, &ann, BELL, vars).await;
    let rest: Value = serde_json::from_str(&rest).expect("json");
    let groups: Vec<&Value> = [&first, &rest]
        .iter()
        .flat_map(|page| {
            let edges = page["data"]["notifications"]["edges"].as_array();
            edges.unwrap_or_else(|| panic!("no page: {page}"))
        })
        .map(|edge| &edge["node"])
        .collect();
    assert_eq!(groups.len(), 4, "{first} {rest}");
    let liked = groups
        .iter()
        .find(|g| g["actorCount"] == json!(2))
        .expect("the group of two likes");
    assert_eq!(liked["actors"].as_array().map(Vec::len), Some(2));
    assert_eq!(liked["action"]["actor"]["name"], json!("Ann"));
    assert_eq!(liked["notifications"][0]["actor"]["name"], json!("Cat"));
    let hidden = groups
        .iter()
        .filter(|g| g["reason"] == json!("COMMENT") && g["action"].is_null());
    assert_eq!(hidden.count(), 1, "{first} {rest}");
    assert!(executions(&server, "Bell", "planned").await >= 2);

    // The page's own argument refused: its code and path, planned.
    let refused = both_ways(&server, &ann, BELL, json!({ "first": 101 })).await;
    assert!(
        refused.contains("\"path\":[\"notifications\"]"),
        "{refused}"
    );
    assert!(executions(&server, "Bell", "planned").await >= 3);
    // A nested argument refused is left to async-graphql, which places it.
    let members = "query Members { notifications { nodes { notifications(first: 201) { id } } } }";
    let nested = both_ways(&server, &ann, members, json!({})).await;
    assert!(nested.contains("BAD_USER_INPUT"), "{nested}");
    assert_eq!(executions(&server, "Members", "fallback").await, 3);
    server.stop().await;
}

/// Where the viewer stopped reading: every feed's marker, or some.
const MARKS: &str = "query Marks($feeds: [MarkerFeed!]) { \
    markers(feeds: $feeds) { __typename feed cursor version updatedAt } \
    home: markers(feeds: HOME) { feed version } }";

#[tokio::test]
async fn markers_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (ann, bob) = (server.client("acme", "ann"), server.client("acme", "bob"));
    ann.upsert_user("ann", "Ann").await;
    bob.upsert_user("bob", "Bob").await;
    ann.follow("bob").await;
    let posted = bob.post_status("news", json!({})).await;
    bob.wait_delivered(&posted).await;
    let planned = || executions(&server, "Marks", "planned");

    // None set yet: empty lists, planned.
    let body = both_ways(&server, &ann, MARKS, json!({})).await;
    assert!(body.contains("\"markers\":[],\"home\":[]"), "{body}");
    assert_eq!(planned().await, 2);

    let page = ann
        .data("{ feed(first: 1) { pageInfo { endCursor } } }", json!({}))
        .await;
    let set = "mutation($c: String!) { setMarker(feed: HOME, cursor: $c) { version } }";
    for _ in 0..2 {
        ann.data(set, json!({ "c": page["feed"]["pageInfo"]["endCursor"] }))
            .await;
    }
    let all = both_ways(&server, &ann, MARKS, json!({})).await;
    assert!(
        all.contains("\"home\":[{\"feed\":\"HOME\",\"version\":2}]"),
        "{all}"
    );
    // One feed, as a list or alone; none; another's (bob set none).
    let one = both_ways(&server, &ann, MARKS, json!({ "feeds": "HOME" })).await;
    assert_eq!(one, all);
    let body = both_ways(&server, &ann, MARKS, json!({ "feeds": ["NOTIFICATIONS"] })).await;
    assert!(body.contains("\"markers\":[]"), "{body}");
    both_ways(&server, &ann, MARKS, json!({ "feeds": [] })).await;
    let body = both_ways(&server, &bob, MARKS, json!({})).await;
    assert!(body.contains("\"markers\":[],\"home\":[]"), "{body}");
    assert_eq!(planned().await, 12);

    // The root's own error (an identity with no role Riverfeed knows):
    // planned, with its code and path, data null.
    let roleless = server.client_with(Some(("acme", "ann", Some("auditor"))));
    let refused = both_ways(&server, &roleless, MARKS, json!({})).await;
    assert!(refused.contains("\"data\":null"), "{refused}");
    assert!(refused.contains("\"path\":[\"markers\"]"), "{refused}");
    assert!(refused.contains("FORBIDDEN"), "{refused}");
    assert_eq!(planned().await, 14);
    // A feed that is none is async-graphql's to refuse.
    let refused = both_ways(&server, &ann, MARKS, json!({ "feeds": ["NOWHERE"] })).await;
    assert!(refused.contains("errors"), "{refused}");
    assert_eq!(planned().await, 14);
    server.stop().await;
}

/// Bob posts once for all and once for cat alone: ann's and bob's
/// clients, and the two actions.
async fn bob_posts_for_all_and_for_cat(server: &TestServer) -> (Client, Client, String, String) {
    let (ann, bob) = (server.client("acme", "ann"), server.client("acme", "bob"));
    bob.upsert_user("bob", "Bob").await;
    server.client("acme", "cat").upsert_user("cat", "Cat").await;
    let open = bob.post_status("for all", json!({})).await;
    let own = bob
        .post_status(
            "for cat",
            json!({ "scope": "RESTRICTED", "readers": ["cat"] }),
        )
        .await;
    (ann, bob, open, own)
}

/// The home feed in groups, with each group's items, actors and times.
const GROUPS: &str = "query Groups($after: String, $items: Int) { \
    aggregatedFeed(first: 2, after: $after) { __typename \
    edges { cursor node { __typename key verb count actorCount lastAt firstAt actionIds \
    actors { userId name } items(first: $items) { cursor actionId reason { kind } \
    action { actionId likeCount viewerHasLiked actor { name } descriptor { ... on StatusPost { text } } } } } } \
    nodes { key } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }";

#[tokio::test]
async fn the_feed_in_groups_runs_planned_and_answers_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (mary, posts) = crate::notifications::mary_follows_three_who_post(&server, "acme").await;
    mary.data(
        "mutation($a: ID!) { like(actionId: $a) { likeCount } }",
        json!({ "a": posts[4] }),
    )
    .await;

    let body = both_ways(&server, &mary, GROUPS, json!({ "items": 1 })).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    let page = &body["data"]["aggregatedFeed"];
    let first = &page["edges"][0]["node"];
    assert_eq!(first["actionIds"], json!([posts[4], posts[2]]), "{body}");
    assert_eq!(first["actors"][0]["name"], "john", "{body}");
    assert_eq!(first["items"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(
        first["items"][0]["action"]["viewerHasLiked"], true,
        "{body}"
    );
    assert_eq!(page["pageInfo"]["hasNextPage"], true, "{body}");
    assert!(executions(&server, "Groups", "planned").await >= 1);

    // The next page by its cursor (as the server sealed it): planned too.
    let sealed = mary.data(GROUPS, json!({})).await;
    let after = sealed["aggregatedFeed"]["pageInfo"]["endCursor"].clone();
    let body = both_ways(&server, &mary, GROUPS, json!({ "after": after })).await;
    assert!(
        body.contains(&format!("\"actionIds\":[\"{}\"]", posts[0])),
        "{body}"
    );
    assert!(executions(&server, "Groups", "planned").await >= 2);

    // The root's own argument refused: planned, with its path. A nested
    // one refused is left to async-graphql, which places it.
    let planned = executions(&server, "Groups", "planned").await;
    let refused = both_ways(&server, &mary, GROUPS, json!({ "after": "nonsense" })).await;
    assert!(
        refused.contains("\"path\":[\"aggregatedFeed\"]"),
        "{refused}"
    );
    assert_eq!(executions(&server, "Groups", "planned").await, planned + 2);
    let fallbacks = executions(&server, "Groups", "fallback").await;
    let nested = both_ways(&server, &mary, GROUPS, json!({ "items": 500 })).await;
    assert!(nested.contains("BAD_USER_INPUT"), "{nested}");
    // Planned reads off, then twice on: each ran on async-graphql.
    assert_eq!(
        executions(&server, "Groups", "fallback").await,
        fallbacks + 3
    );
    server.stop().await;
}

/// An action's comments, as the demo's panel and a list of actions ask
/// for them: pages by cursor, authors with and without a profile.
const COMMENTS: &str = "query Comments($a: ID!, $first: Int, $after: String, $who: ID!) { \
    action(actionId: $a) { commentCount comments(first: $first, after: $after) { __typename \
    edges { cursor node { __typename id commentId actionId authorId text created author { userId name } } } \
    pageInfo { hasNextPage endCursor } } } \
    actorFeed(userId: $who) { nodes { actionId last: comments(first: 1) { nodes { text } } \
    all: comments { nodes { ... on Node { id } author { name } } } } } }";

#[tokio::test]
async fn comments_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (ann, bob, open, _) = bob_posts_for_all_and_for_cat(&server).await;
    let other = bob.post_status("another", json!({})).await;
    let comment = "mutation($id: ID!, $t: String!) { comment(actionId: $id, text: $t) { id } }";
    // Ann has no profile: her comments' author has a null name.
    for (who, text) in [(&ann, "first"), (&bob, "second"), (&ann, "third")] {
        who.data(comment, json!({ "id": open, "t": text })).await;
    }
    bob.data(comment, json!({ "id": other, "t": "on the other" }))
        .await;
    let vars = |first: Value, after: Value| json!({ "a": open, "first": first, "after": after, "who": "bob" });

    let body = both_ways(&server, &ann, COMMENTS, vars(json!(2), Value::Null)).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    let page = &body["data"]["action"]["comments"];
    let texts: Vec<&Value> = page["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| &e["node"]["text"])
        .collect();
    assert_eq!(texts, [&json!("first"), &json!("second")], "{body}");
    assert_eq!(
        page["edges"][0]["node"]["author"]["name"],
        Value::Null,
        "{body}"
    );
    assert_eq!(
        page["edges"][1]["node"]["author"]["name"],
        json!("Bob"),
        "{body}"
    );
    assert_eq!(page["pageInfo"]["hasNextPage"], json!(true), "{body}");
    let lists = body["data"]["actorFeed"]["nodes"]
        .as_array()
        .expect("nodes");
    assert_eq!(lists.len(), 2, "{body}");
    assert_eq!(
        lists[0]["last"]["nodes"][0]["text"],
        json!("on the other"),
        "{body}"
    );
    assert_eq!(
        lists[1]["all"]["nodes"].as_array().map(Vec::len),
        Some(3),
        "{body}"
    );
    assert!(executions(&server, "Comments", "planned").await >= 1);

    // The next page, by the cursor the first one gave (the body above
    // holds cursors opened, for comparing).
    let first = ann.data(COMMENTS, vars(json!(2), Value::Null)).await;
    let after = first["action"]["comments"]["pageInfo"]["endCursor"].clone();
    let body = both_ways(&server, &ann, COMMENTS, vars(json!(2), after)).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    let page = &body["data"]["action"]["comments"];
    assert_eq!(page["edges"][0]["node"]["text"], json!("third"), "{body}");
    assert_eq!(page["pageInfo"]["hasNextPage"], json!(false), "{body}");
    assert!(executions(&server, "Comments", "planned").await >= 2);

    // A page too large and a damaged cursor are errors below the root:
    // left to async-graphql, which places them.
    let fallbacks = executions(&server, "Comments", "fallback").await;
    let body = both_ways(&server, &ann, COMMENTS, vars(json!(500), Value::Null)).await;
    assert!(body.contains("\"comments\""), "{body}");
    let body: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        body["errors"][0]["path"],
        json!(["action", "comments"]),
        "{body}"
    );
    let body = both_ways(&server, &ann, COMMENTS, vars(json!(2), json!("damaged"))).await;
    assert!(body.contains("\"errors\""), "{body}");
    assert_eq!(
        executions(&server, "Comments", "fallback").await,
        fallbacks + 6
    );
    server.stop().await;
}

/// A profile page: the viewer's and another user's relations, two levels
/// down.
const PROFILE: &str = "query Profile($first: Int, $after: String) { \
    viewer { userId name supervisor { userId name } assignments groups { __typename groupId kind role } \
    followers(first: $first, after: $after) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } } \
    following { nodes { userId followers { nodes { userId name supervisor { name } } } } } \
    friends { nodes { ... on Node { id } } } } \
    bob: user(userId: \"bob\") { assignments groups { groupId } supervisor { userId } } }";

#[tokio::test]
async fn a_profile_runs_planned_and_answers_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let service = server.service("acme");
    for (id, name) in [("ann", "Ann"), ("bob", "Bob"), ("fay", "Fay")] {
        server.client("acme", id).upsert_user(id, name).await;
    }
    for follower in ["bob", "cat", "dan"] {
        server.client("acme", follower).follow("ann").await;
    }
    ann.follow("bob").await;
    server.client("acme", "fay").follow("bob").await;
    ann.data("mutation { befriend(userId: \"dan\") }", json!({}))
        .await;
    for mutation in [
        "mutation { setSupervisor(userId: \"ann\", supervisorId: \"fay\") { userId } }",
        "mutation { setSupervisor(userId: \"fay\", supervisorId: \"bob\") { userId } }",
        "mutation { assign(userId: \"ann\", refId: \"applicant-1\") }",
        "mutation { assign(userId: \"bob\", refId: \"applicant-2\") }",
    ] {
        service.data(mutation, json!({})).await;
    }
    service.add_member("t-ops", "TEAM", "ann").await;
    service.add_member("t-ops", "TEAM", "bob").await;
    service.add_member("t-eng", "TEAM", "bob").await;

    let body = both_ways(&server, &ann, PROFILE, json!({ "first": 2 })).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    let me = &body["data"]["viewer"];
    assert_eq!(me["supervisor"]["name"], json!("Fay"), "{body}");
    assert_eq!(me["assignments"], json!(["applicant-1"]), "{body}");
    assert_eq!(
        me["followers"]["edges"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    assert_eq!(
        me["followers"]["pageInfo"]["hasNextPage"],
        json!(true),
        "{body}"
    );
    let following = &me["following"]["nodes"][0];
    assert_eq!(following["userId"], json!("bob"), "{body}");
    let fay = &following["followers"]["nodes"].as_array().expect("nodes")[1];
    assert_eq!(fay["supervisor"]["name"], json!("Bob"), "{body}");
    assert_eq!(
        me["friends"]["nodes"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );
    // Another's: no assignments shown, only the groups shared.
    assert_eq!(body["data"]["bob"]["assignments"], json!([]), "{body}");
    assert_eq!(
        body["data"]["bob"]["groups"],
        json!([{ "groupId": "t-ops" }]),
        "{body}"
    );
    assert!(executions(&server, "Profile", "planned").await >= 1);

    // The next page of followers, by the cursor the first one gave.
    let first = ann.data(PROFILE, json!({ "first": 2 })).await;
    let after = first["viewer"]["followers"]["pageInfo"]["endCursor"].clone();
    let body = both_ways(
        &server,
        &ann,
        PROFILE,
        json!({ "first": 2, "after": after }),
    )
    .await;
    assert!(body.contains("\"hasNextPage\":false"), "{body}");
    assert!(executions(&server, "Profile", "planned").await >= 2);

    // A page too large is an error below the root: left to async-graphql.
    let fallbacks = executions(&server, "Profile", "fallback").await;
    let body = both_ways(&server, &ann, PROFILE, json!({ "first": 500 })).await;
    assert!(body.contains("BAD_USER_INPUT"), "{body}");
    assert_eq!(
        executions(&server, "Profile", "fallback").await,
        fallbacks + 3
    );
    server.stop().await;
}

/// An operator's view of the tenant's webhooks and one's deliveries.
const HOOKS: &str = "query Hooks($id: ID!, $state: DeliveryState!, $first: Int, $after: String) { \
    webhooks { __typename webhookId url events enabled createdAt paused pausedReason pausedAt \
    previousSecretExpiresAt } \
    webhook(webhookId: $id) { webhookId enabled \
    deliveries(state: $state, first: $first, after: $after) { __typename \
    edges { cursor node { __typename messageId eventType payload state attempts lastError \
    lastStatus nextAttemptAt queuedAt diedAt } } pageInfo { hasNextPage endCursor } } \
    waiting: deliveries(state: PENDING) { nodes { messageId } } } }";

#[tokio::test]
async fn webhooks_run_planned_and_answer_as_the_general_executor_does() {
    use crate::webhooks::{register, start, Receiver};
    let Some(server) = start(Backend::Embedded, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service("acme");
    let (hook, _) = register(&app, &receiver.url, json!(["ACTION_RECORDED"])).await;
    // Disabled: what comes due is kept as dead deliveries, nothing sent.
    let disable = "mutation($id: ID!) { disableWebhook(webhookId: $id) { enabled } }";
    app.data(disable, json!({ "id": hook })).await;
    let mary = server.client("acme", "mary");
    for n in 0..3 {
        mary.post_status(&format!("kept {n}"), json!({})).await;
    }
    let vars = |after: Value| json!({ "id": hook, "state": "DEAD", "first": 2, "after": after });
    let deadline = std::time::Instant::now() + crate::common::PATIENCE;
    loop {
        let data = app
            .data(HOOKS, json!({ "id": hook, "state": "DEAD", "first": 3 }))
            .await;
        let dead = data["webhook"]["deliveries"]["edges"]
            .as_array()
            .map_or(0, Vec::len);
        if dead == 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "3 dead deliveries: {data}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let body = both_ways(&server, &app, HOOKS, vars(Value::Null)).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    let hooks = &body["data"]["webhooks"];
    assert_eq!(hooks[0]["enabled"], json!(false), "{body}");
    assert_eq!(hooks[0]["events"], json!(["ACTION_RECORDED"]), "{body}");
    let page = &body["data"]["webhook"]["deliveries"];
    assert_eq!(page["edges"].as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(page["edges"][0]["node"]["state"], json!("DEAD"), "{body}");
    assert!(page["edges"][0]["node"]["diedAt"].is_string(), "{body}");
    assert_eq!(page["pageInfo"]["hasNextPage"], json!(true), "{body}");
    assert_eq!(
        body["data"]["webhook"]["waiting"]["nodes"],
        json!([]),
        "{body}"
    );
    assert!(executions(&server, "Hooks", "planned").await >= 1);

    // The next page, by the cursor the first one gave.
    let first = app.data(HOOKS, vars(Value::Null)).await;
    let after = first["webhook"]["deliveries"]["pageInfo"]["endCursor"].clone();
    let body = both_ways(&server, &app, HOOKS, vars(after)).await;
    assert!(body.contains("\"hasNextPage\":false"), "{body}");
    assert!(executions(&server, "Hooks", "planned").await >= 2);

    // A caller without the role, and an unknown state: async-graphql's
    // errors, with their codes.
    let fallbacks = executions(&server, "Hooks", "fallback").await;
    let body = both_ways(&server, &mary, HOOKS, vars(Value::Null)).await;
    assert!(body.contains("FORBIDDEN"), "{body}");
    assert_eq!(
        executions(&server, "Hooks", "fallback").await,
        fallbacks + 3
    );
    let bad = json!({ "id": hook, "state": "GONE" });
    let body = both_ways(&server, &app, HOOKS, bad).await;
    assert!(body.contains("\"errors\""), "{body}");
    drop(receiver);
    server.stop().await;
}
