//! `hybrid`: push, except that an actor with more followers than the
//! celebrity threshold is never fanned out to followers and friends; their
//! readers merge the celebrities' outboxes in at read.

use async_trait::async_trait;

use super::audience::{audience, Audience, Reach};
use super::feed_model::{FeedModel, FeedStrategy};
use super::read::Plan;
use super::sources;
use crate::model::{Action, EdgeKind, Millis, Position, Scope};
use crate::store::Graph;
use crate::store::Records;
use crate::store::{Direction, Store, StoreResult};

pub struct Hybrid(pub FeedModel);

impl Hybrid {
    /// Whether `action`'s actor is (or now becomes) a celebrity: marked
    /// before, or followed by more than the threshold, counted no further
    /// than that. A celebrity stays one.
    async fn is_celebrity(&self, store: &dyn Store, action: &Action) -> StoreResult<bool> {
        let (tenant, actor) = (action.tenant.as_str(), action.actor_id.as_str());
        if !store
            .celebrities(tenant, &[actor.to_owned()])
            .await?
            .is_empty()
        {
            return Ok(true);
        }
        let threshold = self.0.celebrity_threshold;
        let followers = store
            .edges(
                tenant,
                EdgeKind::Follows,
                Direction::In,
                actor,
                None,
                threshold.saturating_add(1),
            )
            .await?;
        if followers.len() <= threshold {
            return Ok(false);
        }
        store.mark_celebrity(tenant, actor).await?;
        Ok(true)
    }
}

#[async_trait]
impl FeedStrategy for Hybrid {
    async fn audience(&self, store: &dyn Store, action: &Action) -> StoreResult<Audience> {
        let celebrity = action.scope == Scope::Public && self.is_celebrity(store, action).await?;
        Ok(Audience {
            readers: audience(
                store,
                action,
                if celebrity {
                    Reach::NotFollowers
                } else {
                    Reach::All
                },
            )
            .await?,
            pulled: celebrity,
        })
    }

    async fn plan(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        _: Millis,
    ) -> StoreResult<Plan> {
        // Groups and named readers are bounded audiences: written, as
        // under push. Only the celebrities are pulled.
        let (mut all, followed) = sources::followed(store, tenant, reader).await?;
        let actors: Vec<String> = all.iter().map(|s| s.actor.clone()).collect();
        let mut celebrities = store.celebrities(tenant, &actors).await?;
        celebrities.sort_unstable();
        let (read, known): (Vec<_>, Vec<_>) = all
            .drain(..)
            .partition(|s| celebrities.binary_search(&s.actor).is_ok());
        // The groups followed, beside a celebrity: what both bring is held
        // for the group, and one rule over every edge says which reason
        // stands.
        let (followed, known) = if read.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            (followed, known)
        };
        Ok(Plan::pulling(
            sources::Sources {
                actors: read,
                followed,
                known,
                ..sources::Sources::default()
            },
            None,
        ))
    }

    async fn written_from(
        &self,
        store: &dyn Store,
        tenant: &str,
        _: &str,
        kind: EdgeKind,
        actor: &str,
    ) -> StoreResult<Option<Position>> {
        // Groups' followers are written for; celebrities' are not.
        if kind == EdgeKind::Group {
            return Ok(Some(Position::MIN));
        }
        let actor = [actor.to_owned()];
        let celebrity = !store.celebrities(tenant, &actor).await?.is_empty();
        Ok((!celebrity).then_some(Position::MIN))
    }
}
