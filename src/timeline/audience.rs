//! Who an action reaches: its whole audience (each model keeps what it
//! writes for), the live readers told about what they pull, and who among
//! some readers pulls an action (a bump raises it for them too).

use std::collections::HashMap;

use crate::events::{FeedEventKind, Hub, Signal};
use crate::model::{Action, EdgeKind, FeedItem, Reason, ReasonKind, Scope};
use crate::store::Graph;
use crate::store::{Direction, Store, StoreResult};

use super::sources::{Followed, Source, Sources};
use crate::store::Records;

/// Page size when reading followers and group members for an audience.
pub(super) const AUDIENCE_PAGE: usize = 10_000;

/// The readers an action's fan-out writes items for, as a model picks them.
#[derive(Debug, Default)]
pub struct Audience {
    /// Sorted by reader, one reason each (the most specific).
    pub readers: Vec<(String, ReasonKind)>,
    /// Some readers may have been left to pull it at read.
    pub pulled: bool,
}

/// How much of an action's audience a fan-out writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Everyone who should see it.
    All,
    /// All but the actor's followers and friends (they pull it); the
    /// followers of the groups it was sent to are written for.
    NotFollowers,
    /// The actor alone (everyone else pulls it).
    Actor,
}

/// Tells the live readers who pull `action` (online, not already `told`,
/// and reached by it: following or befriending its actor, in a group it
/// is shared with, or named) that it was `kind` (added, or removed) in
/// their feed, here and in the other processes: work that grows with the
/// readers online, not with the followers. `told` is sorted. Returns how
/// many were told here.
pub async fn tell_online(
    store: &dyn Store,
    hub: &Hub,
    kind: FeedEventKind,
    action: &std::sync::Arc<Action>,
    told: Vec<String>,
) -> StoreResult<usize> {
    if hub.relays() {
        hub.forward(Signal::Pulled {
            kind: kind.into(),
            action: (**action).clone(),
            told: told.clone(),
        });
    }
    tell_online_here(store, hub, kind, action, &told).await
}

/// As [`tell_online`], for the readers online in this process only.
pub async fn tell_online_here(
    store: &dyn Store,
    hub: &Hub,
    kind: FeedEventKind,
    action: &std::sync::Arc<Action>,
    told: &[String],
) -> StoreResult<usize> {
    let mut online = hub.online_readers(&action.tenant);
    online.retain(|r| *r != action.actor_id && told.binary_search(r).is_err());
    if online.is_empty() {
        return Ok(0);
    }
    let pulling = pulled_readers(store, action, &online, false).await?;
    let count = pulling.len();
    let items = pulling.into_iter().map(|(owner, reason)| FeedItem {
        owner,
        action_id: action.id,
        relevancy: action.conducted,
        reason: Reason::new(reason, &action.actor_id),
        // As a pulled item's stamp: where a resume finds it again.
        changed: action.conducted,
        copy: None,
    });
    // A removed item's action reads null, as for a materialised one.
    let shared = (kind != FeedEventKind::Removed).then_some(action);
    hub.deliver_feed_items(kind, &action.tenant, shared, items);
    Ok(count)
}

/// Tells the live readers that `action` left their feeds (hidden, deleted
/// or expired): those whose items were `removed`, and, where readers pull
/// (`pulls`), those online who pulled it.
pub async fn announce_removed(
    store: &dyn Store,
    hub: &Hub,
    pulls: bool,
    action: &Action,
    removed: Vec<FeedItem>,
) -> StoreResult<()> {
    let mut told: Vec<String> = removed.iter().map(|i| i.owner.clone()).collect();
    hub.publish_feed_items(FeedEventKind::Removed, &action.tenant, None, removed);
    if pulls {
        told.sort_unstable();
        let shared = std::sync::Arc::new(action.clone());
        tell_online(store, hub, FeedEventKind::Removed, &shared, told).await?;
    }
    Ok(())
}

/// Which of `candidates` have `action` in their feed by a source they
/// pull, and why: a `PUBLIC` one by a follow or friendship; a `TEAM` /
/// `DEPARTMENT` one by a group it is shared with that they joined before
/// it; a `RESTRICTED` one by being named. With `check_cuts`, follows and
/// friendships go by each edge's cut and by edges that ended keeping their
/// history (a store call per candidate: for a few); without, every standing
/// edge counts (a new action is after any cut).
pub async fn pulled_readers(
    store: &dyn Store,
    action: &Action,
    candidates: &[String],
    check_cuts: bool,
) -> StoreResult<Vec<(String, ReasonKind)>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    match action.scope {
        Scope::Public => by_edges(store, action, candidates, check_cuts).await,
        Scope::Team | Scope::Department => by_groups(store, action, candidates).await,
        Scope::Restricted => Ok(candidates
            .iter()
            .filter(|c| action.readers.contains(c))
            .map(|c| (c.clone(), ReasonKind::Restricted))
            .collect()),
    }
}

/// [`pulled_readers`] of a group-scoped action: members of its groups who
/// joined before it.
async fn by_groups(
    store: &dyn Store,
    action: &Action,
    candidates: &[String],
) -> StoreResult<Vec<(String, ReasonKind)>> {
    let reason = if action.scope == Scope::Team {
        ReasonKind::Team
    } else {
        ReasonKind::Department
    };
    let mut out: Vec<(String, ReasonKind)> = Vec::new();
    for group in &action.scope_groups {
        let members = store
            .members_among(&action.tenant, group, candidates)
            .await?;
        out.extend(
            members
                .into_iter()
                .filter(|(_, since)| *since <= action.conducted)
                .map(|(reader, _)| (reader, reason)),
        );
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|later, first| later.0 == first.0);
    Ok(out)
}

