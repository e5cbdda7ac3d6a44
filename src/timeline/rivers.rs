//! Rivers: a reader's timeline materialised only while they read. Built
//! from the reader's sources after their first read, off its path (the
//! newest [`RIVER_START`] actions they give, two pages; see
//! [`super::builds`]): until then their pages merge the sources, as under
//! `pull`. Kept up by fan-out while it exists (so it grows as they keep
//! reading), trimmed back to `river_size` as they read, and dropped by the
//! sweeper once they have not read for `river_idle`. Below a river, reads
//! continue from the sources. A build a crash cut short is built again
//! when a process starts.

use async_trait::async_trait;
use tracing::debug;

use super::audience::{audience, Audience, Reach, AUDIENCE_PAGE};
use super::feed_model::{FeedModel, FeedStrategy};
use super::read::still_pulled;
use super::read::Plan;
use super::sources;
use crate::events::{FeedEventKind, Hub};
use crate::model::{Action, EdgeKind, FanOutState, FeedItem, Millis, Position, Reason};
use crate::store::{
    Backfill, ErrorKind, FeedRange, River, RiverWrite, Store, StoreResult, Timelines,
};

/// The `rivers` model, with its settings.
pub struct Rivers(pub FeedModel);

#[async_trait]
impl FeedStrategy for Rivers {
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience> {
        // Everyone but the actor gets it only into a river.
        let mut readers = audience(store, action, Reach::All).await?;
        let pullers: Vec<String> = readers
            .iter()
            .filter(|(_, kind)| kind.pulled())
            .map(|(r, _)| r.clone())
            .collect();
        let mut active = Vec::new();
        for chunk in pullers.chunks(AUDIENCE_PAGE) {
            let rivers = store.rivers(&action.tenant, chunk).await?;
            active.extend(
                chunk
                    .iter()
                    .zip(rivers)
                    .filter(|(_, river)| river.is_some())
                    .map(|(reader, _)| reader.clone()),
            );
        }
        active.sort_unstable();
        readers.retain(|(r, kind)| !kind.pulled() || active.binary_search(r).is_ok());
        Ok(Audience {
            readers,
            pulled: active.len() < pullers.len(),
        })
    }

    async fn plan(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        now: Millis,
    ) -> StoreResult<Plan> {
        Ok(match open(store, &self.0, tenant, reader, now).await? {
            Some(river) => Plan::pulling_below(river.complete_from),
            // Dormant: everything merged from the sources, and a river
            // wanted.
            None => Plan::pulling_below(Position::MAX).wanting_river(),
        })
    }

    /// Within the reader's river, if they have one: all of it while the
    /// river is being built (its build may have read the sources before
    /// this edge).
    async fn written_from(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        _: EdgeKind,
        _: &str,
    ) -> StoreResult<Option<Position>> {
        Ok(river_of(store, tenant, reader)
            .await?
            .map(|r| match r.complete_from {
                Position::MAX => Position::MIN,
                from => from,
            }))
    }

    /// Drops the rivers idle for `--river-idle`.
    async fn upkeep(&self, store: &dyn Store, now: Millis) -> StoreResult<usize> {
        sweep(store, &self.0, now).await
    }
}

/// `reader`'s river, if they have one.
async fn river_of(store: &dyn Store, tenant: &str, reader: &str) -> StoreResult<Option<River>> {
    let readers = [reader.to_owned()];
    Ok(store.rivers(tenant, &readers).await?.pop().flatten())
}

/// Actions a river starts with, at most (and at most `river_size`): two
/// pages. Built off the reader's path, it still merges no more than a page
/// or two would; below, reads go on merging the sources, and above, the
/// fan-out fills the river.
pub const RIVER_START: usize = 50;

/// How long a build may take, its first record to its last: a record
/// still saying it is being built after that was left by a crash (a start
/// builds it again), and nothing waits for it.
pub const BUILD_LASTS_MS: Millis = 60_000;

/// Whether `reader`'s river is being built at `now`. A build reads the
/// reader's sources before it writes their items: one that read them
/// before an unfollow or a group left writes what they brought after it,
/// so the cleanup waits for the build to end.
pub async fn being_built(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
    now: Millis,
) -> StoreResult<bool> {
    let river = river_of(store, tenant, reader).await?;
    Ok(river.is_some_and(|r| r.building() && now.saturating_sub(r.touched) < BUILD_LASTS_MS))
}

/// Rivers dropped per sweep step.
const SWEEP_STEP: usize = 1_000;

/// `reader`'s river, touched and trimmed if it was last touched long
/// enough ago; `None` if they have none (a build is for the caller to ask).
///
/// Touching and trimming are writes a read makes on the way: when the
/// store refuses writes (a full disk), the read goes on without them, from
/// the river as it is.
pub async fn open(
    store: &dyn Store,
    model: &FeedModel,
    tenant: &str,
    reader: &str,
    now: Millis,
) -> StoreResult<Option<River>> {
    let Some(river) = river_of(store, tenant, reader).await? else {
        return Ok(None);
    };
    if now - river.touched < model.touch_every_ms() {
        return Ok(Some(river));
    }
    match touch(store, model, tenant, reader, river, now).await {
        Ok(touched) => Ok(Some(touched)),
        Err(err) if err.kind == ErrorKind::Unavailable => {
            debug!(tenant, reader, cause = %err, "river not touched: read as it is");
            Ok(Some(river))
        }
        Err(err) => Err(err),
    }
}

