//! Notifications over HTTP: how fast the worker writes the notices that a
//! burst of likes and comments causes, and how fast a user with hundreds of
//! notification groups reads the badge counts and the first page.
//!
//! The burst: `--notice-owners` users post [`ACTIONS_PER_OWNER`] status
//! posts each; then, at concurrency [`CONCURRENCY`], [`LIKES`] fans like each
//! action and [`COMMENTS`] fans comment on it, one after the other on each
//! action (comments on one action sent at once could reach the store in
//! another order than their ids, and a reply would then not be owed). The
//! notices owed are known exactly: a `LIKE` per like and a `COMMENT` per
//! comment to the actor, and a `REPLY` to every earlier commenter; the
//! workload fails if any user ends with more or fewer.
//!
//! The inboxes read: [`READERS`] users with `--notice-groups` groups each,
//! about their own actions and others', spread over past days, most of the
//! older ones read, written straight to the store (setup, like the follow
//! graph); then `notificationCounts` and `notifications(first: 20)`, each
//! by [`CLIENTS`] clients for half of `--duration`.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::{stream, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

mod inboxes;

use super::stats::{Latencies, Rng, Summary};
use super::{Bench, BenchArgs, TENANT};

use crate::model::{Comment, Millis, NoticeRange, NoticeReason, ObjectId};
use crate::notify::NoticeRules;
use crate::store::{NoticeJob, NoticeSelect, NoticeSource, Record, Store};

/// Status posts each owner gets likes and comments on.
pub const ACTIONS_PER_OWNER: usize = 2;
/// Likes on each action, from different fans.
pub const LIKES: usize = 5;
/// Comments on each action, from different fans, one after the other.
pub const COMMENTS: usize = 4;
/// Fans the likers and commenters are drawn from.
const FANS: usize = 1_000;
/// Requests in flight during the burst and the setup, as in the load.
const CONCURRENCY: usize = 16;
/// Users whose inboxes are read.
pub const READERS: usize = 32;
/// Status posts of each reader that its groups are about.
const READER_ACTIONS: usize = 10;
/// Clients reading counts and pages at once.
pub const CLIENTS: usize = 4;
/// Groups on the page read.
pub const PAGE: usize = 20;
/// Groups written to the store at once while seeding the inboxes.
const SEED_CONCURRENCY: usize = 32;

const DAY: Millis = 86_400_000;
const HOUR: Millis = 3_600_000;

/// The badge counts, as a client polls them.
pub const COUNTS_QUERY: &str = "query { notificationCounts { unseenCount unreadCount } }";

/// The bell's first page as a frontend shows it: each group with its
/// counts, up to three actors, and the action it is about.
pub const PAGE_QUERY: &str = "query { notifications(first: 20) { unseenCount unreadCount \
    edges { cursor node { id key reason count unreadCount actorCount firstAt lastAt seen \
    read refId actors(first: 3) { id name } action { id actorId } } } \
    pageInfo { hasNextPage endCursor } } }";

const LIKE: &str = "mutation($id: ID!) { like(actionId: $id) { id likeCount } }";
const COMMENT: &str =
    "mutation($id: ID!, $text: String!) { comment(actionId: $id, text: $text) { commentId } }";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NotificationsResult {
    pub write: WriteResult,
    /// Absent from runs before the queued burst was measured.
    #[serde(default)]
    pub queued: Option<QueuedResult>,
    pub counts: NoticeReadResult,
    pub page: NoticeReadResult,
}

/// The burst of likes and comments and the notices the worker wrote.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteResult {
    pub owners: usize,
    pub actions: usize,
    pub likes: usize,
    pub comments: usize,
    /// Notices written (exactly those owed), and by reason.
    pub notices: u64,
    pub like_notices: u64,
    pub comment_notices: u64,
    pub reply_notices: u64,
    /// Users who got at least one.
    pub recipients: usize,
    /// From the first mutation until the last one answered.
    pub mutate_secs: f64,
    pub mutations_per_sec: f64,
    /// `like` and `comment` round trips.
    pub mutation_latency: Summary,
    /// From the first mutation until every notice owed was in the store.
    pub written_secs: f64,
    pub notices_per_sec: f64,
}

/// The same burst on other owners' posts, queued at once: what the worker
/// writes when the notices do not wait for the mutations that cause them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueuedResult {
    pub likes: usize,
    pub comments: usize,
    pub notices: u64,
    /// Storing the likes and comments and queueing their jobs (one import).
    pub queue_secs: f64,
    /// From the start of the import until every notice owed was in the
    /// store.
    pub written_secs: f64,
    pub notices_per_sec: f64,
}

