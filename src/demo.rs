//! `riverfeed serve --demo`: a recruiting organisation in the `demo` tenant,
//! for the web demo at `/demo/`.
//!
//! [`roster`] holds the people, teams, positions and applicants (also served
//! to the page as `/demo/roster.json`); [`history`] generates a month of their
//! actions, comments and likes. [`seed`] writes both through the `Store` trait
//! when the tenant is empty, then runs the fan-out until every action is
//! delivered, so the first page load shows full feeds.

pub mod history;
pub mod roster;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use tracing::info;

pub use self::history::History;
pub use self::roster::Roster;
use crate::clock::Clock;
use crate::events::Hub;
use crate::fanout::{Worker, WorkerConfig};
use crate::model::{
    Action, Comment, Counts, EdgeKind, FanOut, Group, GroupKind, MembershipRole, Millis, ObjectId,
    Scope, User,
};
use crate::relevancy::BumpRules;
use crate::store::{Existing, JoinOutcome, Store, StoreError, StoreResult};
use crate::store::{Graph, Reactions};
use crate::timeline::FeedModel;

/// The tenant the demo lives in.
pub const TENANT: &str = "demo";

/// When a seeded like happened: this long after its action.
const LIKED_AFTER: crate::model::Millis = 60_000;

/// The demo organisation.
pub fn roster() -> Roster {
    Roster::new(TENANT)
}

/// What [`seed`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seeded {
    /// The tenant already had users: nothing was written.
    AlreadyThere,
    /// The tenant was empty and now holds the demo.
    Fresh {
        actions: usize,
        comments: usize,
        likes: usize,
    },
}

/// Refuses `--demo` over a descriptor file without the types the demo's
/// history records.
pub fn check_descriptors(catalog: &crate::descriptor::Catalog) -> anyhow::Result<()> {
    let history = History::generate(&roster(), history::SPAN * 2);
    if let Some(a) = history
        .actions
        .iter()
        .find(|a| !catalog.conforms(&a.descriptor))
    {
        anyhow::bail!(
            "--demo records {} actions, which the descriptor file does not define as the \
             built-in file does; run the demo without --descriptors",
            a.descriptor.type_name()
        );
    }
    Ok(())
}

/// Seeds the demo tenant unless it already has any of the roster's users,
/// then delivers every pending action (with a worker of its own, so the
/// feeds are full before the server answers its first request).
///
/// The seeded comments bump their actions by `rules`, as live ones would.
pub async fn seed(
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    rules: BumpRules,
    model: FeedModel,
) -> StoreResult<Seeded> {
    let roster = roster();
    let ids: Vec<String> = roster.users.iter().map(|u| u.id.to_owned()).collect();
    if !store.get_users(TENANT, &ids).await?.is_empty() {
        info!(tenant = TENANT, "demo tenant already seeded");
        drain(store, clock, rules, model).await?;
        return Ok(Seeded::AlreadyThere);
    }
    let started = Instant::now();
    // The history ends one largest boost before now: the seeded comments'
    // bumps then stay in the past too, and whatever happens live (a post, a
    // comment's bump) lands on top.
    let history = History::generate(&roster, clock.now() - largest_boost(&rules));
    let mut lap = Laps::new();
    people(store.as_ref(), &roster, &history).await?;
    let people_ms = lap.next();
    let ids = actions(store.as_ref(), &roster, &history).await?;
    // Reactions after delivery: a comment bumps the action in the feeds it
    // is already in (to the comment's time plus the rule's boost).
    drain(store, clock, rules, model).await?;
    let actions_ms = lap.next();
    reactions(store.as_ref(), &history, &ids).await?;
    drain(store, clock, rules, model).await?;
    let reactions_ms = lap.next();
    info!(
        tenant = TENANT,
        users = roster.users.len(),
        actions = history.actions.len(),
        comments = history.comments.len(),
        likes = history.likes.len(),
        people_ms,
        actions_ms,
        reactions_ms,
        took_ms = started.elapsed().as_millis() as u64,
        "demo tenant seeded"
    );
    Ok(Seeded::Fresh {
        actions: history.actions.len(),
        comments: history.comments.len(),
        likes: history.likes.len(),
    })
}

/// Milliseconds per step, for the log.
struct Laps(Instant);

impl Laps {
    fn new() -> Self {
        Self(Instant::now())
    }

    fn next(&mut self) -> u64 {
        let now = Instant::now();
        let ms = now.duration_since(self.0).as_millis() as u64;
        self.0 = now;
        ms
    }
}

fn largest_boost(rules: &BumpRules) -> Millis {
    [
        rules.assigned,
        rules.supervisor,
        rules.participated,
        rules.department,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0)
    .max(0)
}

