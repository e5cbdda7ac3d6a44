//! Relations in the `graph` family, each kept from both ends:
//! `(relation, tenant, from, to)` under one tag and `(relation, tenant, to,
//! from)` under another, both holding the attributes. A change reads what
//! stood and writes both keys under their locks, in one synced batch.
//!
//! Earlier versions kept each relation under tags of its own (edges,
//! memberships both ways, assignments both ways, supervisors and their
//! reports) and a group's kind under `graph`: they are moved here and to
//! the records at open, once (relations version 1 in `meta`).

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::families::{GRAPH, META, REACTIONS};
use super::keys::{self, graph as tag, reaction, Key, Reader};
use super::records::put_first;
use super::{EmbeddedStore, Inner};
use crate::model::{EdgeKind, ObjectId};
use crate::store::codes::RELATION;
use crate::store::{
    Change, Direction, Job, Others, RecordKind, Related, Relation, RelationStore, StoreResult,
};

/// The `meta` key of the relations version reached.
const RELATIONS_VERSION_KEY: &[u8] = b"relations-version";
const RELATIONS_VERSION: u8 = 2;

fn side(direction: Direction) -> u8 {
    match direction {
        Direction::Out => tag::RELATION_OUT,
        Direction::In => tag::RELATION_IN,
    }
}

/// The start of every key of one side of `relation`.
pub(super) fn relation_prefix(direction: Direction, relation: Relation) -> Key {
    Key::tag(side(direction)).byte(RELATION.byte(relation))
}

/// The key of `id`'s side of a relation with `other`.
pub(super) fn relation_key(
    direction: Direction,
    relation: Relation,
    tenant: &str,
    id: &str,
    other: &str,
) -> Vec<u8> {
    relation_prefix(direction, relation)
        .str(tenant)
        .str(id)
        .last(other)
        .into_vec()
}

/// Puts both sides of `from` → `to` into a batch.
pub(super) fn put_relation(
    batch: &mut WriteBatch,
    inner: &Inner,
    relation: Relation,
    tenant: &str,
    (from, to): (&str, &str),
    attrs: &[u8],
) {
    let cf = inner.cf(GRAPH);
    batch.put_cf(
        cf,
        relation_key(Direction::Out, relation, tenant, from, to),
        attrs,
    );
    batch.put_cf(
        cf,
        relation_key(Direction::In, relation, tenant, to, from),
        attrs,
    );
}

/// Deletes both sides of `from` → `to` in a batch.
pub(super) fn delete_relation(
    batch: &mut WriteBatch,
    inner: &Inner,
    relation: Relation,
    tenant: &str,
    (from, to): (&str, &str),
) {
    let cf = inner.cf(GRAPH);
    batch.delete_cf(cf, relation_key(Direction::Out, relation, tenant, from, to));
    batch.delete_cf(cf, relation_key(Direction::In, relation, tenant, to, from));
}

impl Inner {
    /// The supervisors `user` reports to (one, unless an earlier version's
    /// race left two).
    pub(super) fn supervisors(&self, tenant: &str, user: &str) -> StoreResult<Vec<String>> {
        let ids = [user.to_owned()];
        let found = self.related(
            tenant,
            Relation::ReportsTo,
            Direction::Out,
            &ids,
            None,
            usize::MAX,
        )?;
        Ok(found.into_iter().map(|r| r.other).collect())
    }

    fn relate(&self, tenant: &str, changes: &[Change]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let outs: Vec<Vec<u8>> = changes
            .iter()
            .map(|c| relation_key(Direction::Out, c.relation, tenant, &c.from, &c.to))
            .collect();
        let _lock = self.lock(&outs);
        let before = self.values(GRAPH, &outs)?;
        let mut batch = WriteBatch::default();
        for c in changes {
            let ends = (c.from.as_str(), c.to.as_str());
            match &c.attrs {
                Some(attrs) => put_relation(&mut batch, self, c.relation, tenant, ends, attrs),
                None => delete_relation(&mut batch, self, c.relation, tenant, ends),
            }
        }
        self.commit(batch)?;
        Ok(before)
    }