/// One query read by [`CLIENTS`] clients from readers with many groups.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NoticeReadResult {
    pub readers: usize,
    /// Groups each reader has (on average), and of them unread.
    pub groups_per_reader: f64,
    pub unread_per_reader: f64,
    pub clients: usize,
    pub secs: f64,
    pub requests: u64,
    pub failures: u64,
    /// Groups in the answers, on average (pages; 0 for counts).
    pub items_per_answer: f64,
    pub requests_per_sec: f64,
    pub latency: Summary,
}

pub async fn run(bench: &Bench, args: &BenchArgs) -> anyhow::Result<NotificationsResult> {
    let write = burst(bench, args).await?;
    let queued = queued(bench, args).await?;
    let (counts, page) = inboxes::measure(bench, args).await?;
    Ok(NotificationsResult {
        write,
        queued: Some(queued),
        counts,
        page,
    })
}

/// A status post, which notifies nobody by being recorded.
fn status_post(serial: usize) -> Value {
    json!({
        "descriptor": { "statusPost": { "text": format!("Notice bench post #{serial}") } },
        "refIds": [],
    })
}

/// Records `count` status posts for each of `users`; returns their ids,
/// user by user, once all are fanned out.
async fn post(
    bench: &Bench,
    users: &[String],
    count: usize,
    message: &str,
) -> anyhow::Result<Vec<Vec<String>>> {
    let plan: Vec<(usize, usize)> = (0..users.len())
        .flat_map(|u| (0..count).map(move |k| (u, k)))
        .collect();
    let bar = bench.ui.bar(plan.len() as u64, message);
    let client = &bench.client;
    let recorded: Vec<(usize, String)> = stream::iter(plan)
        .map(|(u, k)| {
            let bar = &bar;
            async move {
                let id = client
                    .record(&users[u], &status_post(u * count + k))
                    .await?;
                bar.inc(1);
                anyhow::Ok((u, id))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    bar.finish();
    let ids: Vec<String> = recorded.iter().map(|(_, id)| id.clone()).collect();
    client
        .wait_done(&ids, Duration::from_secs(600), |_| {})
        .await?;
    let mut by_user = vec![Vec::with_capacity(count); users.len()];
    for (u, id) in recorded {
        by_user[u].push(id);
    }
    Ok(by_user)
}

/// One action's reactions, sent in this order.
struct Thread {
    action: String,
    /// `(fan, is a comment)`.
    steps: Vec<(String, bool)>,
}

/// `n` different fans, named `{prefix}{n}`.
fn fans(rng: &mut Rng, n: usize, prefix: &str) -> Vec<String> {
    let mut chosen: Vec<usize> = Vec::with_capacity(n);
    while chosen.len() < n.min(FANS) {
        let fan = rng.below(FANS);
        if !chosen.contains(&fan) {
            chosen.push(fan);
        }
    }
    chosen.into_iter().map(|f| format!("{prefix}{f}")).collect()
}

/// Each action's likes and comments, from fans drawn by `seed` (named
/// `{fan}{n}`).
fn threads(
    owners: &[String],
    actions: Vec<Vec<String>>,
    seed: u64,
    fan: &str,
) -> Vec<(String, Thread)> {
    let mut rng = Rng::new(seed);
    let mut threads: Vec<(String, Thread)> = Vec::new();
    for (owner, ids) in owners.iter().zip(actions) {
        for action in ids {
            let mut steps: Vec<(String, bool)> = fans(&mut rng, LIKES, fan)
                .into_iter()
                .map(|f| (f, false))
                .collect();
            // Comments go between the likes, in the order drawn.
            let commenters = fans(&mut rng, COMMENTS, fan);
            for (k, fan) in commenters.into_iter().enumerate() {
                let at = (k * 2 + 1).min(steps.len());
                steps.insert(at, (fan, true));
            }
            threads.push((owner.clone(), Thread { action, steps }));
        }
    }
    threads
}

/// The notices owed per user for `threads` on actions by their owners, by
/// reason: (like, comment, reply).
fn owed(rules: &NoticeRules, threads: &[(String, Thread)]) -> BTreeMap<String, (u64, u64, u64)> {
    let mut owed: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    let on = |r| u64::from(rules.on(r));
    for (owner, thread) in threads {
        let mut commenters: Vec<&str> = Vec::new();
        for (fan, comment) in &thread.steps {
            if *comment {
                owed.entry(owner.clone()).or_default().1 += on(NoticeReason::Comment);
                for earlier in &commenters {
                    owed.entry((*earlier).to_owned()).or_default().2 += on(NoticeReason::Reply);
                }
                commenters.push(fan);
            } else {
                owed.entry(owner.clone()).or_default().0 += on(NoticeReason::Like);
            }
        }
    }
    owed.retain(|_, (l, c, r)| *l + *c + *r > 0);
    owed
}

/// A burst's owners (`{prefix}owner{n}`) with their posts, each post's
/// likes and comments from fans of the burst's own (`{prefix}fan{n}`, drawn
/// by `seed`), and the notices that owes each user.
struct Burst {
    owners: Vec<String>,
    threads: Vec<(String, Thread)>,
    owed: BTreeMap<String, (u64, u64, u64)>,
}

impl Burst {
    async fn posted(
        bench: &Bench,
        args: &BenchArgs,
        prefix: &str,
        seed: u64,
        label: &str,
    ) -> anyhow::Result<Burst> {
        let owners: Vec<String> = (0..args.notice_owners.max(1))
            .map(|i| format!("{prefix}owner{i}"))
            .collect();
        let actions = post(bench, &owners, ACTIONS_PER_OWNER, label).await?;
        let threads = threads(&owners, actions, args.seed ^ seed, &format!("{prefix}fan"));
        let owed = owed(&bench.notice_rules, &threads);
        Ok(Burst {
            owners,
            threads,
            owed,
        })
    }
}

async fn burst(bench: &Bench, args: &BenchArgs) -> anyhow::Result<WriteResult> {
    let Burst {
        owners,
        threads,
        owed,
    } = Burst::posted(bench, args, "n", 0x1ce, "notifications: posts").await?;
    let total = |pick: fn(&(u64, u64, u64)) -> u64| owed.values().map(pick).sum::<u64>();
    let (like_notices, comment_notices, reply_notices) =
        (total(|o| o.0), total(|o| o.1), total(|o| o.2));
    let notices = like_notices + comment_notices + reply_notices;
    let likes = threads.len() * LIKES;
    let comments = threads.len() * COMMENTS;

    let bar = bench
        .ui
        .bar((likes + comments) as u64, "notifications: likes, comments");
    let client = &bench.client;
    let started = Instant::now();
    let outcomes: Vec<anyhow::Result<Latencies>> = stream::iter(&threads)
        .map(|(_, thread)| {
            let bar = &bar;
            async move {
                let mut latencies = Latencies::default();
                for (n, (fan, comment)) in thread.steps.iter().enumerate() {
                    let (query, vars) = if *comment {
                        let text = format!("Well done! ({n})");
                        (COMMENT, json!({ "id": thread.action, "text": text }))
                    } else {
                        (LIKE, json!({ "id": thread.action }))
                    };
                    let sent = Instant::now();
                    client.data(fan, false, query, &vars).await?;
                    latencies.record(sent.elapsed());
                    bar.inc(1);
                }
                Ok(latencies)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mutate_secs = started.elapsed().as_secs_f64();
    bar.finish();
    let mut latencies = Latencies::default();
    for outcome in outcomes {
        latencies.extend(outcome?);
    }

    let finished = wait_written(bench, &owed, notices).await?;
    let written_secs = (finished - started).as_secs_f64();
    Ok(WriteResult {
        owners: owners.len(),
        actions: threads.len(),
        likes,
        comments,
        notices,
        like_notices,
        comment_notices,
        reply_notices,
        recipients: owed.len(),
        mutate_secs,
        mutations_per_sec: latencies.len() as f64 / mutate_secs,
        mutation_latency: latencies.summary(),
        written_secs,
        notices_per_sec: notices as f64 / written_secs,
    })
}

/// The burst again, on the posts of other owners, with every like and
/// comment stored and its job queued at once: one import of the records a
/// restore would bring (likes, comments with their bumps to do, notice
/// jobs), the last like sent through the API instead, which wakes the
/// worker. Timed from the import until every notice owed is written: the
/// worker's own pace, which the burst above cannot show once the notices
/// keep up with the mutations.
async fn queued(bench: &Bench, args: &BenchArgs) -> anyhow::Result<QueuedResult> {
    // Fans of their own, who have none of the first burst's replies.
    let Burst { threads, owed, .. } =
        Burst::posted(bench, args, "nq", 0x9e0, "notifications: queued").await?;
    let notices = owed.values().map(|(l, c, r)| l + c + r).sum::<u64>();
    let now = chrono::Utc::now().timestamp_millis();
    let mut records = Vec::new();
    let mut last_like = None;
    for (_, thread) in &threads {
        let action_id = action_oid(&thread.action)?;
        for (n, (fan, comment)) in thread.steps.iter().enumerate() {
            let tenant = TENANT.to_owned();
            if *comment {
                // Ids made in order: each comment is later than the ones
                // before it on its action, as the replies owed assume.
                let comment = Comment {
                    id: ObjectId::new(),
                    action_id,
                    author_id: fan.clone(),
                    text: format!("Well done! ({n})"),
                    created: now,
                };
                records.push(Record::Comment {
                    tenant,
                    comment,
                    bump_queued: true,
                });
            } else {
                last_like = Some((action_id, fan.clone(), records.len()));
                records.push(Record::Like {
                    tenant: tenant.clone(),
                    action_id,
                    user: fan.clone(),
                });
                let source = NoticeSource::Like {
                    action_id,
                    user: fan.clone(),
                };
                let job = NoticeJob {
                    tenant,
                    source,
                    at: now,
                };
                records.push(Record::NoticeJob { job });
            }
        }
    }
    // The last like goes through the API, and wakes the worker.
    let (action_id, user, at) = last_like.context("the queued burst has no like")?;
    records.drain(at..at + 2);
    let likes = threads.len() * LIKES;
    let comments = threads.len() * COMMENTS;

    let started = Instant::now();
    bench.store.import(&records).await?;
    let queue_secs = started.elapsed().as_secs_f64();
    let vars = json!({ "id": action_id.to_hex() });
    bench.client.data(&user, false, LIKE, &vars).await?;
    let finished = wait_written(bench, &owed, notices).await?;
    let written_secs = (finished - started).as_secs_f64();
    Ok(QueuedResult {
        likes,
        comments,
        notices,
        queue_secs,
        written_secs,
        notices_per_sec: notices as f64 / written_secs,
    })
}

/// The notices `owner` has, in every group, read or not (archived aside;
/// the burst archives nothing).
async fn notices_of(store: &dyn Store, rules: &NoticeRules, owner: &str) -> anyhow::Result<u64> {
    let range = NoticeRange {
        before: None,
        limit: rules.groups_kept,
        unread_only: false,
    };
    let groups = store
        .notice_groups(TENANT, owner, NoticeSelect::Page(range))
        .await?;
    Ok(groups.iter().map(|g| u64::from(g.visible)).sum())
}

/// Waits until every user has the notices `owed` them, looking at the
/// first user still short until it is not (as [`Gql::wait_done`] does with
/// actions), then checks every user once more. Returns when the last
/// notice was seen. More than owed is an error, as is less after ten
/// minutes.
async fn wait_written(
    bench: &Bench,
    owed: &BTreeMap<String, (u64, u64, u64)>,
    notices: u64,
) -> anyhow::Result<Instant> {
    let store = bench.store.as_ref();
    let rules = &bench.notice_rules;
    let bar = bench.ui.bar(notices, "notifications: notices");
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut pending: VecDeque<(&String, u64)> =
        owed.iter().map(|(u, (l, c, r))| (u, l + c + r)).collect();
    while let Some(&(user, want)) = pending.front() {
        let have = notices_of(store, rules, user).await?;
        anyhow::ensure!(have <= want, "{user} has {have} notices; {want} were owed");
        if have == want {
            bar.inc(want);
            pending.pop_front();
            continue;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} users still lack notices after 10 minutes ({user}: {have} of {want})",
            pending.len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let finished = Instant::now();
    bar.finish();
    for (user, (l, c, r)) in owed {
        let have = notices_of(store, rules, user).await?;
        anyhow::ensure!(
            have == l + c + r,
            "{user} has {have} notices; {} were owed",
            l + c + r
        );
    }
    Ok(finished)
}

/// The store id of an action id the API answered with (`actionId`).
pub(super) fn action_oid(id: &str) -> anyhow::Result<ObjectId> {
    ObjectId::parse_str(id).map_err(|_| anyhow::anyhow!("{id:?} is not an action's own id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_owed_to_every_earlier_commenter_and_nothing_to_the_actor_twice() {
        let steps = |s: &[(&str, bool)]| {
            s.iter()
                .map(|(f, c)| ((*f).to_owned(), *c))
                .collect::<Vec<_>>()
        };
        let threads = vec![(
            "mary".to_owned(),
            Thread {
                action: "a".into(),
                steps: steps(&[
                    ("rita", false),
                    ("john", true),
                    ("rita", true),
                    ("ada", true),
                ]),
            },
        )];
        let owed = owed(&NoticeRules::default(), &threads);
        assert_eq!(owed["mary"], (1, 3, 0));
        assert_eq!(owed["john"], (0, 0, 2));
        assert_eq!(owed["rita"], (0, 0, 1));
        assert!(!owed.contains_key("ada"));
        let mut quiet = NoticeRules::default();
        quiet.set_off("reply,like").expect("reasons");
        let owed = super::owed(&quiet, &threads);
        assert_eq!(owed.len(), 1);
        assert_eq!(owed["mary"], (0, 3, 0));
    }
}
