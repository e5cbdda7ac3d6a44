//! MongoDB: users, follows and friendships, groups, assignments and
//! supervisors.

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;

use crate::model::{EdgeKind, Group, Membership, MembershipRole, Millis, User};
use crate::store::{Direction, GraphStore, JoinOutcome, StoreResult};

use super::{
    code_of, db_err, group_kind_name, is_duplicate, kind_name, read_all, role_name, MongoStore,
};
use crate::store::codes::{GROUP_KIND, ROLE};

/// A membership's role: a member where none is stored.
pub(super) fn stored_role(membership: &Document) -> StoreResult<MembershipRole> {
    match membership.contains_key("role") {
        true => code_of(&ROLE, "memberships", membership, "role"),
        false => Ok(MembershipRole::Member),
    }
}

#[async_trait]
impl GraphStore for MongoStore {
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

    async fn set_edge(
        &self,
        tenant: &str,
        kind: EdgeKind,
        from: &str,
        to: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let kind = kind_name(kind);
        let forward = doc! { "tenant": tenant, "kind": kind, "from": from, "to": to };
        let backward = doc! { "tenant": tenant, "kind": kind, "from": to, "to": from };
        let symmetric = kind == "friend";
        if !on {
            let removed = self.edges.delete_one(forward).await.map_err(db_err)?;
            if symmetric {
                self.edges.delete_one(backward).await.map_err(db_err)?;
            }
            return Ok(removed.deleted_count > 0);
        }
        self.ensure_user(tenant, from).await?;
        let mut docs = vec![forward];
        if symmetric {
            docs.push(backward);
        }
        let mut added = false;
        for (i, edge) in docs.into_iter().enumerate() {
            match self.edges.insert_one(edge).await {
                Ok(_) => added |= i == 0,
                Err(err) if is_duplicate(&err) => {}
                Err(err) => return Err(db_err(err)),
            }
        }
        Ok(added)
    }

    async fn edges(
        &self,
        tenant: &str,
        kind: EdgeKind,
        direction: Direction,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        // A friendship is stored both ways: its "in" is its "out".
        let (anchor, other) = match (kind, direction) {
            (EdgeKind::Follows | EdgeKind::Group, Direction::In) => ("to", "from"),
            _ => ("from", "to"),
        };
        let mut filter = doc! { "tenant": tenant, "kind": kind_name(kind), anchor: user };
        if let Some(after) = after {
            filter.insert(other, doc! { "$gt": after });
        }
        self.strings(&self.edges, filter, other, limit).await
    }

