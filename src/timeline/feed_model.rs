//! The feed models: what is materialised ahead of time and what is merged
//! in at read. Whatever the model, a reader sees the same feed. Each model
//! is one file ([`super::push`], [`super::pull`], [`super::rivers`],
//! [`super::hybrid`]) implementing [`FeedStrategy`]; [`FeedModel`] holds the
//! deployment's choice and settings.
//!
//! A feed's items come from two places: the reader's timeline (what the
//! fan-out, a backfill or a bump wrote) and the reader's pulled sources (the
//! outboxes of the accounts they follow or befriend, each from its cut, of
//! their groups, and of the actions naming them). A
//! model decides, per reader, which sources are pulled and below which
//! position (see [`Plan`](super::read::Plan)):
//!
//! - `push`: everything is materialised at fan-out; nothing is pulled.
//! - `pull`: nothing but the actor's own item is materialised; every page
//!   merges the sources' outboxes.
//! - `rivers`: a reader who reads has a river, built from the sources
//!   after their first read (off its path) and kept up by fan-out; below
//!   the river (and for readers with none) the sources are pulled.
//! - `hybrid`: push, except that actors with more followers than the
//!   celebrity threshold are never fanned out; their outboxes are pulled.
//!
//! A reader's sources are the accounts they follow or befriend, their
//! TEAM / DEPARTMENT groups and the RESTRICTED actions naming them
//! ([`super::sources`]). In every model the actor's own item is written at
//! fan-out (one write per action).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use super::audience::Audience;
use super::read::Plan;
use crate::model::{Action, EdgeKind, Millis, Position};
use crate::store::Records;
use crate::store::{Store, StoreResult};

/// What a feed model decides: who the fan-out writes for, how a feed is
/// read, where a follow's backfill goes, and its upkeep.
#[async_trait]
pub trait FeedStrategy: Send + Sync {
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
    /// From where a new `kind` edge's backfill of `to` (an actor, or a
    /// group) is written into `reader`'s timeline; `None`: nowhere, the
    /// reader pulls it.
    async fn written_from(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        kind: EdgeKind,
        to: &str,
    ) -> StoreResult<Option<Position>>;
    /// Background upkeep due at `now`; returns how much it did.
    async fn upkeep(&self, _store: &dyn Store, _now: Millis) -> StoreResult<usize> {
        Ok(0)
    }
}

/// Which model a deployment runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum FeedModelKind {
    Push,
    Pull,
    #[default]
    Rivers,
    Hybrid,
}

impl FeedModelKind {
    pub const ALL: [FeedModelKind; 4] = [
        FeedModelKind::Push,
        FeedModelKind::Pull,
        FeedModelKind::Rivers,
        FeedModelKind::Hybrid,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FeedModelKind::Push => "push",
            FeedModelKind::Pull => "pull",
            FeedModelKind::Rivers => "rivers",
            FeedModelKind::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for FeedModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A model with its settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedModel {
    pub kind: FeedModelKind,
    /// Items of a river kept (rivers).
    pub river_size: usize,
    /// A river not read for this long is dropped (rivers).
    pub river_idle: Duration,
    /// Rivers built at once in the background for readers who have none
    /// (rivers); 0 builds none, and those readers read as under `pull`.
    pub river_builds: usize,
    /// Actors with more followers than this are not fanned out (hybrid).
    pub celebrity_threshold: usize,
    /// `push` after a model that pulled: below this position readers'
    /// sources are still merged in at read, for what the timelines did not
    /// get written then. Set at start ([`start`]), not by flags.
    pub pulled_below: Option<Position>,
}

/// Default `--river-size` (the store's: MongoDB sizes rivers from it too).
pub use crate::store::DEFAULT_RIVER_SIZE;
/// Default `--river-builds`: two, a build being a few store calls that
/// mostly wait on the store.
pub const DEFAULT_RIVER_BUILDS: usize = 2;
/// Default `--river-idle`.
pub const DEFAULT_RIVER_IDLE: Duration = Duration::from_secs(24 * 3600);
/// Default `--celebrity-threshold`.
pub const DEFAULT_CELEBRITY_THRESHOLD: usize = 10_000;

impl Default for FeedModel {
    fn default() -> Self {
        Self::of(FeedModelKind::default())
    }
}

impl FeedModel {
    /// `kind` with the default settings.
    pub fn of(kind: FeedModelKind) -> Self {
        Self {
            kind,
            river_size: DEFAULT_RIVER_SIZE,
            river_idle: DEFAULT_RIVER_IDLE,
            river_builds: DEFAULT_RIVER_BUILDS,
            celebrity_threshold: DEFAULT_CELEBRITY_THRESHOLD,
            pulled_below: None,
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

    /// Whether every follower and friend's item is in the timelines: the
    /// fan-out writes one for each, and always did.
    pub fn pushes_all(&self) -> bool {
        self.kind == FeedModelKind::Push && self.pulled_below.is_none()
    }
}

/// Keys of what the store remembers of the models a deployment ran.
const LAST_MODEL: &str = "feed-model";
const PULLED_UNTIL: &str = "pulled-until";

/// Notes `model` as the one the deployment now runs, at `now`, and returns
/// it as it must run: `push` after a model that pulled goes on merging the
/// readers' sources below where the pulling ended (the history no fan-out
/// wrote), for good. Under `rivers`, the builds a crash cut short are
/// built again ([`rivers::finish_builds`](super::rivers::finish_builds)).
pub async fn start(store: &dyn Store, mut model: FeedModel, now: Millis) -> StoreResult<FeedModel> {
    let last = store.meta(LAST_MODEL).await?;
    let mut pulled_until = store
        .meta(PULLED_UNTIL)
        .await?
        .map(|bytes| decode_position(&bytes))
        .transpose()?;
    if model.kind == FeedModelKind::Push {
        let pulled_before = last.is_some_and(|name| name != FeedModelKind::Push.name().as_bytes());
        if pulled_before {
            let here = Position {
                relevancy: now,
                action_id: crate::model::ObjectId::from_bytes([0xff; 12]),
            };
            let until = pulled_until.map_or(here, |p| p.max(here));
            store.set_meta(PULLED_UNTIL, &until.to_bytes()).await?;
            pulled_until = Some(until);
        }
        model.pulled_below = pulled_until;
    }
    store
        .set_meta(LAST_MODEL, model.kind.name().as_bytes())
        .await?;
    if model.kind == FeedModelKind::Rivers {
        let built = super::rivers::finish_builds(store, &model, now).await?;
        if built > 0 {
            tracing::info!(built, "rivers a crash left being built, built");
        }
    }
    Ok(model)
}

fn decode_position(bytes: &[u8]) -> StoreResult<Position> {
    Position::from_bytes(bytes).ok_or_else(|| {
        crate::store::StoreError::new(
            crate::store::ErrorKind::Internal,
            "the stored end of the pulling models' history is damaged",
        )
    })
}
