//! Read access: who may see an action. Checked when items are read, not only when
//! they are delivered, so a change of scope or membership shows at once.

use std::collections::HashSet;

use async_graphql::Context;

use super::error::ApiResultExt;
use super::{state, Viewer};
use crate::model::{Action, Scope};
use crate::store::Store;

/// What is needed to decide access for one viewer over a set of actions.
pub struct Access<'v> {
    viewer: &'v Viewer,
    groups: HashSet<String>,
}

impl<'v> Access<'v> {
    /// Prepares the check for `actions`, loading the viewer's groups only if a
    /// group-scoped action of someone else is among them.
    pub async fn load<'a>(
        ctx: &Context<'_>,
        viewer: &'v Viewer,
        actions: impl IntoIterator<Item = &'a Action>,
    ) -> async_graphql::Result<Access<'v>> {
        Self::load_from(state(ctx)?.store.as_ref(), viewer, actions).await
    }

    /// As [`Access::load`], outside a request (in a live stream).
    pub async fn load_from<'a>(
        store: &dyn Store,
        viewer: &'v Viewer,
        actions: impl IntoIterator<Item = &'a Action>,
    ) -> async_graphql::Result<Access<'v>> {
        let needs_groups = actions.into_iter().any(|a| {
            matches!(a.scope, Scope::Team | Scope::Department) && a.actor_id != viewer.user
        });
        let groups = if needs_groups {
            store
                .memberships(&viewer.tenant, &viewer.user)
                .await
                .api()?
                .into_iter()
                .map(|m| m.group_id)
                .collect()
        } else {
            HashSet::new()
        };
        Ok(Self { viewer, groups })
    }

    pub fn can_read(&self, action: &Action) -> bool {
        if action.tenant != self.viewer.tenant {
            return false;
        }
        if action.actor_id == self.viewer.user {
            return true;
        }
        if action.hidden {
            return false;
        }
        match action.scope {
            Scope::Public => true,
            Scope::Restricted => action.readers.contains(&self.viewer.user),
            Scope::Team | Scope::Department => {
                action.scope_groups.iter().any(|g| self.groups.contains(g))
            }
        }
    }
}
