//! DataLoaders: a page's actions (and their actors) load in one batch each.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::dataloader::Loader;

use crate::model::{Action, ObjectId, User};
use crate::store::{Store, StoreError};

/// Loads actions of one tenant by id.
pub struct ActionLoader {
    pub store: Arc<dyn Store>,
    pub tenant: String,
}

impl Loader<ObjectId> for ActionLoader {
    type Value = Action;
    type Error = StoreError;

    async fn load(&self, keys: &[ObjectId]) -> Result<HashMap<ObjectId, Action>, StoreError> {
        let actions = self.store.get_actions(&self.tenant, keys).await?;
        Ok(actions.into_iter().map(|a| (a.id, a)).collect())
    }
}

/// Loads user profiles of one tenant by id.
pub struct UserLoader {
    pub store: Arc<dyn Store>,
    pub tenant: String,
}

impl Loader<String> for UserLoader {
    type Value = User;
    type Error = StoreError;

    async fn load(&self, keys: &[String]) -> Result<HashMap<String, User>, StoreError> {
        let users = self.store.get_users(&self.tenant, keys).await?;
        Ok(users.into_iter().map(|u| (u.id.clone(), u)).collect())
    }
}
