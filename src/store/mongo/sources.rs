//! MongoDB: what the feed models read beside the timelines: edges and
//! members looked up for many readers at once, and many outbox ranges at
//! once.

use async_trait::async_trait;
use bson::{doc, Document};
use futures_util::future::try_join_all;

use crate::model::{EdgeKind, Millis, Position, Scope};
use crate::store::{FeedRange, Outbox, Posted, SourceStore, StoreResult};

/// How a scope is stored.
fn scope_name(scope: Scope) -> bson::Bson {
    bson::to_bson(&scope).unwrap_or(bson::Bson::Null)
}

use super::{kind_name, read_all, MongoStore};

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
    async fn edges_among(
        &self,
        tenant: &str,
        kind: EdgeKind,
        readers: &[String],
        actor: &str,
    ) -> StoreResult<Vec<String>> {
        if readers.is_empty() {
            return Ok(Vec::new());
        }
        let filter = doc! {
            "tenant": tenant, "kind": kind_name(kind), "from": { "$in": readers }, "to": actor,
        };
        self.strings(&self.edges, filter, "from", usize::MAX).await
    }

    async fn members_among(
        &self,
        tenant: &str,
        group_id: &str,
        users: &[String],
    ) -> StoreResult<Vec<(String, Millis)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let filter = doc! { "tenant": tenant, "groupId": group_id, "userId": { "$in": users } };
        let docs = read_all(
            self.memberships
                .find(filter)
                .projection(doc! { "userId": 1, "since": 1 }),
        )
        .await?;
        Ok(docs
            .iter()
            .filter_map(|d| {
                let user = d.get_str("userId").ok()?.to_owned();
                Some((user, d.get_i64("since").unwrap_or(0)))
            })
            .collect())
    }

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
