//! Reading the final state through the API, as each user sees it: their
//! actions, feeds, edges, memberships, likes, mutes, notifications, and the
//! tenant's webhooks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::Context as _;
use futures_util::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use super::client::Http;
use super::ops::{Entry, Op, World, SERVICE};

/// Requests in flight at once while reading.
const AT_ONCE: usize = 8;

#[derive(Clone, Debug)]
pub struct Comment {
    pub id: String,
    pub author: String,
    pub text: String,
    pub at: i64,
}

/// An action as its actor reads it.
#[derive(Clone, Debug)]
pub struct Action {
    pub id: String,
    pub label: String,
    pub actor: String,
    pub hidden: bool,
    pub scope: String,
    pub readers: Vec<String>,
    pub conducted: i64,
    pub comment_count: u64,
    pub like_count: u64,
    pub comments: Vec<Comment>,
}

/// One item of a home feed.
#[derive(Clone, Debug)]
pub struct Item {
    pub action_id: String,
    pub relevancy: i64,
    pub kind: String,
    pub actor: String,
    pub rule: Option<String>,
    pub by: Option<String>,
    pub at: Option<i64>,
    /// Its `action` was not null.
    pub readable: bool,
}

/// One notification, with its group's reason.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Notice {
    pub reason: String,
    pub actor: String,
    pub comment: Option<String>,
    pub ref_id: Option<String>,
    pub action: Option<String>,
}

/// Whether a user likes an action, if they may still read it.
type Liked = ((String, String), Option<bool>);

/// Everything read at the end.
#[derive(Default)]
pub struct Observed {
    /// Every action found, by its text (more than one if it was stored
    /// twice).
    pub actions: BTreeMap<String, Vec<Action>>,
    pub feeds: BTreeMap<String, Vec<Item>>,
    pub following: BTreeMap<String, BTreeSet<String>>,
    pub followers: BTreeMap<String, BTreeSet<String>>,
    pub supervisor: BTreeMap<String, Option<String>>,
    pub assignments: BTreeMap<String, BTreeSet<String>>,
    pub groups: BTreeMap<String, BTreeSet<String>>,
    pub mutes: BTreeMap<String, BTreeSet<String>>,
    /// Whether a user likes an action; none where they may no longer read it.
    pub liked: BTreeMap<(String, String), Option<bool>>,
    pub notices: BTreeMap<String, Vec<Notice>>,
    pub notice_groups: BTreeMap<String, usize>,
    /// Webhooks registered, by URL.
    pub hooks: BTreeMap<String, String>,
}

