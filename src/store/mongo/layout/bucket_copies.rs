//! The bucket layouts' copies of actions (`--embed-actions`): taken out,
//! written again and renamed in every entry of an action or actor, by
//! array filters, one command for many actions.

use bson::{doc, Document};

use super::buckets::Buckets;
use super::copy::{CopyDoc, ACTOR_ID, ACTOR_NAME};
use crate::model::{ActionCopy, ObjectId};
use crate::store::mongo::{archive::upsert_all, db_err};
use crate::store::StoreResult;

impl Buckets {
    pub(super) async fn uncopy_entries(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.raw()
            .update_many(
                doc! { "tenant": tenant, "e.a": { "$in": ids } },
                doc! { "$unset": { "e.$[y].x": "" } },
            )
            .array_filters(vec![doc! { "y.a": { "$in": ids } }])
            .await
            .map_err(db_err)?;
        Ok(())
    }

    pub(super) async fn recopy_entries(
        &self,
        tenant: &str,
        copies: &[ActionCopy],
    ) -> StoreResult<()> {
        let mut statements: Vec<Document> = Vec::with_capacity(copies.len());
        for copy in copies {
            let id = copy.action.id;
            statements.push(doc! {
                "q": { "tenant": tenant, "e.a": id },
                "u": { "$set": { "e.$[y].x": CopyDoc::of(copy).bson()? } },
                "multi": true,
                "arrayFilters": [ { "y.a": id, "y.h": { "$ne": true } } ],
            });
        }
        upsert_all(&self.db, self.name, statements).await
    }

    pub(super) async fn rename_in_entries(
        &self,
        tenant: &str,
        actor: &str,
        name: Option<&str>,
    ) -> StoreResult<()> {
        let path = format!("e.$[y].x.{ACTOR_NAME}");
        let update = match name {
            Some(name) => doc! { "$set": { path: name } },
            None => doc! { "$unset": { path: "" } },
        };
        self.raw()
            .update_many(
                doc! { "tenant": tenant, format!("e.x.{ACTOR_ID}"): actor },
                update,
            )
            .array_filters(vec![doc! { format!("y.x.{ACTOR_ID}"): actor }])
            .await
            .map_err(db_err)?;
        Ok(())
    }
}
