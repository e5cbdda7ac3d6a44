//! An application's own action types, from a descriptor file: served as
//! members of `Descriptor` and `DescriptorInput`, checked by the file's
//! rules, and judged against stored actions when the file changes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use riverfeed::server::ServeOptions;
use serde_json::{json, Value};

use crate::common::{first_error_code, Backend, Client, Stopped, TestServer};
use crate::on_both_backends;

/// The README's example (an enum, a ref with its copied name that is also a
/// slice, a range, free text, a time, a defaulted list of ids, who reported
/// it and whom it notifies), and a second type.
fn shipping() -> String {
    let readme = include_str!("../../README.md");
    let section = &readme[readme
        .find("## Your own action types")
        .expect("the section")..];
    let start = section.find("```graphql\n").expect("its example") + "```graphql\n".len();
    let example = &section[start..start + section[start..].find("```").expect("closed")];
    format!("{example}\ntype OrderShipped @descriptor {{\n  orderId: ID! @ref(name: \"orderName\")\n  orderName: String!\n}}\n")
}

const RECORD: &str =
    "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }";

const FEED: &str = "{ feed(first: 10) { edges { node { action { actionId descriptor { __typename \
    ... on ShipmentDelayed { orderId orderName days severity note eta carriers reportedById } \
    ... on UnknownDescriptor { type json } } } } } } }";

fn file(dir: &tempfile::TempDir, name: &str, source: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, source).expect("write the descriptor file");
    path
}

async fn start(
    stopped: Stopped,
    path: &std::path::Path,
    allow: bool,
) -> anyhow::Result<TestServer> {
    start_as(stopped, path, allow, false).await
}

/// As [`start`], the file's types alone with `replace`.
async fn start_as(
    stopped: Stopped,
    path: &std::path::Path,
    allow: bool,
    replace: bool,
) -> anyhow::Result<TestServer> {
    let catalog = Arc::new(riverfeed::api::load_descriptors(path, replace)?);
    let mut options = ServeOptions::new(stopped.store.clone());
    if let Some(model) = crate::common::test_feed_model() {
        options.model = model;
    }
    options.store_settings = crate::common::test_store_settings();
    options.descriptors = catalog;
    options.allow_descriptor_changes = allow;
    let server = riverfeed::server::start(options).await?;
    Ok(TestServer::from_parts(server, stopped))
}

async fn record(client: &Client, delay: Value) -> Value {
    client
        .post(
            RECORD,
            json!({ "input": { "descriptor": { "shipmentDelayed": delay } } }),
        )
        .await
}

/// Records a delay that must be accepted, and waits for its delivery.
async fn recorded(client: &Client, delay: Value) -> String {
    let body = record(client, delay).await;
    let id = body["data"]["recordAction"]["actionId"]
        .as_str()
        .unwrap_or_else(|| panic!("recorded: {body}"))
        .to_owned();
    client.wait_delivered(&id).await;
    id
}

fn delay(days: i64) -> Value {
    json!({
        "orderId": "order-1", "orderName": "Order #1", "days": days,
        "severity": "HIGH", "note": "Storm at the port.\nTwo more days.",
        "eta": "2026-12-01T10:00:00+01:00", "reportedById": "rita",
        "customerId": "cora",
    })
}