/// Users, groups, supervisors, assignments, follows and friendships.
async fn people(store: &dyn Store, roster: &Roster, history: &History) -> StoreResult<()> {
    concurrently(&roster.users, |person| async move {
        let user = User {
            id: person.id.into(),
            name: Some(person.name.into()),
        };
        store.put_user(TENANT, &user, Existing::Replace).await
    })
    .await?;
    // One at a time: the first join creates the group.
    for person in &roster.users {
        for (unit, kind) in [
            (person.department, GroupKind::Department),
            (person.team, GroupKind::Team),
        ] {
            let role = if roster.leads(person.id, unit) {
                MembershipRole::Lead
            } else {
                MembershipRole::Member
            };
            let group = Group {
                id: unit.into(),
                kind,
            };
            if let JoinOutcome::KindMismatch(existing) =
                // Members since always: the history is older than they are.
                store.join_group(TENANT, &group, person.id, role, 0).await?
            {
                return Err(StoreError::invalid(format!(
                    "demo group {} exists as a {:?}",
                    existing.id, existing.kind
                )));
            }
        }
    }
    concurrently(&roster.users, |person| async move {
        if let Some(boss) = person.supervisor {
            store.set_supervisor(TENANT, person.id, Some(boss)).await?;
        }
        for assignment in &person.assignments {
            store
                .set_assignment(TENANT, person.id, assignment, true)
                .await?;
        }
        Ok(())
    })
    .await?;
    let edges = history
        .follows
        .iter()
        .map(|edge| (EdgeKind::Follows, edge))
        .chain(history.friends.iter().map(|edge| (EdgeKind::Friend, edge)));
    concurrently(edges, |(kind, (from, to))| async move {
        store
            .set_edge(TENANT, kind, from, to, true)
            .await
            .map(|_| ())
    })
    .await
}

/// Stores every action. Ids are taken oldest first, so they follow
/// `conducted` (slices read newest id first). Returns them in history order.
async fn actions(
    store: &dyn Store,
    roster: &Roster,
    history: &History,
) -> StoreResult<Vec<ObjectId>> {
    let actions: Vec<Action> = history
        .actions
        .iter()
        .map(|planned| {
            // As `recordAction` does: a group-scoped action is shared with
            // the actor's groups of that kind.
            let scope_groups = roster
                .user(planned.actor)
                .map(|person| match planned.scope {
                    Scope::Team => vec![person.team.to_owned()],
                    Scope::Department => vec![person.department.to_owned()],
                    Scope::Public | Scope::Restricted => Vec::new(),
                })
                .unwrap_or_default();
            Action {
                id: ObjectId::new(),
                tenant: TENANT.into(),
                actor_id: planned.actor.into(),
                conducted: planned.conducted,
                hidden: false,
                scope: planned.scope,
                readers: planned.readers.iter().map(|&r| r.into()).collect(),
                scope_groups,
                ref_ids: planned.ref_ids.iter().map(|&r| r.into()).collect(),
                tags: planned.tags.iter().map(|&t| t.into()).collect(),
                descriptor: planned.descriptor.clone(),
                fan_out: FanOut::pending(),
                counts: Counts::default(),
                expires_at: None,
                to: Vec::new(),
                foreign: None,
            }
        })
        .collect();
    concurrently(&actions, |action| async move {
        store.insert_action(action).await.map(drop)
    })
    .await?;
    Ok(actions.iter().map(|a| a.id).collect())
}

async fn reactions(store: &dyn Store, history: &History, ids: &[ObjectId]) -> StoreResult<()> {
    // Comment ids are taken in the order the comments were made: threads
    // read oldest id first.
    let comments: Vec<Comment> = history
        .comments
        .iter()
        .map(|planned| Comment {
            id: ObjectId::new(),
            action_id: ids[planned.action],
            author_id: planned.author.into(),
            text: planned.text.into(),
            created: planned.created,
        })
        .collect();
    concurrently(&comments, |comment| async move {
        store.add_comment(TENANT, comment).await.map(|_| ())
    })
    .await?;
    // Each like notifies its action's actor, as a like through the API
    // does: the worker writes it from the job, a minute after the action.
    concurrently(&history.likes, |&(action, user)| async move {
        let at = history.actions[action].conducted + LIKED_AFTER;
        store
            .set_like(TENANT, ids[action], user, true, at)
            .await
            .map(|_| ())
    })
    .await
}

/// Store calls in flight at once while seeding. The embedded store takes its
/// writes one at a time anyway; a database server overlaps round trips.
const IN_FLIGHT: usize = 8;

/// Runs `each` over `items`, `IN_FLIGHT` at a time; the first error stops it.
async fn concurrently<I, F, Fut>(items: I, each: F) -> StoreResult<()>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = StoreResult<()>>,
{
    stream::iter(items)
        .map(each)
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await
}

/// Workers the seeder runs side by side to deliver and bump.
const DRAIN_WORKERS: usize = 4;

/// Runs fan-out workers of its own until nothing is pending. Their leases
/// keep them off each other's jobs. Events go to a hub nobody listens to: no
/// one is connected yet.
async fn drain(
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    rules: BumpRules,
    model: FeedModel,
) -> StoreResult<()> {
    let hub = Hub::new(16);
    let run = (0..DRAIN_WORKERS).map(|n| {
        let worker = Worker::new(
            store.clone(),
            hub.clone(),
            clock.clone(),
            WorkerConfig {
                id: format!("demo-seeder-{n}-{}", ObjectId::new()),
                claim_limit: 8,
                bump_rules: rules,
                model,
                ..WorkerConfig::default()
            },
            Default::default(),
        );
        async move {
            while worker.run_once().await? > 0 {}
            Ok::<_, StoreError>(())
        }
    });
    futures_util::future::try_join_all(run).await.map(|_| ())
}
