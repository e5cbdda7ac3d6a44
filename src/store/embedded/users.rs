//! Users and their display profiles, in the `graph` family (how they
//! relate is in `relations.rs`).

use std::fmt::Display;
use std::sync::Arc;

use rocksdb::{MergeOperands, WriteBatch};

use super::cache::{self, Profile};
use super::keys::{graph as tag, Key};
use super::relations::put_relation;
use super::{families::GRAPH, Inner};
use crate::model::{EdgeKind, User};
use crate::store::{Existing, Relation, StoreError, StoreResult};

/// A user value with no display name: "this user exists".
const NO_NAME: &[u8] = &[0];

/// Merges "this user exists" into a user record: a record that is there
/// (with or without a name) wins, else the first merged. So noting a user
/// is a blind write that never reads, and never erases a profile.
pub(super) fn merge_user(
    _key: &[u8],
    existing: Option<&[u8]>,
    ops: &MergeOperands,
) -> Option<Vec<u8>> {
    Some(existing.or(ops.iter().next()).unwrap_or(NO_NAME).to_vec())
}

pub(super) fn user_value(name: Option<&str>) -> Vec<u8> {
    match name {
        Some(name) => {
            let mut v = Vec::with_capacity(1 + name.len());
            v.push(1);
            v.extend_from_slice(name.as_bytes());
            v
        }
        None => NO_NAME.to_vec(),
    }
}

/// A user value's display name; `record` names the user for errors.
pub(super) fn user_name(value: &[u8], record: impl Display) -> StoreResult<Option<String>> {
    match value.split_first() {
        Some((1, name)) => std::str::from_utf8(name)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| StoreError::corrupt(record, "a name that is not UTF-8")),
        Some((0, [])) => Ok(None),
        Some((code, _)) => Err(StoreError::corrupt(
            record,
            format_args!("unknown user value code {code}"),
        )),
        None => Err(StoreError::corrupt(record, "an empty user value")),
    }
}

pub(super) fn user_key(tenant: &str, id: &str) -> Vec<u8> {
    Key::tag(tag::USER).str(tenant).last(id).into_vec()
}

/// Notes that a user exists inside a batch.
pub(super) fn ensure_user_in(batch: &mut WriteBatch, inner: &Inner, tenant: &str, id: &str) {
    batch.merge_cf(inner.cf(GRAPH), user_key(tenant, id), NO_NAME);
}

