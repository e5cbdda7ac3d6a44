//! MongoDB: what the feed models read beside the timelines: edges looked up
//! for many readers at once, cuts (`cuts`), celebrities (`celebrities`), and
//! many outbox ranges at once.

use async_trait::async_trait;
use bson::{doc, Document};
use futures_util::future::try_join_all;
use mongodb::options::UpdateOptions;

use crate::model::{EdgeKind, Millis, Position, Scope};
use crate::store::{Cut, FeedRange, Outbox, Posted, SourceStore, StoreResult};

/// How a scope is stored.
fn scope_name(scope: Scope) -> bson::Bson {
    bson::to_bson(&scope).unwrap_or(bson::Bson::Null)
}

use super::{code_of, db_err, kind_name, read_all, MongoStore};
use crate::store::codes::EDGE_KIND;

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
        // One document per edge: the standing cut at its top, the ranges
        // ended edges kept in `kept` (one per end).
        let set = match cut.until {
            Some(until) => {
                let range = doc! {
                    "since": position_doc(cut.since),
                    "began": position_doc(cut.began),
                    "until": position_doc(until),
                };
                self.cuts
                    .update_one(
                        filter.clone(),
                        doc! { "$pull": { "kept": { "until": position_doc(until) } } },
                    )
                    .await
                    .map_err(db_err)?;
                doc! { "$push": { "kept": range } }
            }
            None => doc! {
                "$set": { "since": position_doc(cut.since), "began": position_doc(cut.began) },
                "$unset": { "until": "" },
            },
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
        let range = |kind: EdgeKind, actor: &str, d: &Document| {
            Some(Cut {
                kind,
                actor: actor.to_owned(),
                since: position_of(d.get_document("since").ok()?)?,
                began: position_of(d.get_document("began").ok()?)?,
                until: d.get_document("until").ok().and_then(position_of),
            })
        };
        let mut out = Vec::new();
        for d in &docs {
            let kind = code_of(&EDGE_KIND, "cuts", d, "kind")?;
            let Ok(actor) = d.get_str("actor") else {
                continue;
            };
            // The standing cut (or, written before ranges were kept side by
            // side, one kept range), then the kept ones.
            out.extend(range(kind, actor, d));
            for kept in d.get_array("kept").into_iter().flatten() {
                if let Some(kept) = kept.as_document() {
                    out.extend(range(kind, actor, kept));
                }
            }
        }
        Ok(out)
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
