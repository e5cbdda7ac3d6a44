//! MongoDB: users and their display profiles, in `users`.

use async_trait::async_trait;
use bson::{doc, Bson, Document};

use crate::model::User;
use crate::store::{Existing, StoreResult, UserStore};

use super::{db_err, is_duplicate, read_all, MongoStore};

#[async_trait]
impl UserStore for MongoStore {
    async fn put_user(&self, tenant: &str, user: &User, existing: Existing) -> StoreResult<()> {
        if existing == Existing::Keep {
            return self.note_user(tenant, user).await;
        }
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

impl MongoStore {
    /// Writes `user` only where none is: the user exists after, with the
    /// profile it had if it had one.
    pub(super) async fn note_user(&self, tenant: &str, user: &User) -> StoreResult<()> {
        let name = user.name.as_deref().map_or(Bson::Null, Bson::from);
        let result = self
            .users
            .update_one(
                doc! { "tenant": tenant, "userId": &user.id },
                doc! { "$setOnInsert": { "name": name } },
            )
            .upsert(true)
            .await;
        match result {
            // A name new to the store goes into the copies of the user's
            // actions too.
            Ok(written) if written.upserted_id.is_some() && user.name.is_some() => {
                self.rename_in_copies(tenant, &user.id, user.name.as_deref())
                    .await
            }
            Ok(_) => Ok(()),
            // Two upserts racing: the loser's insert hits the unique index, and
            // the user exists, which is all this call promises.
            Err(err) if is_duplicate(&err) => Ok(()),
            Err(err) => Err(db_err(err)),
        }
    }
}
