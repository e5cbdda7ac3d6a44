//! The feed models: what is materialised ahead of time and what is merged
//! in at read. Whatever the model, a reader sees the same feed. Each model
//! is one file ([`super::push`], [`super::pull`], [`super::rivers`],
//! [`super::hybrid`]) implementing [`Model`]; [`FeedModel`] holds the
//! deployment's choice and settings.
//!
//! A feed's items come from two places: the reader's timeline (what the
//! fan-out, a backfill or a bump wrote) and the reader's pulled sources (the
//! outboxes of the accounts they follow or befriend, each from its cut). A
//! model decides, per reader, which sources are pulled and below which
//! position (see [`Plan`](super::read::Plan)):
//!
//! - `push`: everything is materialised at fan-out; nothing is pulled.
//! - `pull`: follows and friendships are never materialised; every page
//!   merges the sources' outboxes.
//! - `rivers`: a reader who reads has a river, built from the sources on
//!   their first read and kept up by fan-out; below the river (and for
//!   readers with none) the sources are pulled.
//! - `hybrid`: push, except that actors with more followers than the
//!   celebrity threshold are never fanned out; their outboxes are pulled.
//!
//! In every model the actor's own items, TEAM / DEPARTMENT items and the
//! RESTRICTED items naming a reader are materialised at fan-out: their
//! audiences are bounded by group and list sizes, not by followers.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use super::audience::Audience;
use super::read::Plan;
use crate::model::{Action, Millis, Position};
use crate::store::{Store, StoreResult};

/// What a feed model decides: who the fan-out writes for, how a feed is
/// read, where a follow's backfill goes, and its upkeep.
#[async_trait]
pub trait Model: Send + Sync {
    /// Who `action`'s fan-out writes items for, and whether followers or
    /// friends were left to pull it at read.
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience>;
    /// How `reader`'s feed is read at `now`.
    async fn plan(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        now: Millis,
    ) -> StoreResult<Plan>;
    /// From where a new follow's backfill of `actor` is written into
    /// `reader`'s timeline; `None`: nowhere, the reader pulls it.
    async fn written_from(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        actor: &str,
    ) -> StoreResult<Option<Position>>;
    /// Background upkeep due at `now`; returns how much it did.
    async fn upkeep(&self, _store: &dyn Store, _now: Millis) -> StoreResult<usize> {
        Ok(0)
    }
}

/// Which model a deployment runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum ModelKind {
    Push,
    Pull,
    #[default]
    Rivers,
    Hybrid,
}

impl ModelKind {
    pub const ALL: [ModelKind; 4] = [
        ModelKind::Push,
        ModelKind::Pull,
        ModelKind::Rivers,
        ModelKind::Hybrid,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Push => "push",
            ModelKind::Pull => "pull",
            ModelKind::Rivers => "rivers",
            ModelKind::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A model with its settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedModel {
    pub kind: ModelKind,
    /// Items of a river kept (rivers).
    pub river_size: usize,
    /// A river not read for this long is dropped (rivers).
    pub river_idle: Duration,
    /// Actors with more followers than this are not fanned out (hybrid).
    pub celebrity_threshold: usize,
}

/// Default `--river-size`.
pub const DEFAULT_RIVER_SIZE: usize = 800;
/// Default `--river-idle`.
pub const DEFAULT_RIVER_IDLE: Duration = Duration::from_secs(24 * 3600);
/// Default `--celebrity-threshold`.
pub const DEFAULT_CELEBRITY_THRESHOLD: usize = 10_000;

impl Default for FeedModel {
    fn default() -> Self {
        Self::of(ModelKind::default())
    }
}

impl FeedModel {
    /// `kind` with the default settings.
    pub fn of(kind: ModelKind) -> Self {
        Self {
            kind,
            river_size: DEFAULT_RIVER_SIZE,
            river_idle: DEFAULT_RIVER_IDLE,
            celebrity_threshold: DEFAULT_CELEBRITY_THRESHOLD,
        }
    }

    /// The river idle time in milliseconds.
    pub fn river_idle_ms(&self) -> Millis {
        Millis::try_from(self.river_idle.as_millis()).unwrap_or(Millis::MAX)
    }

    /// How often a river's `touched` is written and its size trimmed: a
    /// read in between writes nothing.
    pub fn touch_every_ms(&self) -> Millis {
        (self.river_idle_ms() / 24).clamp(1, 3_600_000)
    }

    /// Whether the fan-out writes an item for every follower and friend.
    pub fn pushes_all(&self) -> bool {
        self.kind == ModelKind::Push
    }

    /// The model itself.
    pub fn behaviour(&self) -> Box<dyn Model> {
        match self.kind {
            ModelKind::Push => Box::new(super::push::Push),
            ModelKind::Pull => Box::new(super::pull::Pull),
            ModelKind::Rivers => Box::new(super::rivers::Rivers(*self)),
            ModelKind::Hybrid => Box::new(super::hybrid::Hybrid(*self)),
        }
    }
}
