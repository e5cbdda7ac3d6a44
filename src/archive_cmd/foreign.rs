//! Foreign ids an import meets. An actor's foreign id names one action in
//! a tenant (`recordAction(foreignId)`), so an action of the archive whose
//! actor holds its foreign id under another action, in the store or
//! earlier in the archive, would be a second one: it is refused by line,
//! before anything is written, on every backend alike. The same action
//! again (its own id) is no clash: it replaces itself.

use std::collections::HashMap;

use crate::model::{Action, ObjectId};
use crate::store::{Store, StoreError, StoreResult};

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
        let mut text = Vec::new();
        for part in [&self.tenant, &self.actor, &self.foreign] {
            text.extend_from_slice(&(part.len() as u64).to_be_bytes());
            text.extend_from_slice(part.as_bytes());
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, &text);
        let mut out = [0; 16];
        out.copy_from_slice(&digest.as_ref()[..16]);
        out
    }
}

/// The foreign ids of an archive's actions, checked against each other as
/// they are met and against the store a batch at a time.
pub(super) struct ForeignIds {
    /// Each foreign id met so far: the action and line that had it.
    seen: HashMap<[u8; 16], (ObjectId, u64)>,
    /// Those not looked up in the store yet.
    pending: Vec<Met>,
    batch: usize,
}

impl ForeignIds {
    pub(super) fn new(batch: usize) -> Self {
        Self {
            seen: HashMap::new(),
            pending: Vec::new(),
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
        let Some(met) = Met::of(line, action) else {
            return Ok(());
        };
        match self.seen.insert(met.digest(), (met.id, line)) {
            Some((earlier, at)) if earlier != met.id => {
                return Err(met.clash(earlier, &format!("on line {at} of the archive")));
            }
            _ => {}
        }
        self.pending.push(met);
        if self.pending.len() >= self.batch {
            self.flush(store).await?;
        }
        Ok(())
    }

    /// Looks up what is pending in the store.
    pub(super) async fn flush(&mut self, store: &dyn Store) -> StoreResult<()> {
        let pending = std::mem::take(&mut self.pending);
        check_against(store, &pending).await
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
    check_against(store, &met).await
}

async fn check_against(store: &dyn Store, met: &[Met]) -> StoreResult<()> {
    let mut tenants: Vec<&str> = met.iter().map(|m| m.tenant.as_str()).collect();
    tenants.sort_unstable();
    tenants.dedup();
    let mut first: Option<(&Met, ObjectId)> = None;
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
                if first.is_none_or(|(f, _)| m.line < f.line) {
                    first = Some((m, holder.id));
                }
            }
        }
    }
    match first {
        Some((m, holder)) => Err(m.clash(holder, "in this store")),
        None => Ok(()),
    }
}
