//! What the feed models read and keep beside the materialised timelines:
//! where each of a reader's sources begins for them ([`Cut`]), which actors
//! are never fanned out (celebrities), outboxes read many at once, and rivers
//! (timelines materialised only for readers active lately).

use async_trait::async_trait;

use super::{FeedRange, StoreResult};
use crate::model::{EdgeKind, Millis, Position};

/// Where one source begins for one reader: the actor's actions strictly
/// newer than `since` reach the reader by the `kind` edge. A follow writes it
/// (the follow's time, or the oldest action its backfill showed); an edge
/// with no cut shows the actor's whole history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    pub kind: EdgeKind,
    pub actor: String,
    pub since: Position,
    /// When the edge began (as a position at that time): actions after it
    /// were fanned out while it stood; older ones came by its backfill.
    pub began: Position,
    /// Set when the edge ended keeping its history: what came by it is
    /// what lies strictly below this (and above `since`).
    pub until: Option<Position>,
}

/// A reader's river: their timeline materialised while they read. Every
/// item their pulled sources give at or above `complete_from` is in the
/// timeline; below it, reads continue from the sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct River {
    pub complete_from: Position,
    /// When the reader last read (to a precision the model chooses).
    pub touched: Millis,
}

/// The graph as the pull side of the models reads it.
#[async_trait]
pub trait SourceStore: Send + Sync {
    /// Which of `readers` have a `kind` edge to `actor` (follow it, or are
    /// its friends). One round trip.
    async fn edges_among(
        &self,
        tenant: &str,
        kind: EdgeKind,
        readers: &[String],
        actor: &str,
    ) -> StoreResult<Vec<String>>;
    /// Sets a cut of `reader` (replacing theirs for that edge).
    async fn set_cut(&self, tenant: &str, reader: &str, cut: &Cut) -> StoreResult<()>;
    /// Clears `reader`'s cut for the `kind` edge to `actor`.
    async fn clear_cut(
        &self,
        tenant: &str,
        reader: &str,
        kind: EdgeKind,
        actor: &str,
    ) -> StoreResult<()>;
    /// Every cut of `reader`.
    async fn cuts(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Cut>>;
    /// Notes that `user`'s actions are no longer fanned out to followers
    /// (hybrid). For good: their readers merge their outbox in from then on.
    async fn mark_celebrity(&self, tenant: &str, user: &str) -> StoreResult<()>;
    /// Which of `users` are marked celebrities.
    async fn celebrities(&self, tenant: &str, users: &[String]) -> StoreResult<Vec<String>>;
    /// A small value the deployment keeps about itself (the feed model it
    /// last ran…), by key.
    async fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;
    /// Sets a [`SourceStore::meta`] value.
    async fn set_meta(&self, key: &str, value: &[u8]) -> StoreResult<()>;
    /// Several outbox ranges at once, one answer per read in order: what a
    /// pulled page reads. Backends that can read them in one step do.
    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(String, FeedRange)],
    ) -> StoreResult<Vec<Vec<Position>>>;
}

/// Rivers: which readers have one, building, touching, trimming and
/// dropping them. A river's items are the timeline's items that came by a
/// follow or friendship and were not bumped; dropping or trimming a river
/// removes those only (own, group, named and bumped items stay).
#[async_trait]
pub trait RiverStore: Send + Sync {
    /// `reader`'s river, if they have one.
    async fn river(&self, tenant: &str, reader: &str) -> StoreResult<Option<River>>;
    /// Creates or replaces `reader`'s river record.
    async fn put_river(&self, tenant: &str, reader: &str, river: &River) -> StoreResult<()>;
    /// Which of `readers` have a river. One round trip.
    async fn rivers_among(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<String>>;
    /// Up to `limit` rivers (tenant, reader) last touched before `before`,
    /// across tenants.
    async fn idle_rivers(&self, before: Millis, limit: usize)
        -> StoreResult<Vec<(String, String)>>;
    /// Removes `reader`'s river: its record and its items. Returns how many
    /// items went.
    async fn drop_river(&self, tenant: &str, reader: &str) -> StoreResult<u64>;
    /// Keeps the newest `keep` items of `reader`'s river and removes the
    /// rest, moving `complete_from` up to the oldest kept. Returns how many
    /// items went.
    async fn trim_river(&self, tenant: &str, reader: &str, keep: usize) -> StoreResult<u64>;
}
