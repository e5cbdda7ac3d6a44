//! The inboxes read: [`READERS`] users with `--notice-groups` groups each,
//! written straight to the store, then read by [`CLIENTS`] clients, the
//! badge counts and the first page each for half of `--duration`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt, TryStreamExt};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    action_oid, post, NoticeReadResult, CLIENTS, COUNTS_QUERY, DAY, FANS, HOUR, PAGE, PAGE_QUERY,
    READERS, READER_ACTIONS, SEED_CONCURRENCY,
};
use crate::bench::client::Gql;
use crate::bench::stats::{Latencies, Rng, Tally};
use crate::bench::{Bench, BenchArgs, TENANT};
use crate::model::{Millis, Notice, NoticeGroup, NoticeReason, ObjectId};
use crate::store::Notices;

/// Seeds the inboxes, checks what the API says of them, then reads their
/// counts and their first pages.
pub(super) async fn measure(
    bench: &Bench,
    args: &BenchArgs,
) -> anyhow::Result<(NoticeReadResult, NoticeReadResult)> {
    let inboxes = seed_inboxes(bench, args).await?;
    warm_up(bench, &inboxes).await?;
    let phase = (args.duration / 2).max(Duration::from_millis(100));
    let readers: Vec<String> = inboxes.iter().map(|i| i.reader.clone()).collect();
    let counts = read_phase(bench, Query::Counts, &readers, phase, args.seed).await;
    let page = read_phase(bench, Query::Page, &readers, phase, args.seed ^ 0x9a6e).await;
    let n = inboxes.len().max(1) as f64;
    let groups = inboxes.iter().map(|i| i.groups).sum::<usize>() as f64 / n;
    let unread = inboxes.iter().map(|i| i.unread).sum::<u64>() as f64 / n;
    let result = |mut r: Phase| {
        let requests = r.latencies.len() as u64;
        NoticeReadResult {
            readers: inboxes.len(),
            groups_per_reader: groups,
            unread_per_reader: unread,
            clients: CLIENTS,
            secs: r.secs,
            requests,
            failures: r.failures,
            items_per_answer: if requests == 0 {
                0.0
            } else {
                r.items as f64 / requests as f64
            },
            requests_per_sec: requests as f64 / r.secs,
            latency: r.latencies.summary(),
        }
    };
    Ok((result(counts), result(page)))
}

/// A reader's seeded inbox, as its counts should read.
struct SeededInbox {
    reader: String,
    groups: usize,
    unseen: u64,
    unread: u64,
}

