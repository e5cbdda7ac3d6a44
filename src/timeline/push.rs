//! `push`: every follower and friend gets an item at fan-out; a page is one
//! range of the reader's timeline.

use async_trait::async_trait;

use super::audience::{audience, Audience};
use super::model::Model;
use super::read::Plan;
use crate::model::{Action, Millis, Position};
use crate::store::{Store, StoreResult};

pub struct Push;

#[async_trait]
impl Model for Push {
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience> {
        Ok(Audience {
            readers: audience(store, action, true).await?,
            pulled: false,
        })
    }

    async fn plan(&self, _: &dyn Store, _: &str, _: &str, _: Millis) -> StoreResult<Plan> {
        Ok(Plan::timeline_only())
    }

    async fn written_from(
        &self,
        _: &dyn Store,
        _: &str,
        _: &str,
        _: &str,
    ) -> StoreResult<Option<Position>> {
        Ok(Some(Position::MIN))
    }
}