    /// See [`RelationStore::relate_owing`]: under the locks of the relation
    /// and of the job, what stood is read, and the change written with the
    /// job in one batch.
    fn relate_owing(&self, tenant: &str, change: &Change, owed: &Job) -> StoreResult<bool> {
        let out = relation_key(
            Direction::Out,
            change.relation,
            tenant,
            &change.from,
            &change.to,
        );
        let _lock = self.lock(&[out.clone(), Inner::job_lock(owed)]);
        let stood = self.exists(GRAPH, &out)?;
        let on = change.attrs.is_some();
        if stood == on {
            return Ok(false);
        }
        let mut batch = WriteBatch::default();
        let ends = (change.from.as_str(), change.to.as_str());
        match &change.attrs {
            Some(attrs) => {
                put_relation(&mut batch, self, change.relation, tenant, ends, attrs);
                self.requeue_in(&mut batch, owed)?;
            }
            None => delete_relation(&mut batch, self, change.relation, tenant, ends),
        }
        self.commit(batch)?;
        Ok(true)
    }

    /// See [`RelationStore::relate_only`]: under the lock of `from`'s side
    /// of the relation as a whole, what it had is read and replaced in one
    /// batch, so a second call waits for the first's write.
    fn relate_only(
        &self,
        tenant: &str,
        relation: Relation,
        from: &str,
        to: Option<&str>,
    ) -> StoreResult<Vec<String>> {
        let side = relation_prefix(Direction::Out, relation)
            .str(tenant)
            .str(from)
            .into_vec();
        let _lock = self.lock(&[side]);
        let ids = [from.to_owned()];
        let had = self.related(tenant, relation, Direction::Out, &ids, None, usize::MAX)?;
        let mut batch = WriteBatch::default();
        let mut ended = Vec::new();
        for r in had.into_iter().filter(|r| Some(r.other.as_str()) != to) {
            delete_relation(&mut batch, self, relation, tenant, (from, r.other.as_str()));
            ended.push(r.other);
        }
        if let Some(to) = to {
            put_relation(&mut batch, self, relation, tenant, (from, to), &[]);
        }
        self.commit(batch)?;
        Ok(ended)
    }

    fn related(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<Related>> {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| ids[a].cmp(&ids[b]));
        order.dedup_by(|a, b| ids[*a] == ids[*b]);
        let mut out = Vec::new();
        for of in order {
            if out.len() >= limit {
                break;
            }
            let prefix = relation_prefix(direction, relation)
                .str(tenant)
                .str(&ids[of])
                .into_vec();
            let lower = match after {
                Some(a) => keys::after(&Key(prefix.clone()).last(a).0),
                None => prefix.clone(),
            };
            self.scan_prefix(GRAPH, &prefix, &lower, limit - out.len(), |k, v| {
                out.push(Related {
                    of,
                    other: Reader(&k[prefix.len()..]).last()?.to_owned(),
                    attrs: v.to_vec(),
                });
                Ok(())
            })?;
        }
        Ok(out)
    }

    /// The relations of each of `ids` with those of `others` that stand,
    /// by id then in the order of `others`. One multi-get.
    fn among(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        others: &[String],
    ) -> StoreResult<Vec<Related>> {
        let pairs: Vec<(usize, &String)> = (0..ids.len())
            .flat_map(|of| others.iter().map(move |other| (of, other)))
            .collect();
        let keys: Vec<Vec<u8>> = pairs
            .iter()
            .map(|(of, other)| relation_key(direction, relation, tenant, &ids[*of], other))
            .collect();
        Ok(pairs
            .into_iter()
            .zip(self.values(GRAPH, &keys)?)
            .filter_map(|((of, other), attrs)| {
                Some(Related {
                    of,
                    other: other.clone(),
                    attrs: attrs?,
                })
            })
            .collect())
    }

