//! `pull`: nothing is written for followers and friends; a page merges the
//! reader's timeline (own, group and named items, bumps, tombstones) with
//! the outboxes of everyone they follow or befriend.

use async_trait::async_trait;

use super::audience::{audience, Audience};
use super::model::Model;
use super::read::Plan;
use super::sources;
use crate::model::{Action, Millis, Position, Scope};
use crate::store::{Store, StoreResult};

pub struct Pull;

#[async_trait]
impl Model for Pull {
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience> {
        Ok(Audience {
            readers: audience(store, action, false).await?,
            pulled: action.scope == Scope::Public,
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
        _: &str,
    ) -> StoreResult<Option<Position>> {
        Ok(None)
    }
}
