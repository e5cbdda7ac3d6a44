//! MongoDB: what the feed models read beside the timelines: edges looked up
//! for many readers at once, cuts (`cuts`), celebrities (`celebrities`), and
//! many outbox ranges at once.

use async_trait::async_trait;
use bson::{doc, Document};
use futures_util::future::try_join_all;
use mongodb::options::UpdateOptions;

use crate::model::{EdgeKind, Position};
use crate::store::{ActionStore, Cut, FeedRange, SourceStore, StoreResult};

use super::{db_err, kind_name, read_all, MongoStore};

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

    async fn set_cut(&self, tenant: &str, reader: &str, cut: &Cut) -> StoreResult<()> {
        let filter = doc! {
            "tenant": tenant, "reader": reader, "kind": kind_name(cut.kind), "actor": &cut.actor,
        };
        let mut fields =
            doc! { "since": position_doc(cut.since), "began": position_doc(cut.began) };
        let set = match cut.until {
            Some(until) => {
                fields.insert("until", position_doc(until));
                doc! { "$set": fields }
            }
            None => doc! { "$set": fields, "$unset": { "until": "" } },
        };
        self.cuts
            .update_one(filter, set)
            .with_options(UpdateOptions::builder().upsert(true).build())
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn clear_cut(
        &self,
        tenant: &str,
        reader: &str,
        kind: EdgeKind,
        actor: &str,
    ) -> StoreResult<()> {
        let filter =
            doc! { "tenant": tenant, "reader": reader, "kind": kind_name(kind), "actor": actor };
        self.cuts.delete_one(filter).await.map_err(db_err)?;
        Ok(())
    }

    async fn cuts(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Cut>> {
        let docs = read_all(self.cuts.find(doc! { "tenant": tenant, "reader": reader })).await?;
        Ok(docs
            .iter()
            .filter_map(|d| {
                let kind = match d.get_str("kind").ok()? {
                    k if k == kind_name(EdgeKind::Friend) => EdgeKind::Friend,
                    _ => EdgeKind::Follows,
                };
                Some(Cut {
                    kind,
                    actor: d.get_str("actor").ok()?.to_owned(),
                    since: position_of(d.get_document("since").ok()?)?,
                    began: position_of(d.get_document("began").ok()?)?,
                    until: d.get_document("until").ok().and_then(position_of),
                })
            })
            .collect())
    }

    async fn mark_celebrity(&self, tenant: &str, user: &str) -> StoreResult<()> {
        self.celebrities
            .update_one(
                doc! { "tenant": tenant, "userId": user },
                doc! { "$setOnInsert": { "tenant": tenant, "userId": user } },
            )
            .with_options(UpdateOptions::builder().upsert(true).build())
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn celebrities(&self, tenant: &str, users: &[String]) -> StoreResult<Vec<String>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let filter = doc! { "tenant": tenant, "userId": { "$in": users } };
        self.strings(&self.celebrities, filter, "userId", usize::MAX)
            .await
    }

    async fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        let found = self
            .meta
            .find_one(doc! { "_id": key })
            .await
            .map_err(db_err)?;
        Ok(found.and_then(|d| d.get_binary_generic("value").ok().cloned()))
    }

    async fn set_meta(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        let value = bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: value.to_vec(),
        };
        self.meta
            .update_one(doc! { "_id": key }, doc! { "$set": { "value": value } })
            .with_options(UpdateOptions::builder().upsert(true).build())
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(String, FeedRange)],
    ) -> StoreResult<Vec<Vec<Position>>> {
        try_join_all(
            reads
                .iter()
                .map(|(actor, range)| self.outbox(tenant, actor, *range)),
        )
        .await
    }
}