    /// Moves the relations earlier versions kept under tags of their own,
    /// and groups' kinds, once, in one batch with the version reached.
    pub(super) fn migrate_relations(&self) -> StoreResult<()> {
        match self.get(META, RELATIONS_VERSION_KEY)?.as_deref() {
            Some([v]) if *v >= RELATIONS_VERSION => return Ok(()),
            Some([_]) | None => {}
            Some(_) => return Err(keys::corrupt("relations version")),
        }
        let mut batch = WriteBatch::default();
        let mut moved = 0;
        let graph = self.cf(GRAPH);
        let mut each = |earlier: u8, f: Move<'_>| {
            let prefix = [earlier];
            self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
                f(&mut batch, Reader(&k[1..]), v)?;
                batch.delete_cf(graph, k);
                moved += 1;
                Ok(())
            })
        };
        // Edges: the outgoing side of each names the relation; the
        // incoming sides go with their keys (a friendship's two outgoing
        // sides are its two relations).
        each(tag::EARLIER_EDGE, &mut |batch, mut r, _| {
            let tenant = r.str()?;
            let code = r.byte()?;
            let (user, other) = (r.str()?, r.last()?);
            let kind = match code {
                EARLIER_FOLLOWS_OUT => EdgeKind::Follows,
                EARLIER_FRIEND => EdgeKind::Friend,
                EARLIER_GROUP_OUT => EdgeKind::Group,
                EARLIER_FOLLOWS_IN | EARLIER_GROUP_IN => return Ok(()),
                _ => return Err(keys::corrupt("earlier edge code")),
            };
            put_relation(
                batch,
                self,
                Relation::Edge(kind),
                tenant,
                (user, other),
                &[],
            );
            Ok(())
        })?;
        // Memberships: a user's side holds the kind, the role and the start.
        each(tag::EARLIER_MEMBER_OF, &mut |batch, mut r, v| {
            let (tenant, user, group) = (r.str()?, r.str()?, r.last()?);
            put_relation(batch, self, Relation::Member, tenant, (user, group), v);
            Ok(())
        })?;
        each(tag::EARLIER_MEMBER, &mut |_, _, _| Ok(()))?;
        each(tag::EARLIER_ASSIGNMENT, &mut |batch, mut r, _| {
            let (tenant, user, ref_id) = (r.str()?, r.str()?, r.last()?);
            put_relation(batch, self, Relation::Assigned, tenant, (user, ref_id), &[]);
            Ok(())
        })?;
        each(tag::EARLIER_ASSIGNED_TO, &mut |_, _, _| Ok(()))?;
        each(tag::EARLIER_SUPERVISOR, &mut |batch, mut r, v| {
            let (tenant, user) = (r.str()?, r.last()?);
            let supervisor = std::str::from_utf8(v).map_err(|_| keys::corrupt("supervisor"))?;
            put_relation(
                batch,
                self,
                Relation::ReportsTo,
                tenant,
                (user, supervisor),
                &[],
            );
            Ok(())
        })?;
        each(tag::EARLIER_SUPERVISEE, &mut |_, _, _| Ok(()))?;
        // A group's kind, as a record at its first version.
        each(tag::EARLIER_GROUP, &mut |batch, mut r, v| {
            let (tenant, group) = (r.str()?, r.last()?);
            put_first(batch, self, RecordKind::Group, (tenant, group), v);
            Ok(())
        })?;
        // Likes, kept in the `reactions` family before they were relations
        // (version 2).
        let likes = [reaction::EARLIER_LIKE];
        let reactions = self.cf(REACTIONS);
        self.scan_prefix(REACTIONS, &likes, &likes, usize::MAX, |k, _| {
            let mut r = Reader(&k[1..]);
            let tenant = r.str()?;
            let action = ObjectId::from_bytes(r.oid()?).to_hex();
            let user = r.last()?;
            let pair = (user, action.as_str());
            put_relation(&mut batch, self, Relation::Likes, tenant, pair, &[]);
            batch.delete_cf(reactions, k);
            moved += 1;
            Ok(())
        })?;
        batch.put_cf(self.cf(META), RELATIONS_VERSION_KEY, [RELATIONS_VERSION]);
        self.commit(batch)?;
        if moved > 0 {
            tracing::info!(moved, "graph entries moved to relations");
        }
        Ok(())
    }
}

