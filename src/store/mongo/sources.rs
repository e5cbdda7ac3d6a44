//! MongoDB: what the feed models read beside the timelines: many outbox
//! ranges at once.

use async_trait::async_trait;
use bson::{doc, Document};
use futures_util::future::try_join_all;

use crate::model::{Position, Scope};
use crate::store::{FeedRange, Outbox, Posted, SourceStore, StoreResult};

/// How a scope is stored.
fn scope_name(scope: Scope) -> bson::Bson {
    bson::to_bson(&scope).unwrap_or(bson::Bson::Null)
}

use super::MongoStore;

/// A position as a subdocument. The relevancy is a plain number: the
/// bounds (`Position::MIN`, `MAX`) lie outside what dates can hold.
pub(super) fn position_doc(p: Position) -> Document {
    doc! { "r": p.relevancy, "id": p.action_id }
}

pub(super) fn position_of(d: &Document) -> Option<Position> {
    Some(Position {
        relevancy: d.get_i64("r").ok()?,
        action_id: d.get_object_id("id").ok()?,
    })
}

#[async_trait]
impl SourceStore for MongoStore {
    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>> {
        try_join_all(reads.iter().map(|(outbox, range)| {
            let all = match outbox {
                Outbox::Actor(actor) => doc! { "tenant": tenant, "actorId": actor },
                Outbox::Group(group) => doc! {
                    "tenant": tenant, "scopeGroups": group,
                    "scope": { "$in": [scope_name(Scope::Team), scope_name(Scope::Department)] },
                },
                Outbox::Named(reader) => doc! {
                    "tenant": tenant, "readers": reader, "scope": scope_name(Scope::Restricted),
                },
                Outbox::Sent(group) => doc! {
                    "tenant": tenant, "to": group, "scope": scope_name(Scope::Public),
                },
            };
            self.ranked_actions(all, *range)
        }))
        .await
    }
}
