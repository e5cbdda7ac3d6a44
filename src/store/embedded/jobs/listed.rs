//! Reading the queue by key: the jobs of a kind and tenant under a prefix,
//! a page at a time (from the jobs themselves, or from the state index
//! when only those that failed, or those that never did, are asked for),
//! and bringing forward those that wait under one.

use rocksdb::WriteBatch;

use super::super::keys::{self, Key};
use super::super::Inner;
use super::{job_key, tag, Stored, JOBS};
use crate::model::Millis;
use crate::store::jobs::{JobKind, Queued, QueuedRead};
use crate::store::StoreResult;

impl Inner {
    /// The jobs `read` asks for, in key order: at most `read.limit` keys
    /// are read, of the jobs or of the state index.
    pub(super) fn queued(
        &self,
        kind: JobKind,
        tenant: &str,
        read: &QueuedRead<'_>,
    ) -> StoreResult<Vec<Queued>> {
        let mut jobs = Vec::new();
        let of_tenant = Key::tag(tag::JOB)
            .byte(super::kind_byte(kind))
            .str(tenant)
            .into_vec();
        // The jobs in key order, or the state's entries (whose key ends
        // with the job's, as a job's does).
        let at = match read.failed {
            None => of_tenant.clone(),
            Some(failed) => Key::tag(tag::STATE)
                .byte(super::kind_byte(kind))
                .str(tenant)
                .byte(u8::from(failed))
                .into_vec(),
        };
        let under = [at.as_slice(), read.under.as_bytes()].concat();
        let from = match read.after {
            Some(after) => {
                keys::after(&[at.as_slice(), after.as_bytes()].concat()).max(under.clone())
            }
            None => under.clone(),
        };
        self.scan_prefix(JOBS, &under, &from, read.limit, |k, v| {
            let key = std::str::from_utf8(&k[at.len()..]).map_err(|_| keys::corrupt("job key"))?;
            let stored: Stored = match read.failed {
                None => keys::decode_record(v)?,
                // Written in one batch with its job; one finished since the
                // entry was read is passed over.
                Some(_) => match self.stored_job(&job_key(kind, tenant, key))? {
                    Some(stored) => stored,
                    None => return Ok(()),
                },
            };
            if read.wants(key, stored.failures) {
                let job = stored.job(kind, tenant, key);
                jobs.push(Queued::of(job, stored.worker.as_deref(), stored.until));
            }
            Ok(())
        })?;
        Ok(jobs)
    }

    pub(super) fn hasten(
        &self,
        kind: JobKind,
        tenant: &str,
        prefix: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        let later: Vec<(String, Vec<u8>)> = self
            .queued(kind, tenant, &QueuedRead::under(prefix))?
            .into_iter()
            .filter(|q| q.waits_until.is_some_and(|until| until > now))
            .map(|q| {
                let at = job_key(kind, tenant, &q.job.key);
                (q.job.key, at)
            })
            .collect();
        if later.is_empty() {
            return Ok(0);
        }
        // Looked at again under their locks: a sender may have claimed
        // one since, or finished it.
        let locks: Vec<&Vec<u8>> = later.iter().map(|(_, at)| at).collect();
        let _lock = self.lock(&locks);
        let mut batch = WriteBatch::default();
        let mut hastened = 0;
        for (key, at) in &later {
            let Some(old) = self.stored_job(at)? else {
                continue;
            };
            if old.worker.is_some() || old.until == Millis::MIN || old.until <= now {
                continue;
            }
            let stored = Stored {
                payload: old.payload.clone(),
                queued: old.queued,
                until: now.max(Millis::MIN + 1),
                worker: None,
                failures: old.failures,
            };
            let job = old.job(kind, tenant, key);
            self.put_job(&mut batch, &job, Some(&old), &stored)?;
            hastened += 1;
        }
        // One batch: each job moves from its time to now in one write.
        // Unsynced, as a deferral: lost with the machine, it waits its time.
        self.commit_unsynced(batch)?;
        Ok(hastened)
    }
}
