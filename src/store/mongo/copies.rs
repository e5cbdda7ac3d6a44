//! Keeping the copies of actions in timeline entries true
//! (`--embed-actions`; see `layout::copy`). Whatever changes what a copy
//! holds takes the action's copies out first and writes them again after,
//! so a crash between leaves entries that load their action, never stale
//! ones; a delivery checks the action again after writing and copies it
//! again if it changed meanwhile.

use std::collections::HashMap;
use std::sync::Arc;

use bson::doc;

use super::{db_err, MongoStore};
use crate::model::{Action, ActionCopy, ObjectId};
use crate::store::{ActionStore, StoreResult, UserStore};

/// The `meta` key noting that a database's timelines carry copies.
const EMBED_KEY: &str = "embed-actions";

impl MongoStore {
    /// Whether timeline entries carry copies: asked for now, or noted by
    /// an earlier start (a database that embedded keeps its copies true).
    pub(super) async fn resolve_embeds(db: &mongodb::Database, asked: bool) -> StoreResult<bool> {
        let meta = db.collection::<bson::Document>("meta");
        if asked {
            meta.update_one(
                doc! { "_id": EMBED_KEY },
                doc! { "$set": { "embeds": true } },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
            return Ok(true);
        }
        let noted = meta
            .find_one(doc! { "_id": EMBED_KEY })
            .await
            .map_err(db_err)?;
        Ok(noted.is_some_and(|d| d.get_bool("embeds").unwrap_or(false)))
    }

    /// Copies of `actions` with their actors' names (one query), if this
    /// store embeds; none otherwise.
    pub(super) async fn copies_of(
        &self,
        tenant: &str,
        actions: &[&Action],
    ) -> StoreResult<HashMap<ObjectId, Arc<ActionCopy>>> {
        if !self.embeds || actions.is_empty() {
            return Ok(HashMap::new());
        }
        let mut actors: Vec<String> = actions.iter().map(|a| a.actor_id.clone()).collect();
        actors.sort();
        actors.dedup();
        let users = self.get_users(tenant, &actors).await?;
        let names: HashMap<&str, Option<String>> = users
            .iter()
            .map(|u| (u.id.as_str(), u.name.clone()))
            .collect();
        Ok(actions
            .iter()
            .map(|a| {
                let copy = ActionCopy {
                    action: (*a).clone(),
                    actor_name: names.get(a.actor_id.as_str()).cloned().flatten(),
                };
                (a.id, Arc::new(copy))
            })
            .collect())
    }

    /// Takes the copies of `ids` out, before a change to those actions.
    pub(super) async fn uncopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        if self.embeds {
            self.layout.uncopy(tenant, ids).await?;
        }
        Ok(())
    }

    /// Copies `ids` again as they are now, after a change to them.
    pub(super) async fn recopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        if !self.embeds || ids.is_empty() {
            return Ok(());
        }
        let actions = self.get_actions(tenant, ids).await?;
        let visible: Vec<&Action> = actions.iter().filter(|a| !a.hidden).collect();
        let copies = self.copies_of(tenant, &visible).await?;
        let copies: Vec<ActionCopy> = copies.into_values().map(|c| (*c).clone()).collect();
        self.layout.recopy(tenant, &copies).await
    }

    /// Names `actor` `name` in the copies of their actions.
    pub(super) async fn rename_in_copies(
        &self,
        tenant: &str,
        actor: &str,
        name: Option<&str>,
    ) -> StoreResult<()> {
        if self.embeds {
            self.layout.rename_actor(tenant, actor, name).await?;
        }
        Ok(())
    }
}