/// Moves one earlier entry (its key after the tag, and its value).
type Move<'a> = &'a mut dyn FnMut(&mut WriteBatch, Reader, &[u8]) -> StoreResult<()>;

/// The longest read done in place.
const PAGE_IN_PLACE: usize = 1024;

/// The edge codes earlier versions keyed each side by.
const EARLIER_FOLLOWS_OUT: u8 = 0;
const EARLIER_FOLLOWS_IN: u8 = 1;
const EARLIER_FRIEND: u8 = 2;
const EARLIER_GROUP_OUT: u8 = 3;
const EARLIER_GROUP_IN: u8 = 4;

#[async_trait]
impl RelationStore for EmbeddedStore {
    async fn relate(&self, tenant: &str, changes: &[Change]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let (tenant, changes) = (tenant.to_owned(), changes.to_vec());
        self.blocking(move |db| db.relate(&tenant, &changes)).await
    }

    async fn relate_owing(&self, tenant: &str, change: &Change, owed: &Job) -> StoreResult<bool> {
        let (tenant, change, owed) = (tenant.to_owned(), change.clone(), owed.clone());
        self.blocking(move |db| db.relate_owing(&tenant, &change, &owed))
            .await
    }

    async fn relate_only(
        &self,
        tenant: &str,
        relation: Relation,
        from: &str,
        to: Option<&str>,
    ) -> StoreResult<Vec<String>> {
        let (tenant, from, to) = (tenant.to_owned(), from.to_owned(), to.map(str::to_owned));
        self.blocking(move |db| db.relate_only(&tenant, relation, &from, to.as_deref()))
            .await
    }