/// [`pulled_readers`] of a public action: by follows and friendships of
/// its actor, and follows of the groups it was sent to.
async fn by_edges(
    store: &dyn Store,
    action: &Action,
    candidates: &[String],
    check_cuts: bool,
) -> StoreResult<Vec<(String, ReasonKind)>> {
    let (tenant, actor) = (action.tenant.as_str(), action.actor_id.as_str());
    let (follows, friends) = tokio::join!(
        store.edges_among(tenant, EdgeKind::Follows, candidates, actor),
        store.edges_among(tenant, EdgeKind::Friend, candidates, actor),
    );
    // Per reader, the edges that could bring it, as their sources.
    let mut by_reader: HashMap<String, Sources> = HashMap::new();
    fn of<'m>(
        by_reader: &'m mut HashMap<String, Sources>,
        reader: String,
        actor: &str,
    ) -> &'m mut Sources {
        by_reader
            .entry(reader)
            .or_insert_with(|| Sources::actors(vec![Source::new(actor)]))
    }
    for (kind, readers) in [(EdgeKind::Follows, follows?), (EdgeKind::Friend, friends?)] {
        for reader in readers {
            of(&mut by_reader, reader, actor).actors[0].stands(kind);
        }
    }
    for group in &action.to {
        let readers = store
            .edges_among(tenant, EdgeKind::Group, candidates, group)
            .await?;
        for reader in readers {
            let followed = Followed::standing(group);
            of(&mut by_reader, reader, actor).followed.push(followed);
        }
    }
    if check_cuts {
        for reader in candidates {
            for cut in store.cuts(tenant, reader).await? {
                let sources = of(&mut by_reader, reader.clone(), actor);
                if cut.kind != EdgeKind::Group && cut.actor == actor {
                    sources.actors[0].apply(&cut);
                } else if cut.kind == EdgeKind::Group && action.to.contains(&cut.actor) {
                    sources.follow_cut(&cut);
                }
            }
        }
    }
    let mut out: Vec<(String, ReasonKind)> = by_reader
        .into_iter()
        .filter_map(|(reader, sources)| Some((reader, sources.public_reason(action)?)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Who should see an action, each with the most specific reason that applies:
/// the actor always; followers and friends, and the followers of the groups
/// it was sent to, for `PUBLIC`; members of the action's
/// groups for `TEAM` / `DEPARTMENT`; the named readers for `RESTRICTED`. As
/// far as `reach` goes: the rest pull it at read.
pub async fn audience(
    store: &dyn Store,
    action: &Action,
    reach: Reach,
) -> StoreResult<Vec<(String, ReasonKind)>> {
    let tenant = action.tenant.as_str();
    // Every source lists its users in id order, so the runs concatenated
    // here sort in close to linear time, and duplicates end up side by side:
    // no hashing of a million ids for a large audience.
    let mut readers: Vec<(String, ReasonKind)> = Vec::new();
    let mut add = |user: String, kind: ReasonKind| readers.push((user, kind));
    match action.scope {
        _ if reach == Reach::Actor => {}
        Scope::Public => {
            // The actor's followers and friends, the groups' followers.
            let actor = action.actor_id.as_str();
            let followed = EdgeKind::TO_USERS
                .into_iter()
                .filter(|_| reach == Reach::All)
                .map(|k| (k, actor));
            let sent = action.to.iter().map(|g| (EdgeKind::Group, g.as_str()));
            for (kind, to) in followed.chain(sent) {
                let reason = kind.reason();
                let page = |after: Option<String>| async move {
                    store
                        .edges(
                            tenant,
                            kind,
                            Direction::In,
                            to,
                            after.as_deref(),
                            AUDIENCE_PAGE,
                        )
                        .await
                };
                for_each_page(page, |user| add(user, reason)).await?;
            }
        }
        Scope::Team | Scope::Department => {
            let reason = if action.scope == Scope::Team {
                ReasonKind::Team
            } else {
                ReasonKind::Department
            };
            for group in &action.scope_groups {
                let page = |after: Option<String>| async move {
                    store
                        .group_members(tenant, group, after.as_deref(), AUDIENCE_PAGE)
                        .await
                };
                for_each_page(page, |user| add(user, reason)).await?;
            }
        }
        Scope::Restricted => {
            for reader in &action.readers {
                add(reader.clone(), ReasonKind::Restricted);
            }
        }
    }
    add(action.actor_id.clone(), ReasonKind::Own);
    // Within one reader, the most specific reason first; then keep that one.
    // A stable order also keeps each batch's writes local in the key space.
    readers.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| b.1.priority().cmp(&a.1.priority()))
    });
    readers.dedup_by(|later, first| later.0 == first.0);
    Ok(readers)
}

/// Walks a user list page by page (each page starts after the last id of the
/// previous one) and hands every id to `each`.
async fn for_each_page<F, Fut>(mut page: F, mut each: impl FnMut(String)) -> StoreResult<()>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = StoreResult<Vec<String>>>,
{
    let mut after = None;
    loop {
        let ids = page(after.take()).await?;
        let last_page = ids.len() < AUDIENCE_PAGE;
        after = ids.last().cloned();
        ids.into_iter().for_each(&mut each);
        if last_page {
            return Ok(());
        }
    }
}
