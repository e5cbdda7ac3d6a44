//! A tenant filled as clients fill one, through the GraphQL API: users with
//! and without names, follows, friends, a team and a department, a group
//! feed, actions of every built-in descriptor type and every scope, some
//! hidden, deleted, expiring or narrowed, comments (pages of them), likes,
//! bumps, notifications, markers, a supervisor and assignments. The reader `bob`'s
//! feed holds more than a full page. Then the ids, global ids and cursors
//! the documents are given, read back as each viewer sees them.

use std::time::Duration;

use riverfeed::clock::ManualClock;
use serde_json::{json, Value};

use crate::common::{Client, TestServer, PATIENCE};

pub const TENANT: &str = "acme";

/// Users with a display name; `gus` acts without one (his actions reach
/// the reader through a group the reader follows).
const NAMED: &[(&str, &str)] = &[
    ("ann", "Ann Archer"),
    ("bob", "Bob Baker"),
    ("cat", "Cat Cole"),
    ("dan", "Dan Dunn"),
    ("eve", "Eve \u{c9}lan"),
    ("fay", "Fay Ford"),
    ("hal", "hal"),
];
const ACTORS: &[&str] = &[
    "ann", "cat", "dan", "gus", "hal", "eve", "bob", "ann", "cat",
];
const SCORES: [f64; 4] = [4.0, 3.5, 0.0, 5.0];
const WORDS: &[&str] = &[
    "launch",
    "hiring",
    "roadmap",
    "coffee",
    "quarterly",
    "review",
    "offsite",
    "demo",
];

