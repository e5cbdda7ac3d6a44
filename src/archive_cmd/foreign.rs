//! Foreign ids an import meets. An actor's foreign id names one action in
//! a tenant (`recordAction(foreignId)`), so an action of the archive whose
//! actor holds its foreign id under another action, in the store or
//! earlier in the archive, would be a second one: it is refused by line,
//! before anything is written, on every backend alike. The same action
//! again (its own id) is no clash: it replaces itself.
//!
//! The archive is judged as a whole: it may move a foreign id from an
//! action the store holds to another, whatever their order, since the
//! store's holder comes again without it. Such moving actions (a store's
//! holder that the archive gives another foreign id, or none) are kept
//! aside while the archive is checked, and written first ([`Moves`]), so
//! each batch after finds the id free.

use std::collections::{HashMap, HashSet};

use crate::model::{Action, ObjectId};
use crate::store::{Record, Store, StoreError, StoreResult};

/// An action of the archive that has a foreign id, by its line.
struct Met {
    line: u64,
    tenant: String,
    actor: String,
    foreign: String,
    id: ObjectId,
}

impl Met {
    fn of(line: u64, action: &Action) -> Option<Met> {
        let foreign = action.foreign.as_ref()?;
        Some(Met {
            line,
            tenant: action.tenant.clone(),
            actor: action.actor_id.clone(),
            foreign: foreign.id.clone(),
            id: action.id,
        })
    }

    /// The refusal of this action, whose foreign id `holder` holds.
    fn clash(&self, holder: ObjectId, held_where: &str) -> StoreError {
        StoreError::invalid(format!(
            "line {}: action {} of tenant {:?}: its actor {:?} recorded foreignId {:?} \
             as action {holder} {held_where} already, and an actor's foreignId names one \
             action: leave one of the two out (or give it another foreignId) and import again",
            self.line, self.id, self.tenant, self.actor, self.foreign
        ))
    }

    /// 16 bytes of a digest of `(tenant, actor, foreign id)`: what is kept of
    /// each action met, so an archive of many is checked in little memory.
    fn digest(&self) -> [u8; 16] {
        digest(&self.tenant, &self.actor, &self.foreign)
    }
}

/// The [`Met::digest`] of an actor's foreign id.
fn digest(tenant: &str, actor: &str, foreign: &str) -> [u8; 16] {
    let mut text = Vec::new();
    for part in [tenant, actor, foreign] {
        text.extend_from_slice(&(part.len() as u64).to_be_bytes());
        text.extend_from_slice(part.as_bytes());
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &text);
    let mut out = [0; 16];
    out.copy_from_slice(&digest.as_ref()[..16]);
    out
}

/// The foreign ids of an archive's actions, checked against each other as
/// they are met and against the store a batch at a time.
pub(super) struct ForeignIds {
    /// Each foreign id met so far: the action and line that had it.
    seen: HashMap<[u8; 16], (ObjectId, u64)>,
    /// Those not looked up in the store yet.
    pending: Vec<Met>,
    /// The actions not looked up in the store yet (whether they move a
    /// foreign id away), by line.
    actions: Vec<(u64, Action)>,
    /// Actions of the store holding a foreign id that their archive
    /// version does not: the ids they let go, and the archive's versions.
    released: HashSet<[u8; 16]>,
    moves: Moves,
    /// Actions whose foreign id the store holds under another: refused
    /// at the end unless the archive moves the id away from that one.
    clashes: Vec<(Met, ObjectId)>,
    batch: usize,
}

/// The actions of an archive that move a foreign id away from themselves
/// (their store version has one their archive version has not): written
/// before the rest of the archive, so the actions that take the ids find
/// them free; then skipped.
#[derive(Default)]
pub(super) struct Moves {
    /// Their records, with their lines (the last of each action's).
    pub(super) first: HashMap<ObjectId, (u64, Record)>,
}

impl Moves {
    /// Whether `record` was written first, and is skipped.
    pub(super) fn written_first(&self, record: &Record) -> bool {
        matches!(record, Record::Action { action } if self.first.contains_key(&action.id))
    }

    /// Whether the record on `line` is one written first.
    pub(super) fn written_from(&self, line: u64) -> bool {
        self.first.values().any(|(at, _)| *at == line)
    }
}

impl ForeignIds {
    pub(super) fn new(batch: usize) -> Self {
        Self {
            seen: HashMap::new(),
            pending: Vec::new(),
            actions: Vec::new(),
            released: HashSet::new(),
            moves: Moves::default(),
            clashes: Vec::new(),
            batch: batch.max(1),
        }
    }

