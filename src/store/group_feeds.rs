//! Group feeds: each group's last actions as a capped, segmented ring (the
//! Kandels layout). A counter per group numbers what is posted to it, and
//! post `n` takes slot `n mod size`, replacing what stood there, so the
//! feed keeps the newest `size` and never needs a count or a cleanup. A
//! smaller size later hides the slots beyond it (only the newest `size`
//! posts are read); a larger one lets the ring grow into new slots as
//! posts come (a few of the last posts before the change may be replaced
//! early while it refills).

use super::metered::port;
use super::{FeedRange, StoreResult};
use crate::model::Position;

/// Default `--group-feed-size`.
pub const DEFAULT_SIZE: usize = 1_000;

port! {
pub trait GroupFeedStore: Send + Sync {
    /// Posts the action at `at` to `group`'s feed, in the slot after the
    /// last post's, unless the ring holds it already (so a fan-out run
    /// again posts nothing twice). Returns whether it was posted.
    async fn post_to_group(
        &self,
        tenant: &str,
        group: &str,
        at: Position,
        size: usize,
    ) -> StoreResult<bool>;
    /// A range of `group`'s feed, newest first by when the actions
    /// happened: of the newest `size` posts. One round trip.
    async fn group_feed(
        &self,
        tenant: &str,
        group: &str,
        size: usize,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>>;
}
}

/// One slot of a ring, as read: the post's number and the action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub n: u64,
    pub at: Position,
}

/// The newest `size` of `slots` (a ring read whole), as `range` asks for
/// them: what every backend answers for [`GroupFeedStore::group_feed`].
pub fn ring_range(mut slots: Vec<Slot>, size: usize, range: FeedRange) -> Vec<Position> {
    // Posts are numbered from 1: the newest `size` are those above this.
    let last = slots.iter().map(|s| s.n).max().unwrap_or(0);
    let first = last.saturating_sub(size as u64);
    slots.retain(|s| s.n > first);
    let mut positions: Vec<Position> = slots
        .into_iter()
        .map(|s| s.at)
        .filter(|p| range.holds(*p))
        .collect();
    range.cut(&mut positions, |p| *p);
    positions
}
