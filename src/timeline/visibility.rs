//! The one decision of whether a reader's feed shows an item: not if it came
//! by an edge the reader ended (until the worker has taken it out of
//! storage), only while the reader may read its action ([`Access`]: scope,
//! membership, expiry), never for a hidden action, and an item merged in
//! from a source only while the source still gives it ([`still_pulled`]).
//! Feed pages, one item found by its id and the replay of a feed's live
//! events all decide by [`Visibility`].

use super::access::Access;
use super::read::still_pulled;
use crate::model::{Action, FeedItem};
use crate::store::{Store, StoreResult, Unfollow};

/// What one reader's feed shows: the edges they ended whose cleanup has
/// not run yet, with which [`Visibility::shows`] decides an item.
#[derive(Clone, Debug, Default)]
pub struct Visibility {
    ended: Vec<Unfollow>,
}

impl Visibility {
    /// Reads the edges `reader` ended whose cleanup is pending. One round
    /// trip.
    ///
    /// Read before any range of the feed: the worker ends an unfollow once
    /// it has taken its items out of storage, so a range read after this
    /// sees either the unfollow here or the items gone there. Read
    /// alongside the range, the worker could finish in between and the
    /// read show both the items and no unfollow.
    pub async fn load(store: &dyn Store, tenant: &str, reader: &str) -> StoreResult<Visibility> {
        Ok(Visibility {
            ended: super::unfollow::pending(store, tenant, reader).await?,
        })
    }

    /// Whether the reader's feed shows `item` of `action`, `pulled` (merged
    /// in from a source) or held by the timeline. `access` is the reader's
    /// over the action.
    pub fn shows(
        &self,
        access: &Access<'_>,
        item: &FeedItem,
        pulled: bool,
        action: &Action,
    ) -> bool {
        !self.ended(item, Some(action))
            && access.can_read(action)
            && !action.hidden
            && (!pulled || still_pulled(item.reason.kind, action))
    }

    /// Whether `item` came by an edge the reader ended: what did is left
    /// out until the worker has taken it out of storage. This is the whole
    /// decision where the action is not read with the item (a replayed
    /// event: the rest is decided when its action is read); `action` is
    /// needed only where [`Visibility::needs_actions`] says so.
    pub fn ended(&self, item: &FeedItem, action: Option<&Action>) -> bool {
        self.ended.iter().any(|u| u.covers(item, action))
    }

    /// Whether telling whether an ended edge covers `item` needs its
    /// action ([`Unfollow::needs_action`]: a group follow's items, and
    /// bumped ones), while such a cleanup is pending.
    pub fn needs_actions(&self, item: &FeedItem) -> bool {
        self.ended.iter().any(|u| u.needs_action(item))
    }
}
