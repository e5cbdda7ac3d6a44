//! A response's keys come in the order the selection asks for them, at every
//! depth, whichever executor answers (a plan, or async-graphql's), for reads
//! and writes: compared as written, not as parsed maps.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::json;

use crate::common::{Backend, TestServer};
use crate::transports::Streamed;

/// Every object key of a JSON text, depth first, in the order written.
fn keys(text: &str) -> Vec<String> {
    struct Keys<'k>(&'k mut Vec<String>);
    impl<'de> DeserializeSeed<'de> for Keys<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                self.0.push(key);
                map.next_value_seed(Keys(&mut *self.0))?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Keys(&mut *self.0))?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    Keys(&mut out).deserialize(&mut de).expect("a JSON body");
    out
}

/// The body of a request as `user` of `acme`, as text.
async fn body(server: &TestServer, user: &str, query: &str) -> String {
    reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", user)
        .json(&json!({ "query": query }))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("a body")
}

#[track_caller]
fn assert_keys(text: &str, expected: &[&str]) {
    assert_eq!(keys(text), expected, "{text}");
}

#[tokio::test]
async fn keys_follow_the_selection_on_the_read_and_write_roots() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    // A viewer with no user record yet: `viewer` waits on the store for
    // it while an empty `feed` is answered at once.
    let read = "{ viewer { userId name } feed(first: 1) { edges { node { actionId } } \
        pageInfo { hasNextPage } } __typename }";
    let expected = [
        "data",
        "viewer",
        "userId",
        "name",
        "feed",
        "edges",
        "pageInfo",
        "hasNextPage",
        "__typename",
    ];
    // The first request of a document runs on async-graphql, the next ones
    // planned; with planned reads off, all on async-graphql.
    for (n, user) in ["new-1", "new-2", "new-3"].into_iter().enumerate() {
        server.server.planner.set_enabled(n != 2);
        assert_keys(&body(&server, user, read).await, &expected);
        assert_keys(&body(&server, user, read).await, &expected);
    }
    server.server.planner.set_enabled(true);

    // A write: the action's actor waits on the store, its id does not.
    let write = "mutation { recordAction(input: { descriptor: { statusPost: { text: \"hi\" } } }) \
        { actor { name userId } descriptor { ... on StatusPost { text } __typename } \
        actionId } second: upsertUser(input: { userId: \"ann\", name: \"Ann\" }) { name id } }";
    let written = body(&server, "ann", write).await;
    assert_keys(
        &written,
        &[
            "data",
            "recordAction",
            "actor",
            "name",
            "userId",
            "descriptor",
            "text",
            "__typename",
            "actionId",
            "second",
            "name",
            "id",
        ],
    );
    let written: serde_json::Value = serde_json::from_str(&written).expect("JSON");
    let id = written["data"]["recordAction"]["actionId"]
        .as_str()
        .expect("an action id");

    // A read no plan covers, fragments and aliases among its fields.
    let fallback = format!(
        "query {{ b: viewer {{ ...Who }} action(actionId: \"{id}\") {{ fanOut {{ state }} \
         ... on Action {{ actor {{ name }} }} actionId }} a: viewer {{ userId }} }} \
         fragment Who on User {{ name userId }}"
    );
    assert_keys(
        &body(&server, "ann", &fallback).await,
        &[
            "data", "b", "name", "userId", "action", "fanOut", "state", "actor", "name",
            "actionId", "a", "userId",
        ],
    );
    server.stop().await;
}

/// A subscription's events keep the selection's order too, whether each
/// subscriber's event is executed for it or written from the selection's
/// shared template.
#[tokio::test]
async fn subscription_events_follow_the_selection() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("the embedded store is always there");
    let (alice, bob) = (server.client("acme", "alice"), server.client("acme", "bob"));
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let executed =
        "subscription { feedEvents { item { action { actor { name } actionId } ownerId } kind } }";
    let shared = "subscription { feedEvents { resumeCursor item { ownerId actionId } kind } }";
    let mut streams = Vec::new();
    for query in [executed, shared] {
        let stream = Streamed::open(&server, "text/event-stream", json!({ "query": query }));
        streams.push(stream.await);
    }
    server.wait_live_topics(1).await;
    bob.post_status("in order", json!({})).await;
    let expected: [&[&str]; 2] = [
        &[
            "data",
            "feedEvents",
            "item",
            "action",
            "actor",
            "name",
            "actionId",
            "ownerId",
            "kind",
        ],
        &[
            "data",
            "feedEvents",
            "resumeCursor",
            "item",
            "ownerId",
            "actionId",
            "kind",
        ],
    ];
    for (stream, expected) in streams.iter_mut().zip(expected) {
        let (name, data) = stream.raw_event().await.expect("an event");
        assert_eq!(name, "next", "{data}");
        assert_keys(&data, expected);
    }
    server.stop().await;
}
