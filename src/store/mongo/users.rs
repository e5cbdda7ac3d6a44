//! MongoDB: users and their display profiles, in `users`.

use async_trait::async_trait;
use bson::{doc, Bson, Document};

use crate::model::User;
use crate::store::{StoreResult, UserStore};

use super::{db_err, is_duplicate, read_all, MongoStore};

#[async_trait]
impl UserStore for MongoStore {
    async fn upsert_user(&self, tenant: &str, user: &User) -> StoreResult<()> {
        let name = user.name.as_deref().map_or(Bson::Null, Bson::from);
        let filter = doc! { "tenant": tenant, "userId": &user.id };
        let update = doc! { "$set": { "name": name } };
        if !self.embeds {
            self.users
                .update_one(filter, update)
                .upsert(true)
                .await
                .map_err(db_err)?;
            return Ok(());
        }
        // A new name goes into the copies of the user's actions too.
        let before = self
            .users
            .find_one_and_update(filter, update)
            .upsert(true)
            .await
            .map_err(db_err)?;
        let had = before.and_then(|d| d.get_str("name").ok().map(str::to_owned));
        if had != user.name {
            self.rename_in_copies(tenant, &user.id, user.name.as_deref())
                .await?;
        }
        Ok(())
    }

    async fn ensure_user(&self, tenant: &str, id: &str) -> StoreResult<()> {
        let result = self
            .users
            .update_one(
                doc! { "tenant": tenant, "userId": id },
                doc! { "$setOnInsert": { "name": Bson::Null } },
            )
            .upsert(true)
            .await;
        match result {
            // Two upserts racing: the loser's insert hits the unique index, and
            // the user exists, which is all this call promises.
            Err(err) if is_duplicate(&err) => Ok(()),
            other => other.map(|_| ()).map_err(db_err),
        }
    }

    async fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>> {
        let docs: Vec<Document> = read_all(
            self.users
                .find(doc! { "tenant": tenant, "userId": { "$in": ids } }),
        )
        .await?;
        Ok(docs
            .into_iter()
            .filter_map(|d| {
                Some(User {
                    id: d.get_str("userId").ok()?.to_owned(),
                    name: d.get_str("name").ok().map(str::to_owned),
                })
            })
            .collect())
    }
}