impl Inner {
    pub(super) fn put_user(
        &self,
        tenant: &str,
        user: &User,
        existing: Existing,
    ) -> StoreResult<()> {
        let key = user_key(tenant, &user.id);
        if existing == Existing::Keep {
            // A read first: most calls find the user and need no synced
            // write. One that finds none merges, so a user written
            // meanwhile stays as it is (and so does the cache).
            if self.exists(GRAPH, &key)? {
                return Ok(());
            }
            let mut batch = WriteBatch::default();
            batch.merge_cf(self.cf(GRAPH), &key, user_value(user.name.as_deref()));
            return self.commit(batch);
        }
        // Under the user's lock, so the cache ends as the last commit left it.
        let _lock = self.lock(&[&key]);
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(GRAPH), &key, user_value(user.name.as_deref()));
        self.commit(batch)?;
        let profile = Profile {
            tenant: tenant.to_owned(),
            id: user.id.clone(),
            name: user.name.clone(),
        };
        self.profiles
            .put(cache::profile_key(tenant, &user.id), Arc::new(profile));
        Ok(())
    }

    /// Users with their display names, from the cache where it has them.
    /// Noting that a user exists never changes a cached name (see
    /// [`merge_user`]), so only a replacing [`Inner::put_user`] and imports
    /// update it.
    pub(super) fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut missed = Vec::new();
        for id in ids {
            let key = cache::profile_key(tenant, id);
            match self.profiles.get(key, |p| p.is(tenant, id)) {
                Ok(profile) => out.push(User {
                    id: id.clone(),
                    name: profile.name.clone(),
                }),
                Err(miss) => missed.push((id, miss)),
            }
        }
        if missed.is_empty() {
            return Ok(out);
        }
        let keys: Vec<Vec<u8>> = missed.iter().map(|(id, _)| user_key(tenant, id)).collect();
        let values = self.db.batched_multi_get_cf(self.cf(GRAPH), &keys, false);
        for ((id, miss), value) in missed.into_iter().zip(values) {
            if let Some(value) = value.map_err(super::db_err)? {
                let name = user_name(&value, format_args!("graph/user {tenant}/{id}"))?;
                let profile = Profile {
                    tenant: tenant.to_owned(),
                    id: id.clone(),
                    name: name.clone(),
                };
                self.profiles.fill(miss, Arc::new(profile));
                out.push(User {
                    id: id.clone(),
                    name,
                });
            }
        }
        Ok(out)
    }

    /// Bulk follow edges in one synced batch (see `follow_many`).
    pub(super) fn follow_many(&self, tenant: &str, edges: &[(String, String)]) -> StoreResult<()> {
        let mut batch = WriteBatch::default();
        let follows = Relation::Edge(EdgeKind::Follows);
        for (from, to) in edges {
            put_relation(&mut batch, self, follows, tenant, (from, to), &[]);
            ensure_user_in(&mut batch, self, tenant, from);
        }
        self.commit(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Group, GroupKind, MembershipRole, Position};
    use crate::store::embedded::relations::relation_key;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::prelude::*;
    use crate::store::Direction;
    use crate::store::{Cut, ErrorKind};

    /// Records planted with a code no release wrote fail their reads with
    /// an error naming the record and the code.
    #[tokio::test]
    async fn unknown_codes_are_corrupt_records_named_with_their_code() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let team = Group {
            id: "g1".into(),
            kind: GroupKind::Team,
        };
        store
            .join_group("acme", &team, "bob", MembershipRole::Member, 5)
            .await
            .unwrap();
        let cut = Cut {
            kind: EdgeKind::Follows,
            actor: "carol".into(),
            since: Position::MIN,
            began: Position::MIN,
            until: None,
        };
        store.set_cut("acme", "alice", &cut).await.unwrap();
        let db = &store.inner().unwrap();
        let put = |key: Vec<u8>, value: &[u8]| db.db.put_cf(db.cf(GRAPH), key, value).unwrap();

        // A membership of an unknown group kind.
        let member = |direction| {
            let (id, other) = match direction {
                Direction::Out => ("bob", "g1"),
                Direction::In => ("g1", "bob"),
            };
            relation_key(direction, Relation::Member, "acme", id, other)
        };
        put(member(Direction::Out), &[9, 0]);
        let err = store.memberships("acme", "bob").await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        for named in ["membership acme/bob/g1", "group kind code 9"] {
            assert!(err.message.contains(named), "{named} in: {}", err.message);
        }
        // A member of an unknown role.
        put(member(Direction::In), &[0, 7]);
        let err = store
            .members_among("acme", "g1", &["bob".to_owned()])
            .await
            .unwrap_err();
        for named in ["membership acme/bob/g1", "membership role code 7"] {
            assert!(err.message.contains(named), "{named} in: {}", err.message);
        }
        // A cut under an unknown edge name.
        let key = "alice\u{1f}followedBy\u{1f}dave";
        let body = Some(crate::store::records::encode_cut(&[]));
        store
            .put_record(crate::store::RecordKind::Cut, "acme", key, body, None)
            .await
            .unwrap();
        let err = store.cuts("acme", "alice").await.unwrap_err();
        for named in [
            "cut acme/alice/followedBy/dave",
            "edge kind code \"followedBy\"",
        ] {
            assert!(err.message.contains(named), "{named} in: {}", err.message);
        }
        // A user value of an unknown shape.
        put(user_key("acme", "erin"), &[5, b'x']);
        let err = store
            .get_users("acme", &["erin".to_owned()])
            .await
            .unwrap_err();
        for named in ["graph/user acme/erin", "user value code 5"] {
            assert!(err.message.contains(named), "{named} in: {}", err.message);
        }
    }
}