    /// Meets the action on `line`: refused if an earlier one of the
    /// archive has its foreign id; looked up in the store with its batch.
    pub(super) async fn meet(
        &mut self,
        store: &dyn Store,
        line: u64,
        action: &Action,
    ) -> StoreResult<()> {
        self.actions.push((line, action.clone()));
        if let Some(met) = Met::of(line, action) {
            match self.seen.insert(met.digest(), (met.id, line)) {
                Some((earlier, at)) if earlier != met.id => {
                    return Err(met.clash(earlier, &format!("on line {at} of the archive")));
                }
                _ => {}
            }
            self.pending.push(met);
        }
        if self.actions.len() >= self.batch {
            self.flush(store).await?;
        }
        Ok(())
    }

    /// Looks up what is pending in the store.
    async fn flush(&mut self, store: &dyn Store) -> StoreResult<()> {
        let pending = std::mem::take(&mut self.pending);
        self.clashes.extend(clashes(store, pending).await?);
        let actions = std::mem::take(&mut self.actions);
        // An action given again after it was found moving: the last of its
        // lines is the one written, as a batch would.
        for (line, action) in &actions {
            if let Some(first) = self.moves.first.get_mut(&action.id) {
                *first = (
                    *line,
                    Record::Action {
                        action: action.clone(),
                    },
                );
            }
        }
        let mut tenants: Vec<&str> = actions.iter().map(|(_, a)| a.tenant.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        for tenant in tenants {
            let of_tenant: HashMap<ObjectId, &(u64, Action)> = actions
                .iter()
                .filter(|(_, a)| a.tenant == tenant)
                .map(|la| (la.1.id, la))
                .collect();
            let ids: Vec<ObjectId> = of_tenant.keys().copied().collect();
            for held in store.get_actions(tenant, &ids).await? {
                let (Some(foreign), Some((line, archived))) =
                    (&held.foreign, of_tenant.get(&held.id))
                else {
                    continue;
                };
                let kept = archived.actor_id == held.actor_id
                    && archived
                        .foreign
                        .as_ref()
                        .is_some_and(|f| f.id == foreign.id);
                if !kept {
                    self.released
                        .insert(digest(tenant, &held.actor_id, &foreign.id));
                    let record = Record::Action {
                        action: archived.clone(),
                    };
                    self.moves.first.insert(held.id, (*line, record));
                }
            }
        }
        Ok(())
    }

    /// Ends the check: refuses the first action (by line) whose foreign id
    /// the store holds under another action the archive does not move it
    /// away from. Answers the actions to write first.
    pub(super) async fn finish(mut self, store: &dyn Store) -> StoreResult<Moves> {
        self.flush(store).await?;
        let released = &self.released;
        let first = self
            .clashes
            .iter()
            .filter(|(m, _)| !released.contains(&m.digest()))
            .min_by_key(|(m, _)| m.line);
        match first {
            Some((m, holder)) => Err(m.clash(*holder, "in this store")),
            None => Ok(self.moves),
        }
    }
}

/// Refuses the first of `actions` (with their lines) whose actor holds its
/// foreign id in the store under another action: what a batch is checked
/// against again just before it is written.
pub(super) async fn check_batch<'a>(
    store: &dyn Store,
    actions: impl Iterator<Item = (u64, &'a Action)>,
) -> StoreResult<()> {
    let met: Vec<Met> = actions.filter_map(|(line, a)| Met::of(line, a)).collect();
    let first = clashes(store, met)
        .await?
        .into_iter()
        .min_by_key(|(m, _)| m.line);
    match first {
        Some((m, holder)) => Err(m.clash(holder, "in this store")),
        None => Ok(()),
    }
}

/// Those of `met` whose actor holds their foreign id in the store under
/// another action, with that action.
async fn clashes(store: &dyn Store, met: Vec<Met>) -> StoreResult<Vec<(Met, ObjectId)>> {
    let mut tenants: Vec<&str> = met.iter().map(|m| m.tenant.as_str()).collect();
    tenants.sort_unstable();
    tenants.dedup();
    let mut found = Vec::new();
    for tenant in tenants {
        let of_tenant: Vec<&Met> = met.iter().filter(|m| m.tenant == tenant).collect();
        let under: Vec<(String, String)> = of_tenant
            .iter()
            .map(|m| (m.actor.clone(), m.foreign.clone()))
            .collect();
        let held = store.foreign_actions(tenant, &under).await?;
        for m in of_tenant {
            let holder = held.iter().find(|a| {
                a.actor_id == m.actor && a.foreign.as_ref().is_some_and(|f| f.id == m.foreign)
            });
            if let Some(holder) = holder.filter(|h| h.id != m.id) {
                found.push((m.line, holder.id));
            }
        }
    }
    let mut met: HashMap<u64, Met> = met.into_iter().map(|m| (m.line, m)).collect();
    Ok(found
        .into_iter()
        .filter_map(|(line, holder)| met.remove(&line).map(|m| (m, holder)))
        .collect())
}
