//! Actions and their slices by ref.

use std::collections::HashMap;
use std::sync::Arc;

use rocksdb::WriteBatch;

use super::cache;
use super::families::{ACTIONS, GRAPH, META, OUTBOX, QUEUE, REACTIONS, REFS};
use super::keys::{self, queue, reaction, Key, Oid, Reader};
use super::relations::{delete_relation, relation_prefix};
use super::users::ensure_user_in;
use super::Inner;
use crate::model::{Action, FanOut, FanOutState, FeedItem, Millis, ObjectId, Scope};
use crate::store::{
    Direction, FanOutJob, Inserted, Outbox, Record, Relation, Removal, StoreError, StoreResult,
};

/// Under `meta` once every stored action has its lookup entries (the
/// second generation lists public actions under the groups they were sent
/// to, too).
const OUTBOX_MARKER: &[u8] = b"lookups-indexed-2";

/// The entries that list an action in outboxes, as keys and values: the
/// actor's (no value: the actor is the owner); the groups' it is shared
/// with, the readers' it names, or for a public one the groups' it was
/// sent to (the actor's id).
fn outbox_entries(action: &Action) -> Vec<(&'static str, Vec<u8>, &[u8])> {
    let actor = action.actor_id.as_bytes();
    let mut owners = vec![(action.actor_id.clone(), &[][..])];
    match action.scope {
        Scope::Team | Scope::Department => owners.extend(
            action
                .scope_groups
                .iter()
                .map(|g| (keys::outbox_owner(&Outbox::Group(g.clone())), actor)),
        ),
        Scope::Restricted => owners.extend(
            action
                .readers
                .iter()
                .map(|r| (keys::outbox_owner(&Outbox::Named(r.clone())), actor)),
        ),
        Scope::Public => owners.extend(
            action
                .to
                .iter()
                .map(|g| (keys::outbox_owner(&Outbox::Sent(g.clone())), actor)),
        ),
    }
    let mut entries: Vec<(&'static str, Vec<u8>, &[u8])> = owners
        .into_iter()
        .map(|(owner, value)| {
            let mut key = Vec::with_capacity(64);
            keys::outbox(
                &mut key,
                &action.tenant,
                &owner,
                action.conducted,
                action.id.bytes(),
            );
            (OUTBOX, key, value)
        })
        .collect();
    // Its places in the orders the expiry sweeper reads.
    let (t, id) = (action.tenant.as_str(), action.id.bytes());
    let age = Key::tag(queue::AGE).num(action.conducted).str(t).oid(id);
    entries.push((QUEUE, age.into_vec(), &[]));
    if let Some(at) = action.expires_at {
        let expiry = Key::tag(queue::EXPIRY).num(at).str(t).oid(id);
        entries.push((QUEUE, expiry.into_vec(), &[]));
    }
    entries
}

/// Where the action of `actor` recorded under `foreign` is found: its
/// entry holds the action's id.
fn foreign_key(tenant: &str, actor: &str, foreign: &str) -> Vec<u8> {
    Key::tag(queue::FOREIGN)
        .str(tenant)
        .str(actor)
        .last(foreign)
        .into_vec()
}

/// The foreign-id entry of `action`, if it has a foreign id.
pub(super) fn foreign_entry(action: &Action) -> Option<Vec<u8>> {
    let foreign = action.foreign.as_ref()?;
    Some(foreign_key(&action.tenant, &action.actor_id, &foreign.id))
}

/// Whether `a` and `b` are under one foreign id of one actor.
fn same_foreign_id(a: &Action, b: &Action) -> bool {
    match (&a.foreign, &b.foreign) {
        (Some(x), Some(y)) => x.id == y.id && a.actor_id == b.actor_id && a.tenant == b.tenant,
        _ => false,
    }
}

/// Reads `(when, tenant, action)` keys under `tag` up to `until`
/// (inclusive), soonest first.
fn due(
    db: &Inner,
    tag: u8,
    until: Millis,
    limit: usize,
    out: &mut Vec<(Millis, String, ObjectId)>,
) -> StoreResult<()> {
    let lower = [tag];
    let upper = Key::tag(tag).num(until.saturating_add(1)).into_vec();
    db.scan(QUEUE, &lower, Some(upper), limit, |k, _| {
        let mut r = Reader(&k[1..]);
        let at = r.num()?;
        let tenant = r.str()?.to_owned();
        out.push((at, tenant, ObjectId::from_bytes(r.oid()?)));
        Ok(())
    })
}
/// Outbox entries written per batch while indexing a store at open.
const INDEX_BATCH: usize = 10_000;

pub(super) fn action_key(tenant: &str, id: Oid) -> Vec<u8> {
    Key::new().str(tenant).oid(id).into_vec()
}

pub(super) fn slice_key(tenant: &str, ref_id: &str, id: Oid) -> Vec<u8> {
    Key::new().str(tenant).str(ref_id).oid(id).into_vec()
}

pub(super) fn comment_key(tenant: &str, action: Oid, comment: Oid) -> Vec<u8> {
    Key::tag(reaction::COMMENT)
        .str(tenant)
        .oid(action)
        .oid(comment)
        .into_vec()
}

/// The lock that guards everything decided about one action: its record,
/// lease, items and reactions.
pub(super) fn action_lock(tenant: &str, id: Oid) -> Vec<u8> {
    action_key(tenant, id)
}

impl Inner {
    /// An action, from the cache or the database.
    pub(super) fn action(&self, tenant: &str, id: ObjectId) -> StoreResult<Option<Arc<Action>>> {
        let key = cache::action_key(&id);
        let miss = match self.actions.get(key, |a| a.id == id && a.tenant == tenant) {
            Ok(action) => return Ok(Some(action)),
            Err(miss) => miss,
        };
        let Some(bytes) = self
            .db
            .get_pinned_cf(self.cf(ACTIONS), action_key(tenant, id.bytes()))
            .map_err(super::db_err)?
        else {
            return Ok(None);
        };
        let action = Arc::new(keys::decode_record::<Action>(&bytes)?);
        self.actions.fill(miss, action.clone());
        Ok(Some(action))
    }

    /// Adds an action's record to a batch; the cache learns it once the batch
    /// is committed (see [`Inner::settle`]).
    pub(super) fn put_action(&self, batch: &mut WriteBatch, action: &Action) -> StoreResult<()> {
        let bytes = keys::encode_record(action)?;
        batch.put_cf(
            self.cf(ACTIONS),
            action_key(&action.tenant, action.id.bytes()),
            bytes,
        );
        Ok(())
    }

    /// Adds the entries that find an action (its slices, its outboxes) to
    /// a batch.
    pub(super) fn index_action(&self, batch: &mut WriteBatch, action: &Action) {
        let (t, id) = (action.tenant.as_str(), action.id.bytes());
        for ref_id in &action.ref_ids {
            batch.put_cf(self.cf(REFS), slice_key(t, ref_id, id), []);
        }
        if let Some(key) = foreign_entry(action) {
            batch.put_cf(self.cf(QUEUE), key, id);
        }
        self.index_outboxes_of(batch, action);
    }

    /// Adds an action's outbox entries to a batch: its actor's, and those
    /// of the groups it is shared with or of the readers it names. A shared
    /// or named entry holds the actor's id.
    fn index_outboxes_of(&self, batch: &mut WriteBatch, action: &Action) {
        for (family, key, value) in outbox_entries(action) {
            batch.put_cf(self.cf(family), key, value);
        }
    }

    /// Takes an action's outbox entries out, in a batch.
    fn unindex_outboxes_of(&self, batch: &mut WriteBatch, action: &Action) {
        for (family, key, _) in outbox_entries(action) {
            batch.delete_cf(self.cf(family), key);
        }
    }

    /// Up to `limit` actions, across tenants, whose expiry (their own, or
    /// `item_ttl` after they happened) lies at or before `now`, soonest
    /// first, as (tenant, id).
    pub(super) fn expired(
        &self,
        now: Millis,
        item_ttl: Option<Millis>,
        limit: usize,
    ) -> StoreResult<Vec<(Millis, String, ObjectId)>> {
        let mut found = Vec::new();
        due(self, queue::EXPIRY, now, limit, &mut found)?;
        if let Some(ttl) = item_ttl {
            let mut aged = Vec::new();
            due(self, queue::AGE, now.saturating_sub(ttl), limit, &mut aged)?;
            found.extend(
                aged.into_iter()
                    .map(|(at, t, id)| (at.saturating_add(ttl), t, id)),
            );
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.bytes().cmp(&b.2.bytes())));
        // By its own expiry and by age: the sooner counts.
        let mut seen = std::collections::HashSet::new();
        found.retain(|(_, _, id)| seen.insert(*id));
        found.truncate(limit);
        Ok(found)
    }

    /// Takes an action's [`Inner::index_action`] entries out, in a batch.
    fn unindex_action(&self, batch: &mut WriteBatch, action: &Action) {
        let (t, id) = (action.tenant.as_str(), action.id.bytes());
        for ref_id in &action.ref_ids {
            batch.delete_cf(self.cf(REFS), slice_key(t, ref_id, id));
        }
        if let Some(key) = foreign_entry(action) {
            batch.delete_cf(self.cf(QUEUE), key);
        }
        self.unindex_outboxes_of(batch, action);
    }

    /// Writes the outbox entries of actions stored before their outboxes
    /// existed (the actors' first, then the groups' and the named
    /// readers'), once: a store opened for the first time by a version
    /// with them gets them for everything it holds, then a marker says it
    /// is done.
    pub(super) fn index_outboxes(&self) -> StoreResult<()> {
        if self.get(META, OUTBOX_MARKER)?.is_some() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        self.scan(ACTIONS, &[], None, usize::MAX, |_, v| {
            let action: Action = keys::decode_record(v)?;
            self.index_outboxes_of(&mut batch, &action);
            // Bounded batches: a large store is indexed in steps, and the
            // marker, written last, says it finished.
            if batch.len() >= INDEX_BATCH {
                self.commit_unsynced(std::mem::take(&mut batch))?;
            }
            Ok(())
        })?;
        batch.put_cf(self.cf(META), OUTBOX_MARKER, []);
        self.commit(batch)
    }

    /// Writes the actions of an archive into `batch`, each as the archive
    /// last gives it. One the store holds is replaced whole: its entries
    /// (slices, outboxes, places in the expiry orders, foreign-id entry),
    /// feed items, comments and discussion entries go first, so only what
    /// the archive carries (written after them in the batch) is found.
    /// Foreign ids are checked against the archive as a whole: it may move
    /// one from an action to another, but not leave two actions under one,
    /// nor take one its actor recorded under another action since the
    /// archive was checked (a record racing the import); either refuses the
    /// batch. The caller holds the locks of the actions and of their
    /// foreign-id entries, which `insert_action` takes too. Returns the
    /// actions written.
    pub(super) fn import_actions(
        &self,
        batch: &mut WriteBatch,
        records: &[Record],
    ) -> StoreResult<HashMap<ObjectId, Action>> {
        let mut archived = HashMap::new();
        for record in records {
            if let Record::Action { action } = record {
                let mut action = action.clone();
                // A fan-out not done is queued again after the records
                // (`import_notices`), as after a crash.
                if action.fan_out.state != FanOutState::Done {
                    action.fan_out = FanOut::pending();
                }
                archived.insert(action.id, action);
            }
        }
        let mut claimed: HashMap<Vec<u8>, ObjectId> = HashMap::new();
        for action in archived.values() {
            let Some(key) = foreign_entry(action) else {
                continue;
            };
            let foreign = action.foreign.as_ref().map(|f| f.id.as_str());
            if let Some(other) = claimed.insert(key.clone(), action.id) {
                return Err(StoreError::invalid(format!(
                    "actions {other} and {} of tenant {:?}: the archive gives both foreignId \
                     {:?} of actor {:?}, and an actor's foreignId names one action: nothing of \
                     this batch was written",
                    action.id,
                    action.tenant,
                    foreign.unwrap_or_default(),
                    action.actor_id
                )));
            }
            let Some(held) = self.get(QUEUE, &key)? else {
                continue;
            };
            let holder = ObjectId::from_bytes(Reader(&held).oid()?);
            // The entry goes with its action: one without it (or whose
            // action has another foreign id now) holds nothing, and nor
            // does one the archive gives again (it carries its foreign id).
            let holds = holder != action.id
                && !archived.contains_key(&holder)
                && self
                    .action(&action.tenant, holder)?
                    .is_some_and(|a| same_foreign_id(&a, action));
            if holds {
                return Err(StoreError::invalid(format!(
                    "action {} of tenant {:?}: its actor {:?} recorded foreignId {:?} as \
                     action {holder} since the archive was checked, and an actor's foreignId \
                     names one action: nothing of this batch was written; leave one of the two \
                     out (or give it another foreignId) and import again",
                    action.id,
                    action.tenant,
                    action.actor_id,
                    foreign.unwrap_or_default()
                )));
            }
        }
        // Every replaced action's old entries, and what hangs off it, go
        // first, then the archive's are written: a foreign id moved between
        // two of them ends with its new holder whatever their order.
        for action in archived.values() {
            let (t, id) = (action.tenant.as_str(), action.id);
            if let Some(old) = self.action(t, id)? {
                self.unindex_action(batch, &old);
                self.remove_items(batch, t, id)?;
                self.drop_comments(batch, t, id.bytes())?;
                self.drop_discussion(batch, t, id.bytes())?;
            }
        }
        for action in archived.values() {
            ensure_user_in(batch, self, &action.tenant, &action.actor_id);
            self.put_action(batch, action)?;
            self.index_action(batch, action);
        }
        Ok(archived)
    }

    /// Takes an action's comments out, in a batch.
    fn drop_comments(&self, batch: &mut WriteBatch, tenant: &str, id: Oid) -> StoreResult<()> {
        let thread = Key::tag(reaction::COMMENT).str(tenant).oid(id).into_vec();
        let reactions = self.cf(REACTIONS);
        self.scan_prefix(REACTIONS, &thread, &thread, usize::MAX, |k, _| {
            batch.delete_cf(reactions, k);
            Ok(())
        })
    }

    /// Tells the cache what a committed batch did to actions.
    pub(super) fn settle(&self, written: Vec<Action>, deleted: &[ObjectId]) {
        for action in written {
            self.actions
                .put(cache::action_key(&action.id), Arc::new(action));
        }
        for id in deleted {
            self.actions.forget(cache::action_key(id));
        }
    }

    /// The action `action`'s actor recorded under its foreign id, if any.
    fn under_foreign_id(&self, action: &Action) -> StoreResult<Option<Action>> {
        let Some(key) = foreign_entry(action) else {
            return Ok(None);
        };
        let Some(held) = self.get(QUEUE, &key)? else {
            return Ok(None);
        };
        let id = Reader(&held).oid()?;
        // The entry goes with its action (in the same batch): one without
        // it is not there.
        Ok(self
            .action(&action.tenant, ObjectId::from_bytes(id))?
            .map(|found| Action::clone(&found)))
    }

    /// The actions recorded under `under`'s `(actor, foreign id)`s.
    pub(super) fn foreign_actions(
        &self,
        tenant: &str,
        under: &[(String, String)],
    ) -> StoreResult<Vec<Action>> {
        let mut found = Vec::new();
        for (actor, foreign) in under {
            let Some(held) = self.get(QUEUE, &foreign_key(tenant, actor, foreign))? else {
                continue;
            };
            let id = ObjectId::from_bytes(Reader(&held).oid()?);
            found.extend(self.action(tenant, id)?.map(|a| Action::clone(&a)));
        }
        Ok(found)
    }

    pub(super) fn insert_action(&self, action: &Action) -> StoreResult<Inserted> {
        let (t, id) = (action.tenant.as_str(), action.id.bytes());
        // The foreign id's entry is read and written under its lock, so of
        // two records under one id the second finds the first's.
        let mut locks = vec![action_lock(t, id)];
        locks.extend(foreign_entry(action));
        let _lock = self.lock(&locks);
        // One stored under its id already (a retry of a request whose first
        // attempt stored it) is answered as one under its foreign id.
        if let Some(existing) = self.action(t, action.id)? {
            return Ok(Inserted::Existing(Box::new(Action::clone(&existing))));
        }
        if let Some(existing) = self.under_foreign_id(action)? {
            return Ok(Inserted::Existing(Box::new(existing)));
        }
        let mut batch = WriteBatch::default();
        self.put_action(&mut batch, action)?;
        self.index_action(&mut batch, action);
        // Its fan-out job, in the same batch: an action recorded is an
        // action fanned out, whatever happens next.
        if action.fan_out.state != FanOutState::Done {
            self.queue_in(&mut batch, &FanOutJob::of(t, action.id)?)?;
        }
        ensure_user_in(&mut batch, self, t, &action.actor_id);
        self.commit(batch)?;
        self.settle(vec![action.clone()], &[]);
        Ok(Inserted::New)
    }

    pub(super) fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            if let Some(action) = self.action(tenant, id)? {
                out.push(Action::clone(&action));
            }
        }
        Ok(out)
    }

    pub(super) fn existing(&self, tenant: &str, id: ObjectId) -> StoreResult<Action> {
        match self.action(tenant, id)? {
            Some(action) => Ok(Action::clone(&action)),
            None => Err(StoreError::not_found(format!("no action {id}"))),
        }
    }

    /// Hides or deletes an action with its items, in one batch.
    pub(super) fn remove_action(
        &self,
        tenant: &str,
        id: ObjectId,
        removal: Removal,
    ) -> StoreResult<Vec<FeedItem>> {
        let oid = id.bytes();
        let _lock = self.lock(&[action_lock(tenant, oid)]);
        let Some(action) = self.action(tenant, id)? else {
            return Err(Removal::not_found(id));
        };
        let mut batch = WriteBatch::default();
        let removed = self.remove_items(&mut batch, tenant, id)?;
        if !removal.deletes() {
            let mut action = Action::clone(&action);
            action.hidden = true;
            self.put_action(&mut batch, &action)?;
            self.commit(batch)?;
            self.settle(vec![action], &[]);
            return Ok(removed);
        }
        batch.delete_cf(self.cf(ACTIONS), action_key(tenant, oid));
        self.unindex_action(&mut batch, &action);
        // Comments go, then likes.
        self.drop_comments(&mut batch, tenant, oid)?;
        self.drop_discussion(&mut batch, tenant, oid)?;
        let hex = id.to_hex();
        let likers = relation_prefix(Direction::In, Relation::Likes)
            .str(tenant)
            .str(&hex)
            .into_vec();
        let mut users = Vec::new();
        self.scan_prefix(GRAPH, &likers, &likers, usize::MAX, |k, _| {
            users.push(Reader(&k[likers.len()..]).last()?.to_owned());
            Ok(())
        })?;
        for user in &users {
            delete_relation(&mut batch, self, Relation::Likes, tenant, (user, &hex));
        }
        self.commit(batch)?;
        self.settle(Vec::new(), &[id]);
        Ok(removed)
    }

    pub(super) fn set_action_scope(
        &self,
        tenant: &str,
        id: ObjectId,
        scope: Scope,
        readers: &[String],
        scope_groups: &[String],
    ) -> StoreResult<Action> {
        let job = FanOutJob::of(tenant, id)?;
        let _lock = self.lock(&[action_lock(tenant, id.bytes()), Inner::job_lock(&job)]);
        let mut action = self.existing(tenant, id)?;
        let mut batch = WriteBatch::default();
        self.unindex_outboxes_of(&mut batch, &action);
        action.scope = scope;
        action.readers = readers.to_vec();
        action.scope_groups = scope_groups.to_vec();
        action.fan_out = FanOut::pending();
        self.index_outboxes_of(&mut batch, &action);
        self.put_action(&mut batch, &action)?;
        // Fanned out again under the new scope: a fan-out under way starts
        // over (its worker finds its lease lost).
        self.requeue_in(&mut batch, &job)?;
        self.commit(batch)?;
        self.settle(vec![action.clone()], &[]);
        Ok(action)
    }

    pub(super) fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        let prefix = Key::new().str(tenant).str(ref_id).into_vec();
        let upper = match before {
            Some(id) => slice_key(tenant, ref_id, id.bytes()),
            None => keys::successor(&prefix).unwrap_or_default(),
        };
        let mut opts = rocksdb::ReadOptions::default();
        opts.set_iterate_lower_bound(prefix.clone());
        let mut it = self.db.raw_iterator_cf_opt(self.cf(REFS), opts);
        it.seek_for_prev(&upper);
        let mut out = Vec::new();
        while it.valid() && out.len() < limit {
            if let Some(k) = it.key() {
                if k != upper.as_slice() {
                    out.push(ObjectId::from_bytes(Reader(&k[prefix.len()..]).oid()?));
                }
            }
            it.prev();
        }
        it.status().map_err(super::db_err)?;
        Ok(out)
    }

    pub(super) fn rename_ref(
        &self,
        tenant: &str,
        ref_id: &str,
        name: &str,
        pairs: &[(String, String)],
    ) -> StoreResult<u64> {
        // Batches keep each lock and commit short: the fan-out worker and the
        // API get their turn between them.
        const BATCH: usize = 500;
        let prefix = Key::new().str(tenant).into_vec();
        let mut lower = prefix.clone();
        let mut changed = 0u64;
        loop {
            let mut ids = Vec::with_capacity(BATCH);
            self.scan_prefix(ACTIONS, &prefix, &lower, BATCH, |k, _| {
                ids.push(ObjectId::from_bytes(Reader(&k[prefix.len()..]).oid()?));
                Ok(())
            })?;
            let Some(last) = ids.last() else { break };
            lower = keys::after(&action_key(tenant, last.bytes()));
            let locks: Vec<Vec<u8>> = ids
                .iter()
                .map(|id| action_lock(tenant, id.bytes()))
                .collect();
            let _lock = self.lock(&locks);
            let mut batch = WriteBatch::default();
            let mut written = Vec::new();
            for &id in &ids {
                let Some(current) = self.action(tenant, id)? else {
                    continue;
                };
                let mut current = Action::clone(&current);
                let renamed = current.descriptor.rename(ref_id, name, pairs);
                if renamed > 0 {
                    self.put_action(&mut batch, &current)?;
                    written.push(current);
                    changed += renamed as u64;
                }
            }
            if !written.is_empty() {
                self.commit(batch)?;
                self.settle(written, &[]);
            }
            if ids.len() < BATCH {
                break;
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::Descriptor;
    use crate::model::Counts;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{FeedRange, Outbox};

    fn action(actor: &str, conducted: i64) -> Action {
        Action {
            id: ObjectId::new(),
            tenant: "acme".into(),
            actor_id: actor.into(),
            conducted,
            hidden: false,
            scope: Scope::Public,
            readers: vec![],
            scope_groups: vec![],
            ref_ids: vec![],
            tags: vec![],
            descriptor: Descriptor::new("StatusPost", serde_json::json!({ "text": "hi" })),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
            expires_at: None,
            to: Vec::new(),
            foreign: None,
        }
    }

    fn everything() -> FeedRange {
        FeedRange {
            older_than: None,
            newer_than: None,
            limit: 100,
            from_oldest: false,
        }
    }

    /// The ids in olga's outbox, newest first.
    fn olga(db: &Inner) -> Vec<ObjectId> {
        let read = [(Outbox::Actor("olga".into()), everything())];
        let mut found = db.outboxes("acme", &read).unwrap();
        found
            .remove(0)
            .into_iter()
            .map(|p| p.position.action_id)
            .collect()
    }

    /// A store written before outboxes existed has actions and no outbox
    /// entries (nor the marker): the first open writes them.
    #[test]
    fn actions_stored_before_outboxes_get_them_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let (older, newer) = (action("olga", 1_000), action("olga", 2_000));
        {
            let store = EmbeddedStore::open(dir.path()).unwrap();
            let db = &store.inner().unwrap();
            db.insert_action(&older).unwrap();
            db.insert_action(&newer).unwrap();
            // Back to how an earlier version left it.
            let mut batch = WriteBatch::default();
            for a in [&older, &newer] {
                let mut key = Vec::new();
                keys::outbox(&mut key, "acme", "olga", a.conducted, a.id.bytes());
                batch.delete_cf(db.cf(OUTBOX), key);
            }
            batch.delete_cf(db.cf(META), OUTBOX_MARKER);
            db.commit(batch).unwrap();
            assert!(olga(db).is_empty());
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        assert_eq!(olga(&store.inner().unwrap()), [newer.id, older.id]);
    }
}
