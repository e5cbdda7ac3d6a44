//! `serve --demo`: the seeded organisation as the API shows it, seeding only
//! once, dev mode only, and the page's files.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use riverfeed::auth::{Authenticator, JwtVerifier};
use riverfeed::clock::{Clock, SystemClock};
use riverfeed::demo::{self, History, Seeded};
use riverfeed::relevancy::BumpRules;
use riverfeed::server::{self, ServeOptions};
use serde_json::{json, Value};

use crate::common::{store_url, Backend, Client, Stopped, TestServer, TestStore};

fn with_demo(store: String) -> ServeOptions {
    let mut options = ServeOptions::new(store);
    options.demo = true;
    options
}

async fn start_demo(backend: Backend) -> Option<TestServer> {
    let (store, dir) = store_url(backend)?;
    Some(TestServer::start_with(Stopped { store, dir }, with_demo).await)
}

/// The members of the `Descriptor` union, from the schema itself, so a
/// descriptor type added later must be seeded too.
fn descriptor_types() -> BTreeSet<String> {
    let sdl = riverfeed::api::sdl();
    let line = sdl
        .lines()
        .find_map(|line| line.strip_prefix("union Descriptor = "))
        .expect("a Descriptor union in the schema");
    line.split('|').map(|t| t.trim().to_owned()).collect()
}

/// Every item of `client`'s feed, page by page.
async fn whole_feed(client: &Client) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = client
            .data(
                "query($after: String) { feed(first: 100, after: $after) {
                    edges { node { actionId reason { kind rule by }
                        action { id scope commentCount likeCount descriptor { __typename } } } }
                    pageInfo { hasNextPage endCursor } } }",
                json!({ "after": after }),
            )
            .await;
        let feed = &data["feed"];
        items.extend(
            feed["edges"]
                .as_array()
                .expect("edges")
                .iter()
                .map(|e| e["node"].clone()),
        );
        if feed["pageInfo"]["hasNextPage"] != true {
            return items;
        }
        after = feed["pageInfo"]["endCursor"].clone();
    }
}

