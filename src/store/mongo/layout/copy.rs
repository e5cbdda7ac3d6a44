//! Copies of actions in timeline entries (`--embed-actions`): each item or
//! bucket entry written carries `x`, what a page shows of its action and
//! what the access check reads, with the actor's name, so a page that asks
//! no more is read in one query.
//!
//! Copies are kept true by whoever changes what they hold: a change to an
//! action first takes its copies away (reads then load the action), then
//! changes the action, then writes the copies again; a crash between leaves
//! entries without copies, never wrong ones. A rename of a user rewrites
//! the name in their actions' copies. Counts and the fan-out state are not
//! copied: a page that shows them loads the actions.

use bson::DateTime;
use serde::{Deserialize, Serialize};

use super::date;
use crate::descriptor::Descriptor;
use crate::model::{Action, ActionCopy, Counts, FanOut, ObjectId, Scope};

/// `x` as stored. The action's id and tenant are the entry's.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::store::mongo) struct CopyDoc {
    actor_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actor_name: Option<String>,
    conducted: DateTime,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    hidden: bool,
    scope: Scope,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    readers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scope_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ref_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    descriptor: Descriptor,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<DateTime>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    to: Vec<String>,
}

/// The path of the actor's id in a copy, and of their name.
pub(super) const ACTOR_ID: &str = "actorId";
pub(super) const ACTOR_NAME: &str = "actorName";

impl CopyDoc {
    pub(in crate::store::mongo) fn of(copy: &ActionCopy) -> CopyDoc {
        let a = &copy.action;
        CopyDoc {
            actor_id: a.actor_id.clone(),
            actor_name: copy.actor_name.clone(),
            conducted: date(a.conducted),
            hidden: a.hidden,
            scope: a.scope,
            readers: a.readers.clone(),
            scope_groups: a.scope_groups.clone(),
            ref_ids: a.ref_ids.clone(),
            tags: a.tags.clone(),
            descriptor: a.descriptor.clone(),
            expires_at: a.expires_at.map(date),
            to: a.to.clone(),
        }
    }

    /// The copy of action `id` of `tenant`.
    pub(in crate::store::mongo) fn copy(&self, tenant: &str, id: ObjectId) -> ActionCopy {
        ActionCopy {
            action: Action {
                id,
                tenant: tenant.to_owned(),
                actor_id: self.actor_id.clone(),
                conducted: self.conducted.timestamp_millis(),
                hidden: self.hidden,
                scope: self.scope,
                readers: self.readers.clone(),
                scope_groups: self.scope_groups.clone(),
                ref_ids: self.ref_ids.clone(),
                tags: self.tags.clone(),
                descriptor: self.descriptor.clone(),
                fan_out: FanOut::done(),
                counts: Counts::default(),
                expires_at: self.expires_at.map(|t| t.timestamp_millis()),
                to: self.to.clone(),
                foreign: None,
            },
            actor_name: self.actor_name.clone(),
        }
    }

    pub(in crate::store::mongo) fn bson(&self) -> crate::store::StoreResult<bson::Bson> {
        bson::to_bson(self)
            .map_err(|e| crate::store::StoreError::internal("MongoDB: cannot encode a copy", e))
    }
}

/// Names `actor` `name` in the copies inside the `e` arrays of
/// `collection`'s documents (bucket or river entries), with `also` added to
/// the update (a river's version).
pub(super) async fn rename_in_entries(
    collection: &mongodb::Collection<bson::Document>,
    tenant: &str,
    actor: &str,
    name: Option<&str>,
    also: bson::Document,
) -> crate::store::StoreResult<()> {
    use bson::doc;
    let path = format!("e.$[y].x.{ACTOR_NAME}");
    let mut update = match name {
        Some(name) => doc! { "$set": { path: name } },
        None => doc! { "$unset": { path: "" } },
    };
    update.extend(also);
    collection
        .update_many(
            doc! { "tenant": tenant, format!("e.x.{ACTOR_ID}"): actor },
            update,
        )
        .array_filters(vec![doc! { format!("y.x.{ACTOR_ID}"): actor }])
        .await
        .map_err(crate::store::mongo::db_err)?;
    Ok(())
}

/// Whether two copies of one action say the same (what a delivery checks
/// after writing, to catch a change it raced).
pub(in crate::store::mongo) fn same(a: &Action, b: &Action) -> bool {
    a.actor_id == b.actor_id
        && a.hidden == b.hidden
        && a.scope == b.scope
        && a.readers == b.readers
        && a.scope_groups == b.scope_groups
        && a.ref_ids == b.ref_ids
        && a.tags == b.tags
        && a.descriptor == b.descriptor
        && a.expires_at == b.expires_at
        && a.to == b.to
}
