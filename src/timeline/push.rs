//! `push`: every follower and friend gets an item at fan-out; a page is one
//! range of the reader's timeline.

use async_trait::async_trait;

use super::audience::{audience, Audience, Reach};
use super::feed_model::{FeedModel, FeedStrategy};
use super::read::Plan;
use crate::model::{Action, EdgeKind, Millis, Position};
use crate::store::{Store, StoreResult};

/// `push`, with where it still pulls after a pulling model (if it does).
pub struct Push(pub FeedModel);

#[async_trait]
impl FeedStrategy for Push {
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience> {
        Ok(Audience {
            readers: audience(store, action, Reach::All).await?,
            pulled: false,
        })
    }

    async fn plan(&self, _: &dyn Store, _: &str, _: &str, _: Millis) -> StoreResult<Plan> {
        Ok(match self.0.pulled_below {
            // What a pulling model left unwritten, pulled where a page
            // reaches it.
            Some(below) => Plan::pulling_below(below),
            None => Plan::timeline_only(),
        })
    }

    /// Everywhere; after a pulling model, only above where it stopped
    /// (below, the reader pulls it, as the rest of that history).
    async fn written_from(
        &self,
        _: &dyn Store,
        _: &str,
        _: &str,
        _: EdgeKind,
        _: &str,
    ) -> StoreResult<Option<Position>> {
        Ok(Some(self.0.pulled_below.unwrap_or(Position::MIN)))
    }
}
