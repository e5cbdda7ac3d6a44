//! Relations: who stands in what relation to whom. A backend keeps each
//! relation `from` → `to` with its attributes, readable from either end
//! ([`RelationStore`], three methods); what each relation means and how a
//! change is made is written once, here ([`Graph`]), for every backend:
//!
//! - **follows**, **friendships** and **group follows** (a friendship is two
//!   relations, one each way, made and ended together);
//! - **memberships** (user → group), their attributes the group's kind, the
//!   role and when the membership began; the group's kind is a record of
//!   its own, set by the first join;
//! - **assignments** (user → ref);
//! - **supervision** (user → their one supervisor);
//! - **likes** (user → action), written with the action's count by
//!   [`ReactionStore::set_like`](super::ReactionStore::set_like).

use async_trait::async_trait;

use super::codes::{GROUP_KIND, ROLE};
use super::jobs::Job;
use super::metered::port;
use super::{
    Direction, JoinOutcome, NoticeJob, NoticeSource, RecordKind, RecordStore, Records, StoreError,
    StoreResult,
};
use crate::model::{
    EdgeKind, Group, GroupKind, Membership, MembershipRole, Millis, ObjectId, User,
};

/// What a relation says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Relation {
    /// An edge of this kind (a friendship stands both ways).
    Edge(EdgeKind),
    /// A user is a member of a group.
    Member,
    /// A user is assigned to a ref (a recruiter to an applicant…).
    Assigned,
    /// A user reports to their supervisor.
    ReportsTo,
    /// A user likes an action (its id in hex). Set and ended with the
    /// action's like count ([`ReactionStore::set_like`](super::ReactionStore::set_like)).
    Likes,
}

impl Relation {
    pub const ALL: [Relation; 7] = [
        Relation::Edge(EdgeKind::Follows),
        Relation::Edge(EdgeKind::Friend),
        Relation::Edge(EdgeKind::Group),
        Relation::Member,
        Relation::Assigned,
        Relation::ReportsTo,
        Relation::Likes,
    ];
}

/// One change to a relation: `attrs` sets it (with those attributes),
/// `None` ends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub relation: Relation,
    pub from: String,
    pub to: String,
    pub attrs: Option<Vec<u8>>,
}

impl Change {
    fn new(relation: Relation, from: &str, to: &str, attrs: Option<Vec<u8>>) -> Change {
        Change {
            relation,
            from: from.to_owned(),
            to: to.to_owned(),
            attrs,
        }
    }
}

/// One relation as read from one of the ids asked about: `of` is that id's
/// index, `other` the id at the relation's other end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Related {
    pub of: usize,
    pub other: String,
    pub attrs: Vec<u8>,
}

/// Which other ends a [`RelationStore::related`] read answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Others<'a> {
    /// Every one, in order, after `after`; at most `limit` in all.
    After {
        after: Option<&'a str>,
        limit: usize,
    },
    /// Those of these that the relation joins to the id.
    Among(&'a [String]),
}

impl Others<'_> {
    /// Every other end.
    pub const ALL: Others<'static> = Others::After {
        after: None,
        limit: usize::MAX,
    };
}

port! {
/// Relations kept from both ends.
pub trait RelationStore: Send + Sync {
    /// Makes every change, together where the engine can (one batch on the
    /// embedded store). Returns, per change, the attributes the relation
    /// had before (`None`: it did not stand).
    async fn relate(&self, tenant: &str, changes: &[Change]) -> StoreResult<Vec<Option<Vec<u8>>>>;
    /// Along `relation` from each of `ids`: `Out`, what each relates to;
    /// `In`, what relates to each; the other ends `others` says. Ordered
    /// by the id, then the other end (among given ones: in their order).
    /// One round trip.
    async fn related(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        others: Others<'_>,
    ) -> StoreResult<Vec<Related>>;
    /// Makes `change` and, when it makes a relation stand that did not,
    /// queues `owed` in the same step (one batch, one transaction): afresh
    /// over a job of its key that waits or runs, whose worker then finds
    /// its lease lost. Returns whether the relation changed.
    async fn relate_owing(&self, tenant: &str, change: &Change, owed: &Job) -> StoreResult<bool>;
    /// Makes `to` the one relation `from` has along `relation` (with no
    /// attributes), or, with `None`, leaves it none: every other it had is
    /// ended in the same step, so calls made at once for one `from` leave
    /// exactly one (the last's). Returns the other ends ended. A relation
    /// written this way is written this way only.
    async fn relate_only(
        &self,
        tenant: &str,
        relation: Relation,
        from: &str,
        to: Option<&str>,
    ) -> StoreResult<Vec<String>>;
}
}