fn millis(v: &Value) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn opt(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// Reads every user's state (feeds are read again, under another model,
/// by [`feeds`]).
pub async fn observe(http: &Http, world: &World, history: &[Entry]) -> anyhow::Result<Observed> {
    let mut seen = Observed::default();
    let users = world.users();
    let acted: Vec<Vec<Action>> = stream::iter(users.iter())
        .map(|u| actions_of(http, u))
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    for action in acted.into_iter().flatten() {
        seen.actions
            .entry(action.label.clone())
            .or_default()
            .push(action);
    }
    seen.feeds = feeds(http, world).await?;
    let about: Vec<(String, Value, Value)> = stream::iter(users.iter())
        .map(|u| async move {
            let user = http
                .data(
                    u,
                    false,
                    "query($u: ID) { user(userId: $u) { following(first: 100) { nodes { userId } } followers(first: 100) { nodes { userId } } supervisor { userId } assignments groups { groupId } } notificationPreferences { mutes { actionId } } }",
                    json!({ "u": u }),
                )
                .await?;
            let notices = notices_of(http, u).await?;
            anyhow::Ok((u.clone(), user, notices))
        })
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    for (u, data, notices) in about {
        let user = &data["user"];
        let ids = |list: &Value, field: &str| -> BTreeSet<String> {
            list.as_array()
                .into_iter()
                .flatten()
                .map(|n| text(&n[field]))
                .collect()
        };
        seen.following
            .insert(u.clone(), ids(&user["following"]["nodes"], "userId"));
        seen.followers
            .insert(u.clone(), ids(&user["followers"]["nodes"], "userId"));
        seen.supervisor
            .insert(u.clone(), opt(&user["supervisor"]["userId"]));
        seen.assignments.insert(
            u.clone(),
            user["assignments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text)
                .collect(),
        );
        seen.groups
            .insert(u.clone(), ids(&user["groups"], "groupId"));
        seen.mutes.insert(
            u.clone(),
            ids(&data["notificationPreferences"]["mutes"], "actionId"),
        );
        let (groups, list) = parse_notices(&notices);
        seen.notice_groups.insert(u.clone(), groups);
        seen.notices.insert(u, list);
    }
    // Likes: each user asks about every action they ever liked or unliked.
    let mut asked: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in history {
        if let Op::Like { user, action } | Op::Unlike { user, action } = &e.op {
            asked
                .entry(user.clone())
                .or_default()
                .insert(action.id.clone());
        }
    }
    let liked: Vec<Vec<Liked>> = stream::iter(asked)
        .map(|(u, ids)| async move {
            let ids: Vec<String> = ids.into_iter().collect();
            let mut out = Vec::new();
            for chunk in ids.chunks(100) {
                let data = http
                    .data(
                        &u,
                        false,
                        "query($ids: [ID!]) { actions(actionIds: $ids) { viewerHasLiked } }",
                        json!({ "ids": chunk }),
                    )
                    .await?;
                for (i, id) in chunk.iter().enumerate() {
                    let like = data["actions"][i]["viewerHasLiked"].as_bool();
                    out.push(((u.clone(), id.clone()), like));
                }
            }
            anyhow::Ok(out)
        })
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    seen.liked = liked.into_iter().flatten().collect();
    let hooks = http
        .data(SERVICE, true, "{ webhooks { webhookId url } }", json!({}))
        .await?;
    for hook in hooks["webhooks"].as_array().into_iter().flatten() {
        seen.hooks
            .insert(text(&hook["url"]), text(&hook["webhookId"]));
    }
    Ok(seen)
}

/// A user's own actions, as they read them, with their comments.
async fn actions_of(http: &Http, user: &str) -> anyhow::Result<Vec<Action>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let data = http
            .data(
                user,
                false,
                "query($u: ID!, $after: String) { actorFeed(userId: $u, first: 100, after: $after) { edges { node { actionId actorId hidden scope readers conducted commentCount likeCount descriptor { ... on StatusPost { text } } } } pageInfo { hasNextPage endCursor } } }",
                json!({ "u": user, "after": after }),
            )
            .await?;
        let page = &data["actorFeed"];
        for edge in page["edges"].as_array().into_iter().flatten() {
            let n = &edge["node"];
            out.push(Action {
                id: text(&n["actionId"]),
                label: text(&n["descriptor"]["text"]),
                actor: text(&n["actorId"]),
                hidden: n["hidden"].as_bool().unwrap_or(false),
                scope: text(&n["scope"]),
                readers: n["readers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect(),
                conducted: millis(&n["conducted"]).context("conducted")?,
                comment_count: n["commentCount"].as_u64().unwrap_or(0),
                like_count: n["likeCount"].as_u64().unwrap_or(0),
                comments: Vec::new(),
            });
        }
        if page["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = opt(&page["pageInfo"]["endCursor"]);
    }
    for action in &mut out {
        action.comments = comments_of(http, user, &action.id).await?;
    }
    Ok(out)
}

async fn comments_of(http: &Http, user: &str, id: &str) -> anyhow::Result<Vec<Comment>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let data = http
            .data(
                user,
                false,
                "query($id: ID, $after: String) { action(actionId: $id) { comments(first: 100, after: $after) { edges { node { commentId authorId text created } } pageInfo { hasNextPage endCursor } } } }",
                json!({ "id": id, "after": after }),
            )
            .await?;
        let page = &data["action"]["comments"];
        for edge in page["edges"].as_array().into_iter().flatten() {
            let n = &edge["node"];
            out.push(Comment {
                id: text(&n["commentId"]),
                author: text(&n["authorId"]),
                text: text(&n["text"]),
                at: millis(&n["created"]).context("created")?,
            });
        }
        if page["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = opt(&page["pageInfo"]["endCursor"]);
    }
    Ok(out)
}

/// Every user's whole home feed, paged to the end.
pub async fn feeds(http: &Http, world: &World) -> anyhow::Result<BTreeMap<String, Vec<Item>>> {
    let users = world.users();
    let read: HashMap<String, Vec<Item>> = stream::iter(users.iter())
        .map(|u| async move { anyhow::Ok((u.clone(), feed_of(http, u).await?)) })
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    Ok(read.into_iter().collect())
}

async fn feed_of(http: &Http, user: &str) -> anyhow::Result<Vec<Item>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let data = http
            .data(
                user,
                false,
                "query($after: String) { feed(first: 100, after: $after) { edges { node { actionId relevancy reason { kind actorId rule by at } action { actionId } } } pageInfo { hasNextPage endCursor } } }",
                json!({ "after": after }),
            )
            .await?;
        let page = &data["feed"];
        for edge in page["edges"].as_array().into_iter().flatten() {
            let n = &edge["node"];
            let reason = &n["reason"];
            out.push(Item {
                action_id: text(&n["actionId"]),
                relevancy: millis(&n["relevancy"]).context("relevancy")?,
                kind: text(&reason["kind"]),
                actor: text(&reason["actorId"]),
                rule: opt(&reason["rule"]),
                by: opt(&reason["by"]),
                at: millis(&reason["at"]),
                readable: !n["action"].is_null(),
            });
        }
        if page["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = opt(&page["pageInfo"]["endCursor"]);
    }
    Ok(out)
}

/// A user's notification groups, every page (as JSON edges).
async fn notices_of(http: &Http, user: &str) -> anyhow::Result<Value> {
    let mut edges = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let data = http
            .data(
                user,
                false,
                "query($after: String) { notifications(first: 10, after: $after) { edges { node { reason count notifications(first: 200) { reason actorId commentId refId action { actionId } } } } pageInfo { hasNextPage endCursor } } }",
                json!({ "after": after }),
            )
            .await?;
        let page = &data["notifications"];
        edges.extend(page["edges"].as_array().into_iter().flatten().cloned());
        if page["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = opt(&page["pageInfo"]["endCursor"]);
    }
    Ok(Value::Array(edges))
}

fn parse_notices(edges: &Value) -> (usize, Vec<Notice>) {
    let mut out = Vec::new();
    let groups = edges.as_array().map_or(0, Vec::len);
    for edge in edges.as_array().into_iter().flatten() {
        for n in edge["node"]["notifications"]
            .as_array()
            .into_iter()
            .flatten()
        {
            out.push(Notice {
                reason: text(&n["reason"]),
                actor: text(&n["actorId"]),
                comment: opt(&n["commentId"]),
                ref_id: opt(&n["refId"]),
                action: opt(&n["action"]["actionId"]),
            });
        }
    }
    out.sort();
    (groups, out)
}
