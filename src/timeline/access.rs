//! Read access: who may see an action, and until when. Checked when items
//! are read, not only when they are delivered, so a change of scope or
//! membership, and an action's expiry, show at once; and when something is
//! put into a feed outside a fan-out (a follow's backfill), so nobody is
//! given what they may not read.

use std::collections::HashMap;

use crate::model::{Action, Millis, Scope};
use crate::store::Graph;
use crate::store::{Store, StoreResult};

/// When a read happens, and how long actions live: what expiry is judged
/// by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expiry {
    pub now: Millis,
    /// `--item-ttl`: actions older than this are not shown.
    pub item_ttl: Option<Millis>,
}

/// What is needed to decide access for one reader over a set of actions.
pub struct Access<'r> {
    tenant: &'r str,
    user: &'r str,
    /// The user's groups, each with when their membership began.
    groups: HashMap<String, Millis>,
    expiry: Expiry,
}

impl<'r> Access<'r> {
    /// Prepares the check for `user` of `tenant` over `actions` at
    /// `expiry`, loading the user's groups only if a group-scoped action of
    /// someone else is among them.
    pub async fn load<'a>(
        store: &dyn Store,
        tenant: &'r str,
        user: &'r str,
        actions: impl IntoIterator<Item = &'a Action>,
        expiry: Expiry,
    ) -> StoreResult<Access<'r>> {
        let needs_groups = actions
            .into_iter()
            .any(|a| matches!(a.scope, Scope::Team | Scope::Department) && a.actor_id != user);
        let groups = if needs_groups {
            store
                .memberships(tenant, user)
                .await?
                .into_iter()
                .map(|m| (m.group_id, m.since))
                .collect()
        } else {
            HashMap::new()
        };
        Ok(Self {
            tenant,
            user,
            groups,
            expiry,
        })
    }

    pub fn can_read(&self, action: &Action) -> bool {
        if action.tenant != self.tenant {
            return false;
        }
        // Gone for everyone, the actor too.
        if action.expired(self.expiry.now, self.expiry.item_ttl) {
            return false;
        }
        if action.actor_id == self.user {
            return true;
        }
        if action.hidden {
            return false;
        }
        match action.scope {
            Scope::Public => true,
            Scope::Restricted => action.readers.iter().any(|r| r == self.user),
            // A member reads what the group got from when they joined.
            Scope::Team | Scope::Department => action
                .scope_groups
                .iter()
                .any(|g| self.groups.get(g).is_some_and(|s| *s <= action.conducted)),
        }
    }
}
