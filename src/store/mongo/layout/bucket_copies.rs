//! The bucket layouts' copies of actions (`--embed-actions`): taken out,
//! written again and renamed in every entry of an action or actor, by
//! array filters, one command for many actions.

use bson::{doc, Document};

use super::buckets::Buckets;
use super::copy::CopyDoc;
use crate::model::{ActionCopy, ObjectId};
use crate::store::mongo::{bulk::upsert_all, db_err};
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
        super::copy::rename_in_entries(&self.raw(), tenant, actor, name, doc! {}).await
    }
}
