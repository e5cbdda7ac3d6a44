//! Users and the graph between them: edges, groups and memberships,
//! assignments to refs, supervisors. All in the `graph` family, each kind of
//! record under its own tag.

use std::fmt::Display;
use std::sync::Arc;

use rocksdb::{MergeOperands, WriteBatch};

use super::cache::{self, Profile};
use super::keys::{self, graph as tag, Key, Reader};
use super::{families::GRAPH, Inner};
use crate::model::{EdgeKind, Group, GroupKind, Membership, MembershipRole, Millis, User};
use crate::store::codes::{GROUP_KIND, ROLE};
use crate::store::{Direction, JoinOutcome, StoreError, StoreResult};

pub(super) const EDGE_FOLLOWS_OUT: u8 = 0;
pub(super) const EDGE_FOLLOWS_IN: u8 = 1;
pub(super) const EDGE_FRIEND: u8 = 2;
pub(super) const EDGE_GROUP_OUT: u8 = 3;
pub(super) const EDGE_GROUP_IN: u8 = 4;

/// A user value with no display name: "this user exists".
const NO_NAME: &[u8] = &[0];

/// Merges "this user exists" into a user record: a record that is there
/// (with or without a name) wins. So noting a user is a blind write that
/// never reads, and never erases a profile.
pub(super) fn merge_user(
    _key: &[u8],
    existing: Option<&[u8]>,
    _ops: &MergeOperands,
) -> Option<Vec<u8>> {
    Some(existing.unwrap_or(NO_NAME).to_vec())
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

pub(super) fn edge_codes(kind: EdgeKind) -> (u8, u8) {
    match kind {
        EdgeKind::Follows => (EDGE_FOLLOWS_OUT, EDGE_FOLLOWS_IN),
        EdgeKind::Friend => (EDGE_FRIEND, EDGE_FRIEND),
        EdgeKind::Group => (EDGE_GROUP_OUT, EDGE_GROUP_IN),
    }
}

pub(super) fn edge_key(tenant: &str, code: u8, user: &str, other: &str) -> Vec<u8> {
    Key::tag(tag::EDGE)
        .str(tenant)
        .byte(code)
        .str(user)
        .last(other)
        .into_vec()
}

pub(super) fn group_kind_code(kind: GroupKind) -> u8 {
    GROUP_KIND.byte(kind)
}

fn role_code(role: MembershipRole) -> u8 {
    ROLE.byte(role)
}

/// A group's entry for one member: their role, and when the membership
/// began (absent in entries written before memberships had a start: 0).
pub(super) fn member_value(role: MembershipRole, since: Millis) -> Vec<u8> {
    let mut v = vec![role_code(role)];
    v.extend_from_slice(&since.to_be_bytes());
    v
}

/// When a membership began, from the bytes after a member entry's codes.
fn since_of(rest: &[u8]) -> StoreResult<Millis> {
    match rest {
        [] => Ok(0),
        bytes => Ok(Millis::from_be_bytes(
            bytes
                .try_into()
                .map_err(|_| keys::corrupt("membership start"))?,
        )),
    }
}

/// A member entry's role and start; `record` names the entry for errors.
pub(super) fn decode_member(
    v: &[u8],
    record: impl Display,
) -> StoreResult<(MembershipRole, Millis)> {
    let [code, rest @ ..] = v else {
        return Err(keys::corrupt("member"));
    };
    Ok((ROLE.read_byte(*code, record)?, since_of(rest)?))
}

/// A user's entry for one group: its kind, their role and the start.
pub(super) fn member_of_value(kind: GroupKind, role: MembershipRole, since: Millis) -> Vec<u8> {
    let mut v = vec![group_kind_code(kind), role_code(role)];
    v.extend_from_slice(&since.to_be_bytes());
    v
}

/// A user's entry for one group, as the membership it records; `record`
/// names the entry for errors.
pub(super) fn decode_member_of(
    group_id: String,
    v: &[u8],
    record: impl Display,
) -> StoreResult<Membership> {
    let [kind, code, rest @ ..] = v else {
        return Err(keys::corrupt("membership"));
    };
    Ok(Membership {
        group_id,
        kind: GROUP_KIND.read_byte(*kind, &record)?,
        role: ROLE.read_byte(*code, &record)?,
        since: since_of(rest)?,
    })
}

pub(super) fn member_key(tenant: &str, group_id: &str, user: &str) -> Vec<u8> {
    Key::tag(tag::MEMBER)
        .str(tenant)
        .str(group_id)
        .last(user)
        .into_vec()
}

pub(super) fn member_of_key(tenant: &str, user: &str, group_id: &str) -> Vec<u8> {
    Key::tag(tag::MEMBER_OF)
        .str(tenant)
        .str(user)
        .last(group_id)
        .into_vec()
}

impl Inner {
    /// Lists the bare last parts of keys under `prefix`, after `after`.
    fn list_last(
        &self,
        prefix: Vec<u8>,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let lower = match after {
            Some(a) => keys::after(&Key(prefix.clone()).last(a).0),
            None => prefix.clone(),
        };
        let mut out = Vec::new();
        self.scan_prefix(GRAPH, &prefix, &lower, limit, |k, _| {
            let rest = &k[prefix.len()..];
            out.push(Reader(rest).last()?.to_owned());
            Ok(())
        })?;
        Ok(out)
    }

    pub(super) fn upsert_user(&self, tenant: &str, user: &User) -> StoreResult<()> {
        let key = user_key(tenant, &user.id);
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

    pub(super) fn ensure_user(&self, tenant: &str, id: &str) -> StoreResult<()> {
        // A read first: most calls find the user and need no synced write.
        if self.exists(GRAPH, &user_key(tenant, id))? {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        ensure_user_in(&mut batch, self, tenant, id);
        self.commit(batch)
    }

    /// Users with their display names, from the cache where it has them.
    /// Noting that a user exists never changes a cached name (see
    /// [`merge_user`]), so only [`Inner::upsert_user`] and imports update it.
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

    pub(super) fn set_edge(
        &self,
        tenant: &str,
        kind: EdgeKind,
        from: &str,
        to: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let (forward, backward) = edge_codes(kind);
        let fwd = edge_key(tenant, forward, from, to);
        let back = edge_key(tenant, backward, to, from);
        let _lock = self.lock(&[&fwd, &back]);
        let had = self.exists(GRAPH, &fwd)?;
        if had == on {
            return Ok(false);
        }
        let mut batch = WriteBatch::default();
        let cf = self.cf(GRAPH);
        if on {
            batch.put_cf(cf, &fwd, []);
            batch.put_cf(cf, &back, []);
            ensure_user_in(&mut batch, self, tenant, from);
        } else {
            batch.delete_cf(cf, &fwd);
            batch.delete_cf(cf, &back);
        }
        self.commit(batch)?;
        Ok(true)
    }

    pub(super) fn edges(
        &self,
        tenant: &str,
        kind: EdgeKind,
        direction: Direction,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let (out, back) = edge_codes(kind);
        let code = match direction {
            Direction::Out => out,
            Direction::In => back,
        };
        let prefix = Key::tag(tag::EDGE)
            .str(tenant)
            .byte(code)
            .str(user)
            .into_vec();
        self.list_last(prefix, after, limit)
    }

    /// Bulk follow edges in one synced batch (see `follow_many`).
    pub(super) fn follow_many(&self, tenant: &str, edges: &[(String, String)]) -> StoreResult<()> {
        let mut batch = WriteBatch::default();
        let cf = self.cf(GRAPH);
        for (from, to) in edges {
            batch.put_cf(cf, edge_key(tenant, EDGE_FOLLOWS_OUT, from, to), []);
            batch.put_cf(cf, edge_key(tenant, EDGE_FOLLOWS_IN, to, from), []);
            ensure_user_in(&mut batch, self, tenant, from);
        }
        self.commit(batch)
    }

    pub(super) fn join_group(
        &self,
        tenant: &str,
        group: &Group,
        user: &str,
        role: MembershipRole,
        since: Millis,
    ) -> StoreResult<JoinOutcome> {
        let group_key = Key::tag(tag::GROUP).str(tenant).last(&group.id).into_vec();
        let _lock = self.lock(&[&group_key]);
        let member_key = member_key(tenant, &group.id, user);
        // A member keeps when their membership began.
        let since = match self.get(GRAPH, &member_key)? {
            Some(v) => {
                let record = format_args!("graph/member {tenant}/{}/{user}", group.id);
                decode_member(&v, record)?.1
            }
            None => since,
        };
        let cf = self.cf(GRAPH);
        let mut batch = WriteBatch::default();
        match self.get(GRAPH, &group_key)?.as_deref() {
            Some([code]) if *code != group_kind_code(group.kind) => {
                let record = format_args!("graph/group {tenant}/{}", group.id);
                return Ok(JoinOutcome::KindMismatch(Group {
                    id: group.id.clone(),
                    kind: GROUP_KIND.read_byte(*code, record)?,
                }));
            }
            Some([_]) => {}
            Some(_) => {
                return Err(StoreError::corrupt(
                    format_args!("graph/group {tenant}/{}", group.id),
                    "a group value that is not one kind code",
                ))
            }
            None => batch.put_cf(cf, &group_key, [group_kind_code(group.kind)]),
        }
        batch.put_cf(cf, &member_key, member_value(role, since));
        batch.put_cf(
            cf,
            member_of_key(tenant, user, &group.id),
            member_of_value(group.kind, role, since),
        );
        ensure_user_in(&mut batch, self, tenant, user);
        self.commit(batch)?;
        Ok(JoinOutcome::Joined(Membership {
            group_id: group.id.clone(),
            kind: group.kind,
            role,
            since,
        }))
    }

    pub(super) fn leave_group(
        &self,
        tenant: &str,
        group_id: &str,
        user: &str,
    ) -> StoreResult<bool> {
        let group_key = Key::tag(tag::GROUP).str(tenant).last(group_id).into_vec();
        let _lock = self.lock(&[&group_key]);
        let member = member_key(tenant, group_id, user);
        let was = self.exists(GRAPH, &member)?;
        let mut batch = WriteBatch::default();
        let cf = self.cf(GRAPH);
        batch.delete_cf(cf, member);
        batch.delete_cf(cf, member_of_key(tenant, user, group_id));
        self.commit(batch)?;
        Ok(was)
    }

    pub(super) fn group_members(
        &self,
        tenant: &str,
        group_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let prefix = Key::tag(tag::MEMBER).str(tenant).str(group_id).into_vec();
        self.list_last(prefix, after, limit)
    }

    pub(super) fn memberships(&self, tenant: &str, user: &str) -> StoreResult<Vec<Membership>> {
        let prefix = Key::tag(tag::MEMBER_OF).str(tenant).str(user).into_vec();
        let mut out = Vec::new();
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            let group_id = Reader(&k[prefix.len()..]).last()?.to_owned();
            let record = format_args!("graph/member-of {tenant}/{user}/{group_id}");
            out.push(decode_member_of(group_id.clone(), v, record)?);
            Ok(())
        })?;
        Ok(out)
    }

    pub(super) fn set_assignment(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let to = Key::tag(tag::ASSIGNED_TO)
            .str(tenant)
            .str(ref_id)
            .last(user)
            .into_vec();
        let of = Key::tag(tag::ASSIGNMENT)
            .str(tenant)
            .str(user)
            .last(ref_id)
            .into_vec();
        let _lock = self.lock(&[&to]);
        if self.exists(GRAPH, &to)? == on {
            return Ok(false);
        }
        let mut batch = WriteBatch::default();
        let cf = self.cf(GRAPH);
        if on {
            batch.put_cf(cf, &to, []);
            batch.put_cf(cf, &of, []);
        } else {
            batch.delete_cf(cf, &to);
            batch.delete_cf(cf, &of);
        }
        self.commit(batch)?;
        Ok(true)
    }

    /// Along assignments from each of `ids`: `Out` from users to the refs
    /// they are assigned to, `In` from refs to their users.
    pub(super) fn assignment(
        &self,
        tenant: &str,
        direction: Direction,
        ids: &[String],
    ) -> StoreResult<Vec<(String, String)>> {
        let tag = match direction {
            Direction::Out => tag::ASSIGNMENT,
            Direction::In => tag::ASSIGNED_TO,
        };
        let mut ids: Vec<&String> = ids.iter().collect();
        ids.sort();
        ids.dedup();
        let mut out = Vec::new();
        for id in ids {
            let prefix = Key::tag(tag).str(tenant).str(id).into_vec();
            for other in self.list_last(prefix, None, usize::MAX)? {
                out.push((id.clone(), other));
            }
        }
        Ok(out)
    }

    pub(super) fn set_supervisor(
        &self,
        tenant: &str,
        user: &str,
        supervisor: Option<&str>,
    ) -> StoreResult<()> {
        let key = Key::tag(tag::SUPERVISOR).str(tenant).last(user).into_vec();
        let _lock = self.lock(&[&key]);
        let cf = self.cf(GRAPH);
        let mut batch = WriteBatch::default();
        if let Some(previous) = self.get(GRAPH, &key)? {
            let previous =
                std::str::from_utf8(&previous).map_err(|_| keys::corrupt("supervisor"))?;
            batch.delete_cf(
                cf,
                Key::tag(tag::SUPERVISEE)
                    .str(tenant)
                    .str(previous)
                    .last(user)
                    .into_vec(),
            );
        }
        match supervisor {
            Some(s) => {
                batch.put_cf(cf, &key, s.as_bytes());
                batch.put_cf(
                    cf,
                    Key::tag(tag::SUPERVISEE)
                        .str(tenant)
                        .str(s)
                        .last(user)
                        .into_vec(),
                    [],
                );
            }
            None => batch.delete_cf(cf, &key),
        }
        self.commit(batch)
    }

    pub(super) fn supervisor(&self, tenant: &str, user: &str) -> StoreResult<Option<String>> {
        let key = Key::tag(tag::SUPERVISOR).str(tenant).last(user).into_vec();
        self.get(GRAPH, &key)?
            .map(|v| String::from_utf8(v).map_err(|_| keys::corrupt("supervisor")))
            .transpose()
    }

    pub(super) fn supervisees(&self, tenant: &str, supervisor: &str) -> StoreResult<Vec<String>> {
        let prefix = Key::tag(tag::SUPERVISEE)
            .str(tenant)
            .str(supervisor)
            .into_vec();
        self.list_last(prefix, None, usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Position;
    use crate::store::codes::EDGE_KIND;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::prelude::*;
    use crate::store::{Cut, ErrorKind};

    #[test]
    fn an_edge_kind_is_keyed_by_its_stored_code() {
        for kind in [EdgeKind::Follows, EdgeKind::Friend, EdgeKind::Group] {
            assert_eq!(edge_codes(kind).0, EDGE_KIND.byte(kind), "{kind:?}");
        }
    }

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
        let db = &store.inner;
        let put = |key: Vec<u8>, value: &[u8]| db.db.put_cf(db.cf(GRAPH), key, value).unwrap();

        // A membership of an unknown group kind.
        put(member_of_key("acme", "bob", "g1"), &[9, 0]);
        let err = store.memberships("acme", "bob").await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        for named in ["graph/member-of acme/bob/g1", "group kind code 9"] {
            assert!(err.message.contains(named), "{named} in: {}", err.message);
        }
        // A member of an unknown role.
        put(member_key("acme", "g1", "bob"), &[7]);
        let err = store
            .members_among("acme", "g1", &["bob".to_owned()])
            .await
            .unwrap_err();
        for named in ["graph/member acme/g1/bob", "membership role code 7"] {
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