fn descriptors(feed: &Value) -> Vec<Value> {
    feed["feed"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"]["action"]["descriptor"].clone())
        .collect()
}

async fn own_action_types_are_served_and_checked(backend: Backend) {
    let Some((store, dir)) = crate::common::store_url(backend) else {
        return;
    };
    let files = tempfile::tempdir().expect("temp dir");
    let path = file(&files, "shipping.graphql", &shipping());
    let server = start(Stopped { store, dir }, &path, false)
        .await
        .expect("serves the file");
    let rita = server.client("acme", "rita");

    // Recorded with the file's rules: the id put in its one form, the
    // default filled, the time in UTC.
    let id = recorded(&rita, delay(3)).await;
    let feed = rita.data(FEED, json!({})).await;
    assert_eq!(
        descriptors(&feed),
        vec![json!({
            "__typename": "ShipmentDelayed", "orderId": "order-1", "orderName": "Order #1",
            "days": 3, "severity": "HIGH", "note": "Storm at the port.\nTwo more days.",
            "eta": "2026-12-01T09:00:00.000Z", "carriers": [], "reportedById": "rita",
        })]
    );

    // `@slice`: in the slice of its order without `refIds`.
    let slice = rita
        .data(
            "{ slice(refId: \"order-1\") { edges { node { actionId } } } }",
            json!({}),
        )
        .await;
    assert_eq!(slice["slice"]["edges"][0]["node"]["actionId"], id.as_str());

    // Keyword filters read the `@text` fields (the note), in any case,
    // every word from its start ("order" is not in "border"); a name (the
    // order's) is not free text.
    let mut customs = delay(2);
    customs["note"] = json!("Held at the border by customs.");
    let held = recorded(&rita, customs).await;
    let ids = |data: &Value, list: &str| -> Vec<String> {
        let edges = data[list]["edges"].as_array().expect("edges");
        let id = |e: &Value| e["node"]["actionId"].as_str().map(str::to_owned);
        let item = |e: &Value| e["node"]["action"]["actionId"].as_str().map(str::to_owned);
        edges
            .iter()
            .filter_map(|e| id(e).or_else(|| item(e)))
            .collect()
    };
    let filtered = |query: &str, matching: &str| {
        let (rita, query) = (rita.clone_headers(), query.to_owned());
        let vars = json!({ "m": matching });
        async move { rita.data(&query, vars).await }
    };
    let feed = "query($m: String) { feed(first: 10, matching: $m) { edges { node { action { actionId } } } } }";
    let slice = "query($m: String) { slice(refId: \"order-1\", matching: $m) { edges { node { actionId } } } }";
    let actor = "query($m: String) { actorFeed(userId: \"rita\", matching: $m) { edges { node { actionId } } } }";
    assert_eq!(
        ids(&filtered(feed, "STORM por").await, "feed"),
        std::slice::from_ref(&id)
    );
    assert_eq!(
        ids(&filtered(slice, "customs").await, "slice"),
        std::slice::from_ref(&held)
    );
    assert_eq!(
        ids(&filtered(actor, "border customs").await, "actorFeed"),
        std::slice::from_ref(&held)
    );
    assert_eq!(
        ids(&filtered(feed, "order").await, "feed"),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(&filtered(feed, "storm customs").await, "feed"),
        Vec::<String>::new()
    );
    let blank = rita.post(feed, json!({ "m": "   " })).await;
    assert_eq!(
        first_error_code(&blank).as_deref(),
        Some("BAD_USER_INPUT"),
        "{blank}"
    );

    // Each rule, with a code: the range, `@doneBy`, an enum value, a
    // field the type does not have, a name past its limit.
    let refused = record(&rita, delay(0)).await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("BAD_USER_INPUT")
    );
    assert!(
        refused
            .to_string()
            .contains("shipmentDelayed.days must be between 1 and 365, got 0"),
        "{refused}"
    );
    let mut other = delay(2);
    other["reportedById"] = json!("sam");
    let refused = record(&rita, other).await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("FORBIDDEN"),
        "{refused}"
    );
    assert!(refused
        .to_string()
        .contains("shipmentDelayed.reportedById must be the actor"));
    for (field, value) in [
        ("severity", json!("MEDIUM")),
        ("weight", json!(3)),
        ("orderName", json!("n".repeat(2_000))),
    ] {
        let mut bad = delay(2);
        bad[field] = value;
        let refused = record(&rita, bad).await;
        assert!(
            refused["errors"].is_array() && refused["data"]["recordAction"].is_null(),
            "{field}: {refused}"
        );
    }

    // `@ref`: a rename reaches the copied name.
    server
        .service("acme")
        .data(
            "mutation { renameRef(refId: \"order-1\", name: \"Order #1 (gift)\") }",
            json!({}),
        )
        .await;
    let feed = rita.data(FEED, json!({})).await;
    assert_eq!(descriptors(&feed)[0]["orderName"], "Order #1 (gift)");
    // A new name is capped as a recorded one (1 KiB): a longer one is
    // refused, and the copies stay as they were.
    let refused = server
        .service("acme")
        .post(
            "mutation($name: String!) { renameRef(refId: \"order-1\", name: $name) }",
            json!({ "name": "n".repeat(2_000) }),
        )
        .await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("BAD_USER_INPUT"),
        "{refused}"
    );
    let feed = rita.data(FEED, json!({})).await;
    assert_eq!(descriptors(&feed)[0]["orderName"], "Order #1 (gift)");

    // `@notify`: the customer the action names hears of it.
    let cora = server.client("acme", "cora");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let page = cora
            .data(
                "{ notifications { edges { node { reason refId actors { userId } } } } }",
                json!({}),
            )
            .await;
        let first = &page["notifications"]["edges"][0]["node"];
        if !first.is_null() {
            assert_eq!(first["reason"], "ASSIGNED", "{page}");
            assert_eq!(first["refId"], "order-1", "{page}");
            assert_eq!(first["actors"][0]["userId"], "rita", "{page}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cora was never notified"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

async fn a_changed_file_is_judged_against_stored_actions(backend: Backend) {
    let Some((store, dir)) = crate::common::store_url(backend) else {
        return;
    };
    let files = tempfile::tempdir().expect("temp dir");
    let v1 = file(&files, "v1.graphql", &shipping());
    let server = start(Stopped { store, dir }, &v1, false).await.expect("v1");
    let rita = server.client("acme", "rita");
    let id = recorded(&rita, delay(3)).await;
    let mut stopped = server.stop_keeping_data().await;

    // A new optional field: served, and the stored action reads.
    let v2 = file(
        &files,
        "v2.graphql",
        &shipping().replace(
            "  customerId: ID\n",
            "  customerId: ID\n  carrier: String\n",
        ),
    );
    let server = start(stopped, &v2, false).await.expect("v2 adds a field");
    let feed = server.client("acme", "rita").data(FEED, json!({})).await;
    assert_eq!(descriptors(&feed)[0]["days"], 3);
    stopped = server.stop_keeping_data().await;

    // A removed type and a changed field type are refused, naming the
    // stored action they would break.
    let removed = file(
        &files,
        "removed.graphql",
        "type OrderShipped @descriptor { orderId: ID! }",
    );
    let changed = file(
        &files,
        "changed.graphql",
        &shipping().replace("days: Int! @range(min: 1, max: 365)", "days: String!"),
    );
    for (path, change) in [
        (&removed, "type ShipmentDelayed was removed"),
        (
            &changed,
            "ShipmentDelayed.days changed from Int! to String!",
        ),
    ] {
        let refused = start(
            Stopped {
                store: stopped.store.clone(),
                dir: None,
            },
            path,
            false,
        )
        .await;
        let message = format!("{:#}", refused.err().expect("refused"));
        assert!(message.contains(change), "{message}");
        assert!(message.contains(&id), "names the action: {message}");
        assert!(message.contains("--allow-descriptor-changes"), "{message}");
    }

    // Allowed: the action reads as UnknownDescriptor, with what it holds.
    let server = start(stopped, &changed, true).await.expect("allowed");
    let feed = server.client("acme", "rita").data(FEED, json!({})).await;
    let unknown = &descriptors(&feed)[0];
    assert_eq!(unknown["__typename"], "UnknownDescriptor", "{feed}");
    assert_eq!(unknown["type"], "ShipmentDelayed");
    let json: Value = serde_json::from_str(unknown["json"].as_str().expect("json")).expect("JSON");
    assert_eq!(json["days"], 3);
    assert_eq!(json["orderId"], "order-1");
    server.stop().await;
}

/// A file's types come beside the built-in ones, which keep their names;
/// `--descriptors-replace` serves the file's alone, refused while stored
/// actions use a built-in type.
async fn a_file_adds_to_the_built_in_types_unless_it_replaces_them(backend: Backend) {
    let Some((store, dir)) = crate::common::store_url(backend) else {
        return;
    };
    let files = tempfile::tempdir().expect("temp dir");
    let path = file(&files, "shipping.graphql", &shipping());
    let server = start(Stopped { store, dir }, &path, false)
        .await
        .expect("serves the file");
    let rita = server.client("acme", "rita");
    let status = rita.post_status("beside", json!({})).await;
    let shipped = recorded(&rita, delay(2)).await;
    let both = rita
        .data(
            "{ feed(first: 5) { edges { node { action { actionId descriptor { __typename \
             ... on StatusPost { text } ... on ShipmentDelayed { days } } } } } } }",
            json!({}),
        )
        .await;
    let got: Vec<(Value, Value)> = both["feed"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            let action = &e["node"]["action"];
            (action["actionId"].clone(), action["descriptor"].clone())
        })
        .collect();
    assert!(
        got.contains(&(
            json!(status),
            json!({ "__typename": "StatusPost", "text": "beside" })
        )),
        "{both}"
    );
    assert!(
        got.contains(&(
            json!(shipped),
            json!({ "__typename": "ShipmentDelayed", "days": 2 })
        )),
        "{both}"
    );
    let stopped = server.stop_keeping_data().await;

    // A built-in name is refused, naming the way out.
    let taken = file(
        &files,
        "taken.graphql",
        "type StatusPost @descriptor { text: String! }",
    );
    let refused = riverfeed::api::load_descriptors(&taken, false).expect_err("refused");
    let message = format!("{refused:#}");
    assert!(message.contains("taken.graphql:1:"), "{message}");
    assert!(
        message.contains("`StatusPost` is a built-in name"),
        "{message}"
    );
    assert!(message.contains("--descriptors-replace"), "{message}");
    riverfeed::api::load_descriptors(&taken, true).expect("the file's own, replacing");

    // Replacing drops the built-in types: refused while a status is stored.
    let refused = start_as(
        Stopped {
            store: stopped.store.clone(),
            dir: None,
        },
        &path,
        false,
        true,
    )
    .await;
    let message = format!("{:#}", refused.err().expect("refused"));
    assert!(message.contains("type StatusPost was removed"), "{message}");
    assert!(message.contains(&status), "names the action: {message}");
    let server = start_as(stopped, &path, true, true).await.expect("allowed");
    let unknown = server
        .client("acme", "rita")
        .post("{ feed(first: 5) { edges { node { action { descriptor { ... on StatusPost { text } } } } } } }", json!({}))
        .await;
    assert_eq!(
        first_error_code(&unknown).as_deref(),
        Some("GRAPHQL_VALIDATION_FAILED"),
        "{unknown}"
    );
    server.stop().await;
}

on_both_backends!(
    own_action_types_are_served_and_checked,
    a_changed_file_is_judged_against_stored_actions,
    a_file_adds_to_the_built_in_types_unless_it_replaces_them,
);

/// A file with an error is refused with its line and column, by
/// `riverfeed schema --descriptors` as by `serve`; a good one prints the
/// schema with its types.
#[test]
fn the_schema_command_reads_the_file() {
    let files = tempfile::tempdir().expect("temp dir");
    let schema = |path: &PathBuf| {
        std::process::Command::new(env!("CARGO_BIN_EXE_riverfeed"))
            .args(["schema", "--descriptors"])
            .arg(path)
            .env_remove("RIVERFEED_DESCRIPTORS")
            .output()
            .expect("runs")
    };
    let good = file(&files, "good.graphql", &shipping());
    let out = schema(&good);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sdl = String::from_utf8(out.stdout).expect("utf-8");
    // Beside the built-in types.
    let builtin: Vec<String> = riverfeed::descriptor::Catalog::builtin()
        .types()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let union = format!(
        "union Descriptor = {} | ShipmentDelayed | OrderShipped | UnknownDescriptor",
        builtin.join(" | ")
    );
    assert!(sdl.contains(&union), "{sdl}");
    assert!(
        sdl.contains("\tshipmentDelayed: ShipmentDelayedInput\n"),
        "{sdl}"
    );
    assert!(sdl.contains("\tcarriers: [String!]! = []\n"), "{sdl}");
    assert!(sdl.contains("enum Severity {"), "{sdl}");

    for (source, at, says) in [
        (
            "type A @descriptor {\n  x: Strin!\n}",
            "2:6",
            "unknown type Strin",
        ),
        (
            "type A @descriptor {\n  x: String @ref(name: \"y\")\n}",
            "2:3",
            "names no field of A",
        ),
        (
            "type A @descriptor {\n  x: Int @text\n}",
            "2:10",
            "@text applies to String fields",
        ),
        (
            "\n\ntype User @descriptor { x: Int }",
            "3:6",
            "User is a type of Riverfeed's schema",
        ),
        ("type A {\n  x: Int\n}", "1:1", "needs @descriptor"),
        ("type A @descriptor {\n  x: Int\n", "3:1", "syntax error"),
    ] {
        let bad = file(&files, "bad.graphql", source);
        let out = schema(&bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{source} was accepted");
        let expected = format!("{}:{at}: ", bad.display());
        assert!(
            stderr.contains(&expected) && stderr.contains(says),
            "{source}: {stderr}"
        );
    }
}