/// Gives each of [`READERS`] readers `--notice-groups` groups, written
/// straight to the store: likes and comments on the reader's own posts and
/// replies on the next reader's, from 1 to 5 fans each, one day after
/// another back from now; today's unread and unseen, 70% of the older ones
/// read, and everything before the last two hours seen.
async fn seed_inboxes(bench: &Bench, args: &BenchArgs) -> anyhow::Result<Vec<SeededInbox>> {
    let readers: Vec<String> = (0..READERS).map(|i| format!("nreader{i}")).collect();
    let actions = post(
        bench,
        &readers,
        READER_ACTIONS,
        "notifications: reader posts",
    )
    .await?;
    let actions: Vec<Vec<ObjectId>> = actions
        .iter()
        .map(|ids| ids.iter().map(|id| action_oid(id)).collect())
        .collect::<anyhow::Result<_>>()?;
    let rules = &bench.notice_rules;
    let want = args.notice_groups.clamp(1, rules.groups_kept);
    let now = chrono::Utc::now().timestamp_millis();
    // A spec's notices spread over the hour before `now` on their day, but
    // never back across midnight (UTC, as the rules' days): a group split
    // in two there would give a reader more groups than asked for.
    let spread = HOUR.min(now.rem_euclid(DAY)).max(1);
    let seen_until = now - 2 * HOUR;
    let mut rng = Rng::new(args.seed ^ 0x5eed);
    let mut inboxes = Vec::new();
    let mut groups_to_write = Vec::new();
    let reasons = [
        NoticeReason::Like,
        NoticeReason::Comment,
        NoticeReason::Reply,
    ];
    for (r, reader) in readers.iter().enumerate() {
        let mut groups: HashMap<String, NoticeGroup> = HashMap::new();
        let mut spec = 0usize;
        // Keys are the rules', so groups come out as the worker would make
        // them.
        while groups.len() < want && spec < want * 4 {
            let reason = reasons[spec % 3];
            let of = if reason == NoticeReason::Reply {
                &actions[(r + 1) % READERS]
            } else {
                &actions[r]
            };
            let action = of[(spec / 3) % of.len()];
            let day = (spec / (3 * of.len())) as Millis;
            let members = 1 + rng.below(5);
            for m in 0..members {
                let at = now - day * DAY - rng.between(0, spread);
                let notice = Notice {
                    id: ObjectId::new(),
                    source: format!("bench:{spec}:{m}"),
                    reason,
                    actor: format!("nfan{}", rng.below(FANS)),
                    action_id: Some(action),
                    comment_id: (reason != NoticeReason::Like).then(ObjectId::new),
                    ref_id: None,
                    at,
                    read: false,
                    archived: false,
                };
                let key = rules.notice_key(&notice);
                groups
                    .entry(key.clone())
                    .or_insert_with(|| NoticeGroup::new(TENANT, reader, &key, reason))
                    .add(notice);
            }
            spec += 1;
        }
        let mut inbox = SeededInbox {
            reader: reader.clone(),
            groups: groups.len(),
            unseen: 0,
            unread: 0,
        };
        for mut group in groups.into_values() {
            if group.last < now - DAY && rng.chance(70) {
                group.mark_read(None);
            }
            inbox.unseen += u64::from(group.last > seen_until);
            inbox.unread += u64::from(group.unread > 0);
            group.version = 1;
            groups_to_write.push(group);
        }
        inboxes.push(inbox);
    }

    let store = bench.store.as_ref();
    let bar = bench
        .ui
        .bar(groups_to_write.len() as u64, "notifications: inboxes");
    stream::iter(groups_to_write)
        .map(|group| {
            let bar = &bar;
            async move {
                anyhow::ensure!(
                    store.put_notice_group(&group).await?,
                    "{}'s group {} was there already",
                    group.owner,
                    group.key
                );
                bar.inc(1);
                anyhow::Ok(())
            }
        })
        .buffer_unordered(SEED_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    for inbox in &inboxes {
        crate::notify::inbox::mark_seen(store, TENANT, &inbox.reader, seen_until).await?;
    }
    bar.finish();
    Ok(inboxes)
}

/// Each reader's counts and first page once, untimed: the caches warm, and
/// what the API says is what was seeded.
async fn warm_up(bench: &Bench, inboxes: &[SeededInbox]) -> anyhow::Result<()> {
    let client = &bench.client;
    for inbox in inboxes {
        let data = client
            .data(&inbox.reader, false, COUNTS_QUERY, &json!({}))
            .await?;
        let counts = &data["notificationCounts"];
        anyhow::ensure!(
            counts["unseenCount"] == inbox.unseen && counts["unreadCount"] == inbox.unread,
            "{}: counts read {counts}; seeded {} unseen, {} unread",
            inbox.reader,
            inbox.unseen,
            inbox.unread
        );
        let data = client
            .data(&inbox.reader, false, PAGE_QUERY, &json!({}))
            .await?;
        let edges = data["notifications"]["edges"]
            .as_array()
            .map_or(0, Vec::len);
        anyhow::ensure!(
            edges == inbox.groups.min(PAGE),
            "{}: a first page of {edges} groups; {} were seeded",
            inbox.reader,
            inbox.groups
        );
        let missing = data["notifications"]["edges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["node"]["action"]["actorId"].as_str().is_none())
            .count();
        anyhow::ensure!(
            missing == 0,
            "{}: {missing} groups of the first page have no action",
            inbox.reader
        );
    }
    Ok(())
}

/// A response read as a rendering client would: the groups counted, any
/// errors kept, the rest skipped.
#[derive(Deserialize)]
struct Response<D> {
    data: Option<D>,
    errors: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CountsData {
    notification_counts: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct PageData {
    notifications: Option<Page>,
}

#[derive(Deserialize)]
struct Page {
    edges: Vec<IgnoredAny>,
}

/// What a timed phase reads.
#[derive(Clone, Copy)]
enum Query {
    Counts,
    Page,
}

impl Query {
    fn name(self) -> &'static str {
        match self {
            Query::Counts => "notifications: counts",
            Query::Page => "notifications: first page",
        }
    }
}

/// Reads `query` as `user`: the round trip and the groups answered, or why
/// it failed.
async fn read(client: &Gql, user: &str, query: Query) -> Result<(Duration, usize), String> {
    let failed = |e: anyhow::Error| format!("{e:#}");
    let sent = Instant::now();
    let (errors, items) = match query {
        Query::Counts => {
            let body: Response<CountsData> = client
                .send_as(user, false, COUNTS_QUERY, &json!({}))
                .await
                .map_err(failed)?;
            let answered = body.data.and_then(|d| d.notification_counts).is_some();
            (body.errors, answered.then_some(0))
        }
        Query::Page => {
            let body: Response<PageData> = client
                .send_as(user, false, PAGE_QUERY, &json!({}))
                .await
                .map_err(failed)?;
            let items = body
                .data
                .and_then(|d| d.notifications)
                .map(|p| p.edges.len());
            (body.errors, items)
        }
    };
    let latency = sent.elapsed();
    if let Some(errors) = errors {
        return Err(errors.to_string());
    }
    let items = items.ok_or_else(|| "no answer in the response".to_owned())?;
    Ok((latency, items))
}

/// What one timed phase measured.
struct Phase {
    secs: f64,
    latencies: Latencies,
    failures: u64,
    /// Groups in the answers.
    items: u64,
}

/// [`CLIENTS`] clients read `query` as random readers for `duration`.
async fn read_phase(
    bench: &Bench,
    query: Query,
    readers: &[String],
    duration: Duration,
    seed: u64,
) -> Phase {
    let message = query.name();
    let spinner = bench.ui.spinner(message);
    let started = Instant::now();
    let until = started + duration;
    let tasks = (0..CLIENTS).map(|task| {
        let spinner = &spinner;
        async move {
            let mut rng = Rng::new(seed ^ ((task as u64) << 24));
            let mut tally = Tally::default();
            while Instant::now() < until {
                let user = rng.pick(readers);
                if tally.record(read(&bench.client, user, query).await) {
                    spinner.inc(1);
                }
            }
            tally
        }
    });
    let outcomes = futures_util::future::join_all(tasks).await;
    let secs = started.elapsed().as_secs_f64();
    let tally = outcomes.into_iter().fold(Tally::default(), Tally::merge);
    if let Some(why) = &tally.first_failure {
        bench.ui.say(&format!("{message}: a request failed: {why}"));
    }
    let phase = Phase {
        secs,
        latencies: tally.latencies,
        failures: tally.failures,
        items: tally.items,
    };
    spinner.finish_with_message(format!(
        "{message}: {:.0}/s",
        phase.latencies.len() as f64 / secs
    ));
    phase
}