    async fn related(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        others: Others<'_>,
    ) -> StoreResult<Vec<Related>> {
        let (after, limit) = match others {
            Others::Among(others) => {
                return self
                    .inner()?
                    .among(tenant, relation, direction, ids, others)
            }
            Others::After { after, limit } => (after, limit),
        };
        // A page in place, and a user's own groups and supervisor (few by
        // nature); longer reads (every follower…) off the async threads.
        let own = direction == Direction::Out
            && matches!(relation, Relation::Member | Relation::ReportsTo);
        if limit <= PAGE_IN_PLACE || own {
            return self
                .inner()?
                .related(tenant, relation, direction, ids, after, limit);
        }
        let (tenant, ids, after) = (tenant.to_owned(), ids.to_vec(), after.map(str::to_owned));
        self.blocking(move |db| {
            db.related(&tenant, relation, direction, &ids, after.as_deref(), limit)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Group, GroupKind, Membership, MembershipRole};
    use crate::store::relations::membership_attrs;
    use crate::store::{Graph, JoinOutcome};

    /// A store as an earlier version left it: follows, a friendship, a
    /// group follow, a membership (a user's side with the kind, a group's
    /// without), an assignment and a supervisor, each both ways under tags
    /// of their own, a group's kind, and a like in the `reactions` family,
    /// with no relations version noted. Open moves them once; the graph
    /// reads as it was.
    #[tokio::test]
    async fn earlier_relations_are_moved_once() -> StoreResult<()> {
        const LIKED: ObjectId = ObjectId::from_bytes([7; 12]);
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            let cf = db.cf(GRAPH);
            let edge = |code: u8, user: &str, other: &str| {
                Key::tag(tag::EARLIER_EDGE)
                    .str("t")
                    .byte(code)
                    .str(user)
                    .last(other)
                    .into_vec()
            };
            let three =
                |tag: u8, a: &str, b: &str| Key::tag(tag).str("t").str(a).last(b).into_vec();
            for key in [
                edge(EARLIER_FOLLOWS_OUT, "ann", "bob"),
                edge(EARLIER_FOLLOWS_IN, "bob", "ann"),
                edge(EARLIER_FRIEND, "ann", "cy"),
                edge(EARLIER_FRIEND, "cy", "ann"),
                edge(EARLIER_GROUP_OUT, "ann", "news"),
                edge(EARLIER_GROUP_IN, "news", "ann"),
                three(tag::EARLIER_ASSIGNMENT, "bob", "applicant-1"),
                three(tag::EARLIER_ASSIGNED_TO, "applicant-1", "bob"),
                three(tag::EARLIER_SUPERVISEE, "ann", "bob"),
            ] {
                batch.put_cf(cf, key, []);
            }
            let team = membership_attrs(GroupKind::Team, MembershipRole::Lead, 7);
            batch.put_cf(cf, three(tag::EARLIER_MEMBER_OF, "ann", "eng"), &team);
            batch.put_cf(cf, three(tag::EARLIER_MEMBER, "eng", "ann"), &team[1..]);
            let supervisor = Key::tag(tag::EARLIER_SUPERVISOR).str("t").last("bob");
            batch.put_cf(cf, supervisor.into_vec(), b"ann");
            let group = Key::tag(tag::EARLIER_GROUP).str("t").last("eng");
            batch.put_cf(cf, group.into_vec(), [0]);
            let like = Key::tag(reaction::EARLIER_LIKE)
                .str("t")
                .oid(LIKED.bytes())
                .last("cy");
            batch.put_cf(db.cf(REACTIONS), like.into_vec(), []);
            batch.delete_cf(db.cf(META), RELATIONS_VERSION_KEY);
            db.commit(batch)?;
        }
        for _ in 0..2 {
            let store = EmbeddedStore::open(dir.path())?;
            let (out, into) = (Direction::Out, Direction::In);
            let edges = |kind, direction, user| store.edges("t", kind, direction, user, None, 10);
            assert_eq!(edges(EdgeKind::Follows, into, "bob").await?, ["ann"]);
            assert_eq!(edges(EdgeKind::Follows, out, "ann").await?, ["bob"]);
            assert_eq!(edges(EdgeKind::Friend, into, "cy").await?, ["ann"]);
            assert_eq!(edges(EdgeKind::Friend, out, "ann").await?, ["cy"]);
            assert_eq!(edges(EdgeKind::Group, into, "news").await?, ["ann"]);
            let membership = Membership {
                group_id: "eng".into(),
                kind: GroupKind::Team,
                role: MembershipRole::Lead,
                since: 7,
            };
            assert_eq!(store.memberships("t", "ann").await?, [membership]);
            let ann = ["ann".to_owned()];
            assert_eq!(
                store.members_among("t", "eng", &ann).await?,
                [("ann".into(), 7)]
            );
            let department = Group {
                id: "eng".into(),
                kind: GroupKind::Department,
            };
            let joined = store
                .join_group("t", &department, "bob", MembershipRole::Member, 9)
                .await?;
            assert!(matches!(joined, JoinOutcome::KindMismatch(_)), "{joined:?}");
            let applicant = ["applicant-1".to_owned()];
            let assigned = store.assignment("t", into, &applicant).await?;
            assert_eq!(assigned, [("applicant-1".into(), "bob".into())]);
            assert_eq!(store.supervision("t", out, "bob").await?, ["ann"]);
            assert_eq!(store.supervision("t", into, "ann").await?, ["bob"]);
            assert_eq!(store.liked("t", "cy", &[LIKED]).await?, [LIKED]);
            assert!(store.liked("t", "ann", &[LIKED]).await?.is_empty());
            // Nothing is left under the earlier tags.
            for earlier in 1..=8 {
                let left = store.inner().unwrap().count_under(GRAPH, &[earlier])?;
                assert_eq!(left, 0, "tag {earlier}");
            }
            let left = store
                .inner()
                .unwrap()
                .count_under(REACTIONS, &[reaction::EARLIER_LIKE])?;
            assert_eq!(left, 0, "earlier likes");
        }
        Ok(())
    }
}
