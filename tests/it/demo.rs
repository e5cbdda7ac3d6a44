//! `serve --demo`: the seeded organisation as the API shows it, seeding only
//! once, dev mode only, and the page's files.

use std::collections::BTreeSet;
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

/// The types of the built-in descriptor file, so a type added to it must be
/// seeded too.
fn descriptor_types() -> BTreeSet<String> {
    riverfeed::descriptor::Catalog::builtin()
        .types()
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

/// `first` items of `client`'s feed, or all of them.
async fn feed(client: &Client, first: Option<usize>) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = client
            .data(
                "query($after: String) { feed(first: 100, after: $after) {
                    edges { node { actionId reason { kind rule by }
                        action { actionId scope commentCount likeCount descriptor { __typename } } } }
                    pageInfo { hasNextPage endCursor } } }",
                json!({ "after": after }),
            )
            .await;
        let page = &data["feed"];
        items.extend(
            page["edges"]
                .as_array()
                .expect("edges")
                .iter()
                .map(|e| e["node"].clone()),
        );
        if page["pageInfo"]["hasNextPage"] != true || first.is_some_and(|n| items.len() >= n) {
            return items;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// One seeding: what the API shows of it, then a restart that must seed
/// nothing more. Seeding is written once above the storage port, so the
/// embedded store proves it (MongoDB holds the same port,
/// `store_suite::mongodb::`, and records histories through the API in
/// `models::mongodb::`).
async fn seeds_the_organisation_once(backend: Backend) {
    let Some(server) = start_demo(backend).await else {
        return;
    };
    let roster = demo::roster();
    // Times are relative to now, so the size of the history is not.
    let history = History::generate(&roster, SystemClock.now());

    let mut types = BTreeSet::new();
    let mut scopes = BTreeSet::new();
    let mut reasons = BTreeSet::new();
    for person in &roster.users {
        let client = server.client(demo::TENANT, person.id);
        // Carol (Head of Talent) follows everyone: all of hers; a page of
        // everyone else's.
        let items = feed(&client, (person.id != "carol").then_some(100)).await;
        assert!(
            items.len() >= 10,
            "{}'s feed has {} items",
            person.id,
            items.len()
        );
        for item in &items {
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
        }
        if person.id == "carol" {
            let public = history
                .actions
                .iter()
                .filter(|a| a.scope == riverfeed::model::Scope::Public)
                .count();
            let seen = items
                .iter()
                .filter(|i| i["action"]["scope"] == "PUBLIC")
                .count();
            assert_eq!(seen, public, "carol sees every public action");
            let comments: u64 = items
                .iter()
                .map(|i| i["action"]["commentCount"].as_u64().unwrap())
                .sum();
            assert_eq!(
                comments,
                history.comments.len() as u64,
                "comments are on public actions"
            );
        }

        // The roster the page reads is what the store holds.
        let data = client
            .data(
                "{ viewer { name supervisor { userId } assignments groups { groupId kind role } } }",
                json!({}),
            )
            .await;
        let viewer = &data["viewer"];
        assert_eq!(viewer["name"], person.name);
        assert_eq!(viewer["supervisor"]["userId"].as_str(), person.supervisor);
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

    // Every applicant has a slice, and it is about them.
    let rita = server.client(demo::TENANT, "rita");
    let slice = |applicant: &'static str| {
        let rita = &rita;
        async move {
            let data = rita
                .data(
                    "query($ref: String!) { slice(refId: $ref, first: 50) { nodes { actionId refIds } } }",
                    json!({ "ref": applicant }),
                )
                .await;
            data["slice"]["nodes"].as_array().unwrap().to_vec()
        }
    };
    for applicant in &roster.applicants {
        let nodes = slice(applicant.id).await;
        assert!(!nodes.is_empty(), "{} has a slice", applicant.id);
        for node in &nodes {
            assert!(node["refIds"]
                .as_array()
                .unwrap()
                .contains(&json!(applicant.id)));
        }
    }

    // A second start with the same data seeds nothing.
    let carol_before = feed(&server.client(demo::TENANT, "carol"), None)
        .await
        .len();
    let mary_before = slice("applicant-mary-fanning").await.len();
    let stopped = server.stop_keeping_data().await;
    let server = TestServer::start_with(stopped, with_demo).await;
    let carol = server.client(demo::TENANT, "carol");
    assert_eq!(feed(&carol, None).await.len(), carol_before);
    let rita = server.client(demo::TENANT, "rita");
    let data = rita
        .data(
            "{ slice(refId: \"applicant-mary-fanning\", first: 50) { nodes { actionId } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        data["slice"]["nodes"].as_array().unwrap().len(),
        mary_before
    );
    server.stop().await;
}

#[tokio::test]
async fn seeds_the_organisation_once_on_the_embedded_store() {
    seeds_the_organisation_once(Backend::Embedded).await
}

#[tokio::test]
async fn seeding_reports_what_it_did_and_happens_once() {
    let test = TestStore::open(Backend::Embedded).await.expect("embedded");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let first = demo::seed(
        &test.store,
        &clock,
        BumpRules::default(),
        Default::default(),
    )
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
    let again = demo::seed(
        &test.store,
        &clock,
        BumpRules::default(),
        Default::default(),
    )
    .await
    .expect("seeds");
    assert_eq!(again, Seeded::AlreadyThere);
    test.remove().await;
}

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

/// A start that fails (here: its port is taken) leaves no data directory
/// of its own behind, so the next start is a first start again.
#[tokio::test]
async fn a_failed_start_leaves_no_data_directory_behind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let mut options = ServeOptions::new(format!("embedded:{}", dir.display()));
    options.listen = taken.local_addr().unwrap();
    let Err(err) = server::start(options).await else {
        panic!("started on a port in use");
    };
    assert!(format!("{err:#}").contains("cannot listen"), "{err:#}");
    assert!(!dir.exists(), "{} left behind", dir.display());
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