port! {
/// Users and their display profiles.
pub trait UserStore: Send + Sync {
    /// Writes a user with its display profile; a user already stored is
    /// replaced or kept as `existing` says.
    async fn put_user(&self, tenant: &str, user: &User, existing: Existing) -> StoreResult<()>;
    /// The users that exist among `ids`, in no particular order.
    async fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>>;
}
}

/// What [`UserStore::put_user`] does to a user already stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Its profile is replaced by the one given.
    Replace,
    /// It stays as it is: the user is written only where none is (so
    /// noting that a user exists keeps any profile it has).
    Keep,
}

/// A membership's attributes: the group's kind, the role and the start
/// (10 bytes).
pub fn membership_attrs(kind: GroupKind, role: MembershipRole, since: Millis) -> Vec<u8> {
    let mut attrs = vec![GROUP_KIND.byte(kind), ROLE.byte(role)];
    attrs.extend_from_slice(&since.to_be_bytes());
    attrs
}

/// The membership of `user` in `group_id` its attributes record (a
/// membership from before memberships had a start began at 0).
pub fn membership_of(
    tenant: &str,
    user: &str,
    group_id: &str,
    attrs: &[u8],
) -> StoreResult<Membership> {
    let record = format!("membership {tenant}/{user}/{group_id}");
    let [kind, role, since @ ..] = attrs else {
        return Err(StoreError::corrupt(&record, "no kind and role"));
    };
    let since = match since {
        [] => 0,
        bytes => Millis::from_be_bytes(
            bytes
                .try_into()
                .map_err(|_| StoreError::corrupt(&record, "a start that is not 8 bytes"))?,
        ),
    };
    Ok(Membership {
        group_id: group_id.to_owned(),
        kind: GROUP_KIND.read_byte(*kind, &record)?,
        role: ROLE.read_byte(*role, &record)?,
        since,
    })
}

/// The relations, read and changed by the same rules on every backend.
/// Every store that keeps relations, users and records has them.
#[async_trait]
pub trait Graph: RelationStore + UserStore + RecordStore {
    /// Adds (`on`) or removes an edge; a friendship stands both ways.
    /// Returns whether anything changed.
    async fn set_edge(
        &self,
        tenant: &str,
        kind: EdgeKind,
        from: &str,
        to: &str,
        on: bool,
    ) -> StoreResult<bool> {
        if on {
            self.put_user(tenant, &User::unnamed(from), Existing::Keep)
                .await?;
        }
        let relation = Relation::Edge(kind);
        let attrs = on.then(Vec::new);
        let mut changes = vec![Change::new(relation, from, to, attrs.clone())];
        if kind == EdgeKind::Friend {
            changes.push(Change::new(relation, to, from, attrs));
        }
        let before = self.relate(tenant, &changes).await?;
        Ok(before[0].is_some() != on)
    }

    /// Neighbours of `user` along `kind` edges, ordered by id, after `after`.
    async fn edges(
        &self,
        tenant: &str,
        kind: EdgeKind,
        direction: Direction,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let others = self
            .related(
                tenant,
                Relation::Edge(kind),
                edge_direction(kind, direction),
                &[user.to_owned()],
                Others::After { after, limit },
            )
            .await?;
        Ok(others.into_iter().map(|r| r.other).collect())
    }

    /// Which of `readers` have a `kind` edge to `actor` (follow it, or are
    /// its friends). One round trip.
    async fn edges_among(
        &self,
        tenant: &str,
        kind: EdgeKind,
        readers: &[String],
        actor: &str,
    ) -> StoreResult<Vec<String>> {
        if readers.is_empty() {
            return Ok(Vec::new());
        }
        let direction = edge_direction(kind, Direction::In);
        let actor = [actor.to_owned()];
        let among = Others::Among(readers);
        let found = self
            .related(tenant, Relation::Edge(kind), direction, &actor, among)
            .await?;
        Ok(found.into_iter().map(|r| r.other).collect())
    }