/// Who posts a document.
#[derive(Clone, Debug)]
pub struct Viewer {
    pub label: &'static str,
    /// Tenant, user and roles, as dev mode takes them from headers.
    pub identity: Option<(&'static str, &'static str, Option<&'static str>)>,
}

impl Viewer {
    const fn user(label: &'static str, user: &'static str) -> Self {
        Self {
            label,
            identity: Some((TENANT, user, None)),
        }
    }
}

/// The viewers documents run as: a reader with full pages, an actor of
/// hidden and restricted actions, a restricted action's reader, a user the
/// tenant never heard of, the application's backend, an admin, and no one.
pub const VIEWERS: &[Viewer] = &[
    Viewer::user("reader bob", "bob"),
    Viewer::user("actor ann", "ann"),
    Viewer::user("restricted reader eve", "eve"),
    Viewer::user("unknown user", "newcomer"),
    Viewer {
        label: "service",
        identity: Some((TENANT, "app-backend", Some("service"))),
    },
    Viewer {
        label: "admin",
        identity: Some((TENANT, "root", Some("admin"))),
    },
    Viewer {
        label: "anonymous",
        identity: None,
    },
];

/// What the tenant holds, as documents name it.
#[derive(Debug, Default)]
pub struct Fixture {
    pub users: Vec<String>,
    pub actions: Vec<String>,
    /// Global ids of every kind (actions, users, comments, feed items,
    /// notifications and their groups).
    pub global_ids: Vec<String>,
    pub groups: Vec<String>,
    pub refs: Vec<String>,
    /// Real cursors of several lists (feed, slice, comments,
    /// notifications…), each valid somewhere.
    pub cursors: Vec<String>,
    /// The same, by the field that issued them (`feed`, `comments`…).
    pub cursors_of: Vec<(&'static str, String)>,
    pub words: Vec<String>,
    /// The tenant's webhooks (one, disabled: its deliveries are kept dead,
    /// and nothing is sent).
    pub webhooks: Vec<String>,
    /// Counts of what was written, for the report.
    pub written: Vec<(&'static str, usize)>,
}

/// One recorded action and what became of it.
struct Recorded {
    id: String,
    actor: &'static str,
}

fn descriptor(i: usize, actor: &str) -> Value {
    let word = WORDS[i % WORDS.len()];
    let applicant = format!("applicant-{}", i % 3 + 1);
    let names = |id: &str| format!("{} {}", id.replace('-', " "), i % 5);
    match i % 5 {
        0 | 4 if i % 10 != 9 => {
            json!({ "statusPost": { "text": format!("{word} update {i}: see the {} notes", WORDS[(i + 3) % WORDS.len()]) } })
        }
        1 => json!({ "applicationRating": {
            "raterId": actor, "raterName": format!("{actor} the rater"),
            "positionId": "pos-1", "positionName": "Engineer",
            "applicantId": applicant, "applicantName": names(&applicant),
            "ratingScore": SCORES[i % 4], "ratingText": format!("{word} went well"),
            "tags": if i.is_multiple_of(2) { json!(["strong", "remote"]) } else { json!([]) },
        } }),
        2 => json!({ "newApplicant": {
            "applicantId": applicant, "applicantName": names(&applicant),
            "positionId": "pos-2", "positionName": "Designer",
        } }),
        3 => json!({ "applicantHired": {
            "applicantId": applicant, "applicantName": names(&applicant),
            "positionId": "pos-1", "positionName": "Engineer",
            "hiredById": actor, "hiredByName": format!("{actor} hiring"),
        } }),
        _ => json!({ "applicantRatingRequested": {
            "applicantId": applicant, "applicantName": names(&applicant),
            "positionId": "pos-1", "positionName": "Engineer",
            "raterId": "bob", "raterName": "Bob Baker",
            "requestedById": actor, "requestedByName": format!("{actor} asking"),
        } }),
    }
}

/// Scope, readers and groups of the `i`th action by `actor`.
fn audience(i: usize, actor: &str) -> Value {
    let mut input = json!({});
    if i % 11 == 5 {
        let readers = if i.is_multiple_of(2) {
            json!(["bob", "eve"])
        } else {
            json!(["eve"])
        };
        input = json!({ "scope": "RESTRICTED", "readers": readers });
    } else if i % 7 == 3 && ["ann", "eve", "bob"].contains(&actor) {
        input = json!({ "scope": "TEAM" });
    } else if i % 9 == 4 && ["cat", "bob"].contains(&actor) {
        input = json!({ "scope": "DEPARTMENT" });
    }
    if ["dan", "gus"].contains(&actor) && i.is_multiple_of(3) {
        input["to"] = json!(["t-ops"]);
    }
    input
}

async fn record(client: &Client, input: Value) -> String {
    let data = client
        .data(
            "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }",
            json!({ "input": input }),
        )
        .await;
    data["recordAction"]["actionId"]
        .as_str()
        .expect("an action id")
        .to_owned()
}

/// Fills the tenant; `clock` moves a second between writes, so every
/// action has a time of its own.
pub async fn fill(server: &TestServer, clock: &ManualClock) -> Fixture {
    let user = |id: &str| server.client(TENANT, id);
    let service = server.service(TENANT);
    let mut fixture = Fixture::default();
    for (id, name) in NAMED {
        user(id).upsert_user(id, name).await;
    }
    for (group, kind, members) in [
        ("t-core", "TEAM", &["ann", "bob", "eve"][..]),
        ("d-sales", "DEPARTMENT", &["bob", "cat", "fay"][..]),
        ("t-ops", "TEAM", &["dan", "gus"][..]),
    ] {
        for member in members {
            service.add_member(group, kind, member).await;
        }
    }
    let bob = user("bob");
    for followed in ["ann", "cat", "hal"] {
        bob.follow(followed).await;
    }
    for (follower, followed) in [
        ("eve", "bob"),
        ("ann", "bob"),
        ("cat", "bob"),
        ("fay", "bob"),
        ("cat", "ann"),
        ("dan", "ann"),
        ("eve", "ann"),
        ("fay", "ann"),
        ("fay", "cat"),
    ] {
        user(follower).follow(followed).await;
    }
    bob.data("mutation { befriend(userId: \"dan\") }", json!({}))
        .await;
    bob.data("mutation { followGroup(groupId: \"t-ops\") }", json!({}))
        .await;
    for mutation in [
        "mutation { setSupervisor(userId: \"bob\", supervisorId: \"fay\") { userId } }",
        "mutation { setSupervisor(userId: \"eve\", supervisorId: \"ann\") { userId } }",
        "mutation { assign(userId: \"bob\", refId: \"applicant-1\") }",
        "mutation { assign(userId: \"eve\", refId: \"applicant-2\") }",
    ] {
        service.data(mutation, json!({})).await;
    }

    let hook = service
        .data(
            "mutation { registerWebhook(url: \"http://127.0.0.1:9/hook\", \
             events: [ACTION_RECORDED, COMMENT_ADDED]) { webhook { webhookId } } }",
            json!({}),
        )
        .await;
    let hook = hook["registerWebhook"]["webhook"]["webhookId"]
        .as_str()
        .expect("a webhook id")
        .to_owned();
    service
        .data(
            "mutation($id: ID!) { disableWebhook(webhookId: $id) { enabled } }",
            json!({ "id": hook }),
        )
        .await;
    fixture.webhooks.push(hook);

    let mut recorded = Vec::new();
    for i in 0..54 {
        clock.advance(1_000);
        let actor = ACTORS[i % ACTORS.len()];
        let mut input = audience(i, actor);
        input["descriptor"] = descriptor(i, actor);
        let refs: [&[&str]; 3] = [&["job-1"], &["job-2"], &[]];
        let tags: [&[&str]; 3] = [&["news"], &[], &["news", "team"]];
        input["refIds"] = json!(refs[i % 3]);
        input["tags"] = json!(tags[i % 3]);
        if i % 10 == 6 {
            input["expiresAt"] = json!(crate::common::iso(
                crate::common::CLOCK_START + 30 * 86_400_000
            ));
        }
        let id = record(&user(actor), input).await;
        recorded.push(Recorded { id, actor });
    }
    drain(server, clock).await;
    fixture.written.push(("actions", recorded.len()));

    // Comments: a long thread (two pages of comments), replies, and
    // comments that bump (a participant, the reader's supervisor, a
    // department colleague).
    let by = |actor: &'static str| {
        recorded
            .iter()
            .filter(move |a| a.actor == actor)
            .map(|a| a.id.clone())
    };
    let thread = by("ann").next().expect("an action by ann");
    let mut comments = 0;
    for n in 0..30 {
        clock.advance(100);
        let author = ["bob", "cat", "dan", "eve", "fay"][n % 5];
        comment(
            &user(author),
            &thread,
            &format!("thread {n}: {}", WORDS[n % WORDS.len()]),
        )
        .await;
        comments += 1;
    }
    for (author, actor, nth) in [
        ("bob", "cat", 0),
        ("ann", "bob", 0),
        ("cat", "bob", 1),
        ("fay", "cat", 1),
        ("cat", "ann", 2),
        ("eve", "bob", 2),
        ("bob", "ann", 3),
    ] {
        clock.advance(1_000);
        let id = by(actor).nth(nth).expect("an action");
        comment(&user(author), &id, &format!("{author} on {actor}'s")).await;
        comments += 1;
    }
    fixture.written.push(("comments", comments));

    // Likes of bob's actions and by bob; a bell opened between them.
    let mut likes = 0;
    for (liker, actor, nth) in [("ann", "bob", 0), ("cat", "bob", 0), ("bob", "ann", 1)] {
        like(&user(liker), &by(actor).nth(nth).expect("an action")).await;
        likes += 1;
    }
    bob.data("mutation { markSeen { unseenCount } }", json!({}))
        .await;
    for (liker, actor, nth) in [("dan", "bob", 1), ("eve", "bob", 0), ("cat", "ann", 0)] {
        clock.advance(1_000);
        like(&user(liker), &by(actor).nth(nth).expect("an action")).await;
        likes += 1;
    }
    fixture.written.push(("likes", likes));

    // What becomes of some actions: hidden, deleted, narrowed, and one
    // hidden from bob's feed alone.
    let hidden = by("cat").nth(3).expect("an action");
    user("cat")
        .data(
            "mutation($id: ID!) { hideAction(actionId: $id) { hidden } }",
            json!({ "id": hidden }),
        )
        .await;
    let deleted = by("gus").next().expect("an action");
    user("gus")
        .data(
            "mutation($id: ID!) { deleteAction(actionId: $id) }",
            json!({ "id": deleted }),
        )
        .await;
    let narrowed = by("ann").nth(4).expect("an action");
    user("ann")
        .data(
            "mutation($id: ID!) { setActionScope(actionId: $id, scope: RESTRICTED, readers: [\"eve\"]) { scope } }",
            json!({ "id": narrowed }),
        )
        .await;
    bob.data(
        "mutation($id: ID!) { hideFeedItem(actionId: $id) }",
        json!({ "id": by("hal").next().expect("an action") }),
    )
    .await;
    drain(server, clock).await;

    fixture.users = NAMED.iter().map(|(id, _)| id.to_string()).collect();
    fixture
        .users
        .extend(["gus", "newcomer", "nobody"].map(String::from));
    fixture.actions = recorded.iter().map(|a| a.id.clone()).collect();
    fixture.actions.push("0123456789abcdef01234567".to_owned());
    fixture.groups = ["t-core", "d-sales", "t-ops", "no-such-group"]
        .map(String::from)
        .into();
    fixture.refs = [
        "job-1",
        "job-2",
        "applicant-1",
        "applicant-2",
        "pos-1",
        "none",
    ]
    .map(String::from)
    .into();
    fixture.words = WORDS.iter().map(|w| w.to_string()).collect();
    fixture
        .words
        .extend(["hir", "ZZZ nothing", "update 1", ""].map(String::from));
    read_back(server, &mut fixture).await;
    fixture
}

async fn comment(client: &Client, action: &str, text: &str) {
    client
        .data(
            "mutation($id: ID!, $t: String!) { comment(actionId: $id, text: $t) { commentId } }",
            json!({ "id": action, "t": text }),
        )
        .await;
}

async fn like(client: &Client, action: &str) {
    client
        .data(
            "mutation($id: ID!) { like(actionId: $id) { likeCount } }",
            json!({ "id": action }),
        )
        .await;
}

/// Waits until every job queue (fan-outs, bumps, notices, cleanups) is
/// empty: the store holds still while the documents run. The server's
/// time is `clock`'s: a job that waits for a time (a retry after its lease,
/// a look again later) waits for the clock, so once the queues have been
/// busy a while, the clock moves on as time would (and says so).
pub async fn drain(server: &TestServer, clock: &ManualClock) {
    let started = tokio::time::Instant::now();
    let deadline = started + crate::common::DELIVERY_PATIENCE + PATIENCE;
    let mut moved = 0;
    loop {
        let text = reqwest::get(format!("{}/metrics", server.base))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body");
        let busy: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("riverfeed_job_queue_depth{") && !l.ends_with(" 0"))
            .collect();
        if busy.is_empty() {
            if moved > 0 {
                eprintln!(
                    "differential fixture: the queues drained once the clock moved {moved} ms"
                );
            }
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker never drained (the clock moved {moved} ms): {busy:?}"
        );
        if started.elapsed() > PATIENCE / 3 {
            if moved == 0 {
                eprintln!("differential fixture: queues still busy, the clock moves on: {busy:?}");
            }
            clock.advance(100);
            moved += 100;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Global ids and cursors as the viewers read them.
async fn read_back(server: &TestServer, fixture: &mut Fixture) {
    let admin = server.client_with(Some((TENANT, "root", Some("admin"))));
    let ids = admin
        .data(
            "query($a: [ID!], $u1: ID, $u2: ID, $u3: ID) {
                actions(actionIds: $a) { id comments(first: 3) { nodes { id } pageInfo { endCursor } } }
                u1: user(userId: $u1) { id } u2: user(userId: $u2) { id } u3: user(userId: $u3) { id }
            }",
            json!({ "a": fixture.actions.iter().take(100).collect::<Vec<_>>(), "u1": "bob", "u2": "gus", "u3": "ann" }),
        )
        .await;
    for action in ids["actions"].as_array().expect("actions").iter() {
        push_str(&mut fixture.global_ids, &action["id"]);
        for comment in action["comments"]["nodes"].as_array().into_iter().flatten() {
            push_str(&mut fixture.global_ids, &comment["id"]);
        }
        push_of(
            fixture,
            "comments",
            &action["comments"]["pageInfo"]["endCursor"],
        );
    }
    for key in ["u1", "u2", "u3"] {
        push_str(&mut fixture.global_ids, &ids[key]["id"]);
    }
    for reader in ["bob", "ann"] {
        let client = server.client(TENANT, reader);
        let data = client
            .data(
                "{
                    feed(first: 10) { nodes { id } pageInfo { startCursor endCursor } }
                    slice(refId: \"job-1\", first: 4) { pageInfo { endCursor } }
                    actorFeed(userId: \"ann\", first: 4) { pageInfo { endCursor } }
                    groupFeed(groupId: \"t-ops\", first: 2) { pageInfo { endCursor } }
                    discussions(first: 1) { pageInfo { endCursor } }
                    aggregatedFeed(first: 2) { pageInfo { endCursor } }
                    notifications(first: 2) { nodes { id notifications(first: 2) { id } } pageInfo { endCursor } }
                }",
                json!({}),
            )
            .await;
        for item in data["feed"]["nodes"]
            .as_array()
            .expect("feed")
            .iter()
            .take(3)
        {
            push_str(&mut fixture.global_ids, &item["id"]);
        }
        for group in data["notifications"]["nodes"].as_array().expect("groups") {
            push_str(&mut fixture.global_ids, &group["id"]);
            for single in group["notifications"].as_array().into_iter().flatten() {
                push_str(&mut fixture.global_ids, &single["id"]);
            }
        }
        for list in [
            "feed",
            "slice",
            "actorFeed",
            "groupFeed",
            "discussions",
            "aggregatedFeed",
            "notifications",
        ] {
            push_str(&mut fixture.cursors, &data[list]["pageInfo"]["endCursor"]);
        }
        push_str(
            &mut fixture.cursors,
            &data["feed"]["pageInfo"]["startCursor"],
        );
        // Where each stopped reading: the reader in both feeds, the actor
        // in her home feed alone.
        let marked: &[(&str, &str)] = match reader {
            "bob" => &[("HOME", "feed"), ("NOTIFICATIONS", "notifications")],
            _ => &[("HOME", "feed")],
        };
        for (feed, list) in marked {
            let cursor = &data[*list]["pageInfo"]["endCursor"];
            assert!(cursor.is_string(), "{reader}'s {list} has a page");
            client
                .data(
                    "mutation($f: MarkerFeed!, $c: String!) { setMarker(feed: $f, cursor: $c) { version } }",
                    json!({ "f": feed, "c": cursor }),
                )
                .await;
        }
    }
    let bob_feed = server
        .client(TENANT, "bob")
        .data("{ feed(first: 100) { edges { cursor } } }", json!({}))
        .await;
    let items = bob_feed["feed"]["edges"].as_array().expect("edges").len();
    assert!(
        items >= 26,
        "the reader's feed holds more than a page: {items}"
    );
    fixture.written.push(("items in bob's feed", items));
    fixture.cursors.sort();
    fixture.cursors.dedup();
    fixture.global_ids.sort();
    fixture.global_ids.dedup();
}

/// A cursor `field` issued: for that field, and among every cursor.
fn push_of(fixture: &mut Fixture, field: &'static str, value: &Value) {
    if let Some(s) = value.as_str() {
        fixture.cursors_of.push((field, s.to_owned()));
        fixture.cursors.push(s.to_owned());
    }
}

fn push_str(into: &mut Vec<String>, value: &Value) {
    if let Some(s) = value.as_str() {
        into.push(s.to_owned());
    }
}