/// Builds `reader`'s river if they have none (a build asked by a read may
/// find one built meanwhile, by another process or at start). Returns
/// whether it built one.
///
/// The reader's live streams are told of what it wrote whose fan-out was
/// still under way: that fan-out finds the item written and tells nothing.
pub async fn build_dormant(
    store: &dyn Store,
    hub: &Hub,
    model: &FeedModel,
    tenant: &str,
    reader: &str,
    now: Millis,
) -> StoreResult<bool> {
    if river_of(store, tenant, reader).await?.is_some() {
        return Ok(false);
    }
    let news = build(store, model, tenant, reader, now).await?;
    hub.publish_feed_items(FeedEventKind::Added, tenant, None, news);
    Ok(true)
}

/// Marks `river` read now and trims it to `river_size`; returns it as it
/// then stands.
async fn touch(
    store: &dyn Store,
    model: &FeedModel,
    tenant: &str,
    reader: &str,
    river: River,
    now: Millis,
) -> StoreResult<River> {
    let touched = River {
        touched: now,
        ..river
    };
    store
        .write_river(tenant, reader, RiverWrite::Put(touched))
        .await?;
    let cut = RiverWrite::Keep(model.river_size);
    store.write_river(tenant, reader, cut).await?;
    // Trimming may have raised where the river is complete from.
    Ok(river_of(store, tenant, reader).await?.unwrap_or(touched))
}

/// Builds `reader`'s river: first a record saying nothing is complete yet
/// (so the fan-out starts delivering to it, and reads pull everything),
/// then the newest actions of the sources, then the record saying from
/// where the river is complete. Returns the items it wrote of actions
/// whose fan-out was not done (news the reader's live streams have not
/// heard: that fan-out finds them written).
async fn build(
    store: &dyn Store,
    model: &FeedModel,
    tenant: &str,
    reader: &str,
    now: Millis,
) -> StoreResult<Vec<FeedItem>> {
    let building = River {
        complete_from: Position::MAX,
        touched: now,
    };
    store
        .write_river(tenant, reader, RiverWrite::Put(building))
        .await?;
    // Read after the record: an edge made before it is among them, and
    // one made after it finds the river being built and writes what it
    // brings into it ([`Rivers::written_from`]).
    let all = sources::load(store, tenant, reader).await?;
    let start = model.river_size.min(RIVER_START);
    let range = FeedRange {
        older_than: None,
        newer_than: None,
        limit: start + 1,
        from_oldest: false,
    };
    let mut scanned = sources::pull(store, tenant, reader, &all, range).await?;
    let complete_from = if scanned.len() > start {
        scanned.truncate(start);
        scanned.last().map_or(Position::MIN, |i| i.position())
    } else {
        Position::MIN
    };
    let ids: Vec<_> = scanned.iter().map(|i| i.action_id).collect();
    let actions = store.get_actions(tenant, &ids).await?;
    let actions: std::collections::HashMap<_, _> = actions.into_iter().map(|a| (a.id, a)).collect();
    let items: Vec<Backfill> = scanned
        .into_iter()
        .filter(|i| {
            actions
                .get(&i.action_id)
                .is_some_and(|a| still_pulled(i.reason.kind, a))
        })
        .map(|i| Backfill {
            action_id: i.action_id,
            relevancy: i.relevancy,
            reason: Reason::new(i.reason.kind, i.reason.actor_id),
            // The reader saw it pulled already: its stamp is its own time,
            // as a pulled item's, not a change of now.
            changed: i.relevancy,
        })
        .collect();
    let written = store.fill_river(tenant, reader, &items).await?;
    let filled = written.len();
    let news = written
        .into_iter()
        .filter(|i| {
            actions
                .get(&i.action_id)
                .is_some_and(|a| a.fan_out.state != FanOutState::Done)
        })
        .collect();
    let river = River {
        complete_from,
        touched: now,
    };
    store
        .write_river(tenant, reader, RiverWrite::Put(river))
        .await?;
    debug!(tenant, reader, items = filled, "river built");
    Ok(news)
}

/// Takes up the builds a crash cut short, at start: a river whose record
/// still says it is being built would be read as pulling everything until
/// the sweep drops it, and never built. The idle ones go first (as the
/// sweep would drop them); each other one is built again now. A build
/// under way in another process meanwhile is safe to build again beside:
/// each build writes its record only once it has read the sources after
/// its first record, and the fan-out fills the river from that record on.
/// Returns how many were built.
pub async fn finish_builds(
    store: &dyn Store,
    model: &FeedModel,
    now: Millis,
) -> StoreResult<usize> {
    sweep(store, model, now).await?;
    let mut built = 0;
    loop {
        let building = store.building_rivers(SWEEP_STEP).await?;
        for (tenant, reader) in &building {
            build(store, model, tenant, reader, now).await?;
            debug!(tenant, reader, "a river left being built, built");
        }
        built += building.len();
        if building.len() < SWEEP_STEP {
            return Ok(built);
        }
    }
}

/// Drops the rivers not read for `river_idle`. Returns how many.
pub async fn sweep(store: &dyn Store, model: &FeedModel, now: Millis) -> StoreResult<usize> {
    let before = now.saturating_sub(model.river_idle_ms());
    let mut dropped = 0;
    loop {
        let idle = store.idle_rivers(before, SWEEP_STEP).await?;
        for (tenant, reader) in &idle {
            let items = store.write_river(tenant, reader, RiverWrite::Drop).await?;
            debug!(tenant, reader, items, "idle river dropped");
        }
        dropped += idle.len();
        if idle.len() < SWEEP_STEP {
            return Ok(dropped);
        }
    }
}