async fn seeds_the_whole_organisation(backend: Backend) {
    let Some(server) = start_demo(backend).await else {
        return;
    };
    let roster = demo::roster();
    // Times are relative to now, so the size of the history is not.
    let history = History::generate(&roster, SystemClock.now());

    let mut types = BTreeSet::new();
    let mut scopes = BTreeSet::new();
    let mut reasons = BTreeSet::new();
    let mut actions: BTreeMap<String, Value> = BTreeMap::new();
    for person in &roster.users {
        let client = server.client(demo::TENANT, person.id);
        let feed = whole_feed(&client).await;
        assert!(
            feed.len() >= 10,
            "{}'s feed has {} items",
            person.id,
            feed.len()
        );
        for item in feed {
            let action = &item["action"];
            assert!(
                action.is_object(),
                "{}: every item readable: {item}",
                person.id
            );
            types.insert(
                action["descriptor"]["__typename"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
            scopes.insert(action["scope"].as_str().unwrap().to_owned());
            reasons.insert(item["reason"]["kind"].as_str().unwrap().to_owned());
            actions.insert(action["id"].as_str().unwrap().to_owned(), action.clone());
        }

        // The roster the page reads is what the store holds.
        let data = client
            .data(
                "{ viewer { name supervisor { id } assignments groups { groupId kind role } } }",
                json!({}),
            )
            .await;
        let viewer = &data["viewer"];
        assert_eq!(viewer["name"], person.name);
        assert_eq!(viewer["supervisor"]["id"].as_str(), person.supervisor);
        assert_eq!(viewer["assignments"], json!(person.assignments));
        let groups: BTreeSet<(String, String)> = viewer["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["groupId"].as_str().unwrap().to_owned(),
                    g["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let expected = BTreeSet::from([
            (person.department.to_owned(), "DEPARTMENT".to_owned()),
            (person.team.to_owned(), "TEAM".to_owned()),
        ]);
        assert_eq!(groups, expected, "{}'s groups", person.id);
    }

    assert_eq!(types, descriptor_types(), "every descriptor type is seeded");
    assert_eq!(
        scopes,
        BTreeSet::from(["DEPARTMENT", "PUBLIC", "RESTRICTED", "TEAM"].map(String::from))
    );
    for kind in [
        "OWN",
        "FOLLOWS",
        "FRIEND",
        "TEAM",
        "DEPARTMENT",
        "RESTRICTED",
        "BUMPED",
    ] {
        assert!(
            reasons.contains(kind),
            "some item is there as {kind}: {reasons:?}"
        );
    }
    // Each action reaches at least its actor, so together the feeds hold all.
    assert_eq!(actions.len(), history.actions.len());
    let count = |field: &str| {
        actions
            .values()
            .map(|a| a[field].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(count("commentCount"), history.comments.len() as u64);
    assert_eq!(count("likeCount"), history.likes.len() as u64);

    // Every applicant has a slice, and it is about them.
    let rita = server.client(demo::TENANT, "rita");
    for applicant in &roster.applicants {
        let data = rita
            .data(
                "query($ref: String!) { slice(refId: $ref, first: 50) { nodes { refIds } } }",
                json!({ "ref": applicant.id }),
            )
            .await;
        let nodes = data["slice"]["nodes"].as_array().unwrap();
        assert!(!nodes.is_empty(), "{} has a slice", applicant.id);
        for node in nodes {
            assert!(node["refIds"]
                .as_array()
                .unwrap()
                .contains(&json!(applicant.id)));
        }
    }
    server.stop().await;
}

async fn a_second_start_seeds_nothing(backend: Backend) {
    let Some(server) = start_demo(backend).await else {
        return;
    };
    let carol = server.client(demo::TENANT, "carol");
    let before = whole_feed(&carol).await.len();
    let stopped = server.stop_keeping_data().await;
    let server = TestServer::start_with(stopped, with_demo).await;
    let carol = server.client(demo::TENANT, "carol");
    assert_eq!(whole_feed(&carol).await.len(), before);
    let data = carol
        .data(
            "{ slice(refId: \"applicant-mary-fanning\", first: 100) { nodes { id } } }",
            json!({}),
        )
        .await;
    let ids: Vec<_> = data["slice"]["nodes"].as_array().unwrap().to_vec();
    let unique: HashSet<_> = ids.iter().map(|n| n["id"].to_string()).collect();
    assert_eq!(unique.len(), ids.len(), "no action twice");
    server.stop().await;
}

async fn seeding_reports_what_it_did(backend: Backend) {
    let Some(test) = TestStore::open(backend).await else {
        return;
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let first = demo::seed(&test.store, &clock, BumpRules::default())
        .await
        .expect("seeds");
    let history = History::generate(&demo::roster(), clock.now());
    assert_eq!(
        first,
        Seeded::Fresh {
            actions: history.actions.len(),
            comments: history.comments.len(),
            likes: history.likes.len(),
        }
    );
    let again = demo::seed(&test.store, &clock, BumpRules::default())
        .await
        .expect("seeds");
    assert_eq!(again, Seeded::AlreadyThere);
    test.remove().await;
}

crate::on_both_backends!(
    seeds_the_whole_organisation,
    a_second_start_seeds_nothing,
    seeding_reports_what_it_did,
);

#[tokio::test]
async fn demo_mode_refuses_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = with_demo(format!("embedded:{}", dir.path().display()));
    options.auth = Arc::new(Authenticator::Jwt(Box::new(JwtVerifier::hs256(
        b"0123456789abcdef0123456789abcdef",
        None,
        None,
    ))));
    let Err(err) = server::start(options).await else {
        panic!("demo mode started with tokens configured");
    };
    assert!(
        format!("{err:#}").contains("--demo needs dev mode"),
        "{err:#}"
    );
}

#[tokio::test]
async fn the_demo_page_and_its_files_are_served() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let get = |path: &str| reqwest::get(format!("{}{path}", server.base));
    let page = get("/demo/").await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("connect-src 'self'"), "{policy}");
    let html = page.text().await.unwrap();

    // Everything the page links to is here, with its type.
    let mut linked = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for part in html.split(attr).skip(1) {
            let target = part.split('"').next().unwrap();
            if !target.starts_with('#') {
                linked.push(target.to_owned());
            }
        }
    }
    linked.sort();
    linked.dedup();
    assert_eq!(linked, ["app.js", "favicon.svg", "style.css"]);
    for (file, kind) in [
        ("app.js", "text/javascript"),
        ("style.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
        ("roster.json", "application/json"),
    ] {
        let response = get(&format!("/demo/{file}")).await.unwrap();
        assert_eq!(response.status(), 200, "{file}");
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(kind), "{file}: {content_type}");
    }
    assert_eq!(get("/demo/nothing.js").await.unwrap().status(), 404);

    // Without --demo the roster says so: the page tells how to seed.
    let roster: Value = get("/demo/roster.json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(roster["seeded"], false);
    assert_eq!(roster["tenant"], demo::TENANT);
    assert_eq!(
        roster["users"].as_array().unwrap().len(),
        demo::roster().users.len()
    );
    server.stop().await;
}