    /// Adds a user to a group, creating the group (of `group.kind`) on
    /// first join. A new membership begins at `since`; a member's keeps its
    /// start and takes the new role.
    async fn join_group(
        &self,
        tenant: &str,
        group: &Group,
        user: &str,
        role: MembershipRole,
        since: Millis,
    ) -> StoreResult<JoinOutcome> {
        let kind = group_kind(self, tenant, group).await?;
        if kind != group.kind {
            return Ok(JoinOutcome::KindMismatch(Group {
                id: group.id.clone(),
                kind,
            }));
        }
        self.put_user(tenant, &User::unnamed(user), Existing::Keep)
            .await?;
        let ids = [group.id.clone()];
        let held = self
            .related(
                tenant,
                Relation::Member,
                Direction::Out,
                &[user.to_owned()],
                Others::Among(&ids),
            )
            .await?;
        let since = match held.into_iter().next() {
            Some(r) => membership_of(tenant, user, &group.id, &r.attrs)?.since,
            None => since,
        };
        let attrs = membership_attrs(kind, role, since);
        let change = Change::new(Relation::Member, user, &group.id, Some(attrs));
        self.relate(tenant, &[change]).await?;
        Ok(JoinOutcome::Joined(Membership {
            group_id: group.id.clone(),
            kind,
            role,
            since,
        }))
    }

    /// Returns whether the user was a member.
    async fn leave_group(&self, tenant: &str, group_id: &str, user: &str) -> StoreResult<bool> {
        let change = Change::new(Relation::Member, user, group_id, None);
        Ok(self.relate(tenant, &[change]).await?[0].is_some())
    }

    /// Members of a group, ordered by id, after `after`.
    async fn group_members(
        &self,
        tenant: &str,
        group_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let ids = [group_id.to_owned()];
        let members = self
            .related(
                tenant,
                Relation::Member,
                Direction::In,
                &ids,
                Others::After { after, limit },
            )
            .await?;
        Ok(members.into_iter().map(|r| r.other).collect())
    }

