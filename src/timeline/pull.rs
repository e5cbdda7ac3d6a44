//! `pull`: nothing is written for readers but the actor; a page merges the
//! reader's timeline (own items, bumps, tombstones) with the outboxes of
//! everyone they follow or befriend, of their groups, and of the actions
//! naming them.

use async_trait::async_trait;

use super::audience::{audience, Audience, Reach};
use super::feed_model::FeedStrategy;
use super::read::Plan;
use super::sources;
use crate::model::{Action, EdgeKind, Millis, Position};
use crate::store::{Store, StoreResult};

pub struct Pull;

#[async_trait]
impl FeedStrategy for Pull {
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience> {
        Ok(Audience {
            readers: audience(store, action, Reach::Actor).await?,
            pulled: true,
        })
    }

    async fn plan(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        _: Millis,
    ) -> StoreResult<Plan> {
        let all = sources::load(store, tenant, reader).await?;
        Ok(Plan::pulling(all, None))
    }

    async fn written_from(
        &self,
        _: &dyn Store,
        _: &str,
        _: &str,
        _: EdgeKind,
        _: &str,
    ) -> StoreResult<Option<Position>> {
        Ok(None)
    }
}