    async fn join_group(
        &self,
        tenant: &str,
        group: &Group,
        user: &str,
        role: MembershipRole,
        since: Millis,
    ) -> StoreResult<JoinOutcome> {
        let filter = doc! { "tenant": tenant, "groupId": &group.id };
        let upsert = self
            .groups
            .find_one_and_update(
                filter.clone(),
                doc! { "$setOnInsert": { "kind": group_kind_name(group.kind) } },
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        let existing = match upsert {
            Ok(doc) => doc,
            // A concurrent first join created it: read what it created.
            Err(err) if is_duplicate(&err) => self.groups.find_one(filter).await.map_err(db_err)?,
            Err(err) => return Err(db_err(err)),
        };
        // A group a post made first (its ring's counter) has no kind yet.
        let kind = match &existing {
            Some(d) if d.contains_key("kind") => code_of(&GROUP_KIND, "groups", d, "kind")?,
            _ => group.kind,
        };
        if kind != group.kind {
            return Ok(JoinOutcome::KindMismatch(Group {
                id: group.id.clone(),
                kind,
            }));
        }
        // A member keeps when their membership began.
        let stored = self
            .memberships
            .find_one_and_update(
                doc! { "tenant": tenant, "groupId": &group.id, "userId": user },
                doc! {
                    "$set": { "kind": group_kind_name(kind), "role": role_name(role) },
                    "$setOnInsert": { "since": since },
                },
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await
            .map_err(db_err)?;
        self.ensure_user(tenant, user).await?;
        Ok(JoinOutcome::Joined(Membership {
            group_id: group.id.clone(),
            kind,
            role,
            since: stored
                .and_then(|d| d.get_i64("since").ok())
                .unwrap_or(since),
        }))
    }

    async fn leave_group(&self, tenant: &str, group_id: &str, user: &str) -> StoreResult<bool> {
        let removed = self
            .memberships
            .delete_one(doc! { "tenant": tenant, "groupId": group_id, "userId": user })
            .await
            .map_err(db_err)?;
        Ok(removed.deleted_count > 0)
    }

    async fn group_members(
        &self,
        tenant: &str,
        group_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let mut filter = doc! { "tenant": tenant, "groupId": group_id };
        if let Some(after) = after {
            filter.insert("userId", doc! { "$gt": after });
        }
        self.strings(&self.memberships, filter, "userId", limit)
            .await
    }

    async fn memberships(&self, tenant: &str, user: &str) -> StoreResult<Vec<Membership>> {
        let docs: Vec<Document> = read_all(
            self.memberships
                .find(doc! { "tenant": tenant, "userId": user })
                .sort(doc! { "groupId": 1 }),
        )
        .await?;
        docs.iter()
            .filter_map(|d| Some((d, d.get_str("groupId").ok()?, d.get_str("kind").ok()?)))
            .map(|(d, group_id, _)| {
                Ok(Membership {
                    group_id: group_id.to_owned(),
                    kind: code_of(&GROUP_KIND, "memberships", d, "kind")?,
                    role: stored_role(d)?,
                    since: d.get_i64("since").unwrap_or(0),
                })
            })
            .collect()
    }

    async fn set_assignment(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let assignment = doc! { "tenant": tenant, "refId": ref_id, "userId": user };
        if on {
            match self.assignments.insert_one(assignment).await {
                Ok(_) => Ok(true),
                Err(err) if is_duplicate(&err) => Ok(false),
                Err(err) => Err(db_err(err)),
            }
        } else {
            let removed = self
                .assignments
                .delete_one(assignment)
                .await
                .map_err(db_err)?;
            Ok(removed.deleted_count > 0)
        }
    }

    async fn assignment(
        &self,
        tenant: &str,
        direction: Direction,
        ids: &[String],
    ) -> StoreResult<Vec<(String, String)>> {
        let (from, to) = match direction {
            Direction::Out => ("userId", "refId"),
            Direction::In => ("refId", "userId"),
        };
        let docs: Vec<Document> = read_all(
            self.assignments
                .find(doc! { "tenant": tenant, from: { "$in": ids } })
                .sort(doc! { from: 1, to: 1 }),
        )
        .await?;
        Ok(docs
            .into_iter()
            .filter_map(|d| {
                Some((
                    d.get_str(from).ok()?.to_owned(),
                    d.get_str(to).ok()?.to_owned(),
                ))
            })
            .collect())
    }

    async fn set_supervisor(
        &self,
        tenant: &str,
        user: &str,
        supervisor: Option<&str>,
    ) -> StoreResult<()> {
        let filter = doc! { "tenant": tenant, "userId": user };
        let update = match supervisor {
            Some(s) => doc! { "$set": { "supervisorId": s } },
            None => doc! { "$unset": { "supervisorId": "" } },
        };
        let result = self
            .users
            .update_one(filter.clone(), update.clone())
            .upsert(true)
            .await;
        match result {
            // An upsert that lost a race to create the user: the user exists
            // now, so a plain update does.
            Err(err) if is_duplicate(&err) => self
                .users
                .update_one(filter, update)
                .await
                .map(|_| ())
                .map_err(db_err),
            other => other.map(|_| ()).map_err(db_err),
        }
    }

    async fn supervision(
        &self,
        tenant: &str,
        direction: Direction,
        user: &str,
    ) -> StoreResult<Vec<String>> {
        if direction == Direction::Out {
            let doc = self
                .users
                .find_one(doc! { "tenant": tenant, "userId": user })
                .await
                .map_err(db_err)?;
            return Ok(doc
                .and_then(|d| d.get_str("supervisorId").ok().map(str::to_owned))
                .into_iter()
                .collect());
        }
        let supervisor = user;
        let docs: Vec<Document> = read_all(
            self.users
                .find(doc! { "tenant": tenant, "supervisorId": supervisor })
                .sort(doc! { "userId": 1 })
                .projection(doc! { "userId": 1, "_id": 0 }),
        )
        .await?;
        Ok(docs
            .iter()
            .filter_map(|d| d.get_str("userId").ok().map(str::to_owned))
            .collect())
    }
}