    /// Which of `users` are members of `group_id`, each with when their
    /// membership began. One round trip.
    async fn members_among(
        &self,
        tenant: &str,
        group_id: &str,
        users: &[String],
    ) -> StoreResult<Vec<(String, Millis)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let group = [group_id.to_owned()];
        let found = self
            .related(
                tenant,
                Relation::Member,
                Direction::In,
                &group,
                Others::Among(users),
            )
            .await?;
        let mut members = Vec::new();
        for r in found {
            let since = membership_of(tenant, &r.other, group_id, &r.attrs)?.since;
            members.push((r.other, since));
        }
        Ok(members)
    }

    /// The groups a user belongs to, ordered by id.
    async fn memberships(&self, tenant: &str, user: &str) -> StoreResult<Vec<Membership>> {
        let ids = [user.to_owned()];
        self.related(tenant, Relation::Member, Direction::Out, &ids, Others::ALL)
            .await?
            .into_iter()
            .map(|r| membership_of(tenant, user, &r.other, &r.attrs))
            .collect()
    }

    /// Assigns `user` to `ref_id` for `by` at `at`, and owes the assignee
    /// its notice: an assignment that turns on queues its notice job in the
    /// same step, so none stands without the other. Returns whether
    /// anything changed.
    async fn assign(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        by: &str,
        at: Millis,
    ) -> StoreResult<bool> {
        let notice = NoticeJob {
            tenant: tenant.to_owned(),
            source: NoticeSource::Assigned {
                ref_id: ref_id.to_owned(),
                user: user.to_owned(),
                by: by.to_owned(),
            },
            at,
        }
        .to_job()?;
        let change = Change::new(Relation::Assigned, user, ref_id, Some(Vec::new()));
        self.relate_owing(tenant, &change, &notice).await
    }

    /// Assigns (`on`) or unassigns `user` to `ref_id`, owing no notice (an
    /// unassignment, or a seeded assignment). Returns whether anything
    /// changed.
    async fn set_assignment(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let change = Change::new(Relation::Assigned, user, ref_id, on.then(Vec::new));
        Ok(self.relate(tenant, &[change]).await?[0].is_some() != on)
    }

    /// Along assignments, for each of `ids`: `Out`, the refs each user is
    /// assigned to; `In`, the users assigned to each ref. As `(id, other)`
    /// pairs, ordered by both. One round trip.
    async fn assignment(
        &self,
        tenant: &str,
        direction: Direction,
        ids: &[String],
    ) -> StoreResult<Vec<(String, String)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let found = self
            .related(tenant, Relation::Assigned, direction, ids, Others::ALL)
            .await?;
        Ok(found
            .into_iter()
            .map(|r| (ids[r.of].clone(), r.other))
            .collect())
    }

    /// Sets (or, with `None`, clears) `user`'s supervisor: the one they
    /// had, if another, is ended in the same step, so calls made at once
    /// leave one supervisor (the last set).
    async fn set_supervisor(
        &self,
        tenant: &str,
        user: &str,
        supervisor: Option<&str>,
    ) -> StoreResult<()> {
        self.put_user(tenant, &User::unnamed(user), Existing::Keep)
            .await?;
        self.relate_only(tenant, Relation::ReportsTo, user, supervisor)
            .await?;
        Ok(())
    }

    /// Along supervision: `Out`, `user`'s supervisor (none or one); `In`,
    /// the users `user` supervises, ordered by id.
    async fn supervision(
        &self,
        tenant: &str,
        direction: Direction,
        user: &str,
    ) -> StoreResult<Vec<String>> {
        let ids = [user.to_owned()];
        let found = self
            .related(tenant, Relation::ReportsTo, direction, &ids, Others::ALL)
            .await?;
        Ok(found.into_iter().map(|r| r.other).collect())
    }

    /// Which of `action_ids` `user` likes. One round trip.
    async fn liked(
        &self,
        tenant: &str,
        user: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        if action_ids.is_empty() {
            return Ok(Vec::new());
        }
        let hex: Vec<String> = action_ids.iter().map(|id| id.to_hex()).collect();
        let found = self
            .related(
                tenant,
                Relation::Likes,
                Direction::Out,
                &[user.to_owned()],
                Others::Among(&hex),
            )
            .await?;
        let mut at = hex.iter().zip(action_ids);
        Ok(found
            .into_iter()
            .filter_map(|r| at.find(|(h, _)| **h == r.other).map(|(_, id)| *id))
            .collect())
    }
}

impl<T: RelationStore + UserStore + RecordStore + ?Sized> Graph for T {}

/// A friendship stands both ways: its "in" is its "out".
fn edge_direction(kind: EdgeKind, direction: Direction) -> Direction {
    match kind {
        EdgeKind::Friend => Direction::Out,
        _ => direction,
    }
}

/// The kind `group` has: the one a first join gave it, or, if none has,
/// `group.kind` (given to it now).
async fn group_kind<S: RecordStore + ?Sized>(
    store: &S,
    tenant: &str,
    group: &Group,
) -> StoreResult<GroupKind> {
    let record = format!("group {tenant}/{}", group.id);
    loop {
        if let Some(stored) = store.record(RecordKind::Group, tenant, &group.id).await? {
            let [code] = stored.body[..] else {
                return Err(StoreError::corrupt(
                    &record,
                    "a body that is not one kind code",
                ));
            };
            return GROUP_KIND.read_byte(code, &record);
        }
        let body = vec![GROUP_KIND.byte(group.kind)];
        let put = store.put_record(RecordKind::Group, tenant, &group.id, Some(body), Some(0));
        if put.await? {
            return Ok(group.kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_attributes_round_trip_and_read_strictly() {
        let attrs = membership_attrs(GroupKind::Department, MembershipRole::Lead, 42);
        let membership = membership_of("t", "ann", "g", &attrs).unwrap();
        assert_eq!(
            (membership.kind, membership.role, membership.since),
            (GroupKind::Department, MembershipRole::Lead, 42)
        );
        // Before memberships had a start.
        assert_eq!(
            membership_of("t", "ann", "g", &attrs[..2]).unwrap().since,
            0
        );
        let err = membership_of("t", "ann", "g", &[9, 0]).unwrap_err();
        assert!(err.message.contains("membership t/ann/g"), "{err}");
        assert!(membership_of("t", "ann", "g", &attrs[..5]).is_err());
    }
}
