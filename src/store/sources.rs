//! What the feed models read and keep beside the materialised timelines:
//! where each of a reader's sources begins for them ([`Cut`], kept as a
//! [record](super::records)), outboxes (an actor's, a group's, the
//! actions naming a reader, those sent to a group) read many at once, and rivers (timelines
//! materialised only for readers active lately).

use super::metered::port;
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

/// Whose actions an outbox lists, newest first by when they happened.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outbox {
    /// Everything one actor did (hidden actions too).
    Actor(String),
    /// The `TEAM` / `DEPARTMENT` actions shared with one group, as they are
    /// scoped now.
    Group(String),
    /// The `RESTRICTED` actions that name one reader, as they are scoped
    /// now.
    Named(String),
    /// The `PUBLIC` actions sent to one group (`to`), as they are scoped
    /// now: what its followers read.
    Sent(String),
}

/// One action an outbox lists: where it stands, and who did it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posted {
    pub position: Position,
    pub actor: String,
}

/// Entries a river keeps by default (`--river-size`). The store owns it
/// (MongoDB's settings start from it); the feed model reads it from here.
pub const DEFAULT_RIVER_SIZE: usize = 800;

/// A reader's river: their timeline materialised while they read. Every
/// item their pulled sources give at or above `complete_from` is in the
/// timeline; below it, reads continue from the sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct River {
    pub complete_from: Position,
    /// When the reader last read (to a precision the model chooses).
    pub touched: Millis,
}

impl River {
    /// Whether its record is a build's first (complete from nowhere: a
    /// build under way, or one a crash cut short).
    pub fn building(&self) -> bool {
        self.complete_from == Position::MAX
    }
}

port! {
/// Outboxes as the pull side of the models reads them.
pub trait SourceStore: Send + Sync {
    /// Several outbox ranges at once, one answer per read in order: what a
    /// pulled page reads. Backends that can read them in one step do.
    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>>;
}
}

/// A change to one reader's river, as [`RiverStore::write_river`] makes
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RiverWrite {
    /// Creates or replaces the river's record.
    Put(River),
    /// Keeps the newest this many of its items and removes the rest,
    /// moving `complete_from` up to the oldest kept.
    Keep(usize),
    /// Removes the river: its record and every item of it.
    Drop,
}

port! {
/// Rivers: which readers have one, building, touching, trimming and
/// dropping them. A river's items are the timeline's items that came from a
/// pulled source (a follow, a friendship, a group, being named) and were not
/// bumped ([`ReasonKind::pulled`](crate::model::ReasonKind::pulled));
/// dropping or trimming a river removes those only (own and bumped items
/// stay).
pub trait RiverStore: Send + Sync {
    /// The rivers of `readers`, one answer per reader in order (`None`
    /// where they have none). One round trip.
    async fn rivers(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<Option<River>>>;
    /// Up to `limit` rivers (tenant, reader) last touched before `before`,
    /// across tenants.
    async fn idle_rivers(&self, before: Millis, limit: usize)
        -> StoreResult<Vec<(String, String)>>;
    /// Up to `limit` rivers (tenant, reader) whose record says they are
    /// being built (complete from nowhere: [`Position::MAX`]), across
    /// tenants: what a build cut short left.
    async fn building_rivers(&self, limit: usize) -> StoreResult<Vec<(String, String)>>;
    /// Changes `reader`'s river as `write` says. Returns how many items
    /// went.
    async fn write_river(&self, tenant: &str, reader: &str, write: RiverWrite)
        -> StoreResult<u64>;
}
}
