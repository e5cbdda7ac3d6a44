//! Notifications in storage: one record per notice group (its members
//! inside), one inbox per user (a [record](super::records)), and notice jobs (on the job queue,
//! [`super::jobs`]) for what has no job of its own (a like, an assignment;
//! actions and comments are noticed within their fan-out and bump jobs).
//!
//! Groups and inboxes are written whole under their version (compare and
//! set): a writer reads one, changes it ([`NoticeGroup::add`],
//! [`NoticeGroup::mark_read`], …) and puts it back with the version one
//! higher; a writer that lost a race reads again. So a backend stores
//! groups and keeps their indexes ([`NoticeStore`]: one read by a
//! [selector](NoticeSelect), one write, the counts); what a change means,
//! and which groups a trim removes, is decided in one place for every
//! backend ([`Notices`]).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::jobs::{Job, JobKind};
use super::metered::port;
use super::StoreResult;
use crate::model::{Millis, NoticeCounts, NoticeGroup, NoticeRange, ObjectId};

/// Groups a user keeps by default (`--notification-groups`): beyond them
/// the oldest go.
pub const DEFAULT_GROUPS_KEPT: usize = 1_000;

/// Which of an owner's groups a read answers.
#[derive(Clone, Copy, Debug)]
pub enum NoticeSelect<'a> {
    /// The group of this key, if stored.
    Key(&'a str),
    /// The groups among these ids, in no particular order.
    Ids(&'a [ObjectId]),
    /// A range of the visible groups (`visible > 0`), newest first by
    /// (`last`, id).
    Page(NoticeRange),
    /// Every group beyond the newest `n` (archived ones included), newest
    /// first.
    Beyond(usize),
}

/// A write of one group, decided by the version stored.
#[derive(Clone, Copy, Debug)]
pub enum NoticeWrite<'a> {
    /// Stores the group if what is stored is the version before its own
    /// (nothing, for version 1; a new group must also be the only one of
    /// its owner and key).
    Put(&'a NoticeGroup),
    /// Removes the group if what is stored is this very version of it.
    Remove(&'a NoticeGroup),
}

port! {
pub trait NoticeStore: Send + Sync {
    /// The groups of `owner` that `select` names. One round trip.
    async fn notice_groups(
        &self,
        tenant: &str,
        owner: &str,
        select: NoticeSelect<'_>,
    ) -> StoreResult<Vec<NoticeGroup>>;
    /// Writes one group under its version. Returns false, writing nothing,
    /// if another write came first: the caller reads again.
    async fn write_notice_group(&self, write: NoticeWrite<'_>) -> StoreResult<bool>;
    /// How many of `owner`'s visible groups are newer than `seen_until`,
    /// and how many have an unread member.
    async fn notice_counts(
        &self,
        tenant: &str,
        owner: &str,
        seen_until: Millis,
    ) -> StoreResult<NoticeCounts>;
}
}

/// Reads of the groups that lost a race a trim makes before it leaves the
/// rest to the next one.
const TRIM_ATTEMPTS: usize = 8;

/// Groups read and written by the same rules on every backend. Every
/// [`NoticeStore`] has them.
#[async_trait]
pub trait Notices: NoticeStore {
    /// The group of `owner` with key `key`, if stored.
    async fn notice_group(
        &self,
        tenant: &str,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<NoticeGroup>> {
        let select = NoticeSelect::Key(key);
        Ok(self.notice_groups(tenant, owner, select).await?.pop())
    }

    /// Stores `group` over the version before its own: see
    /// [`NoticeWrite::Put`].
    async fn put_notice_group(&self, group: &NoticeGroup) -> StoreResult<bool> {
        self.write_notice_group(NoticeWrite::Put(group)).await
    }

    /// Deletes `owner`'s groups beyond the newest `keep` (archived ones
    /// included). Returns the ids deleted. A group written meanwhile is
    /// read again, and deleted if it is still beyond.
    async fn trim_notices(
        &self,
        tenant: &str,
        owner: &str,
        keep: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        let mut gone = Vec::new();
        for _ in 0..TRIM_ATTEMPTS {
            let beyond = self
                .notice_groups(tenant, owner, NoticeSelect::Beyond(keep))
                .await?;
            let mut lost = false;
            for group in &beyond {
                if self.write_notice_group(NoticeWrite::Remove(group)).await? {
                    gone.push(group.id);
                } else {
                    lost = true;
                }
            }
            if !lost {
                break;
            }
        }
        Ok(gone)
    }
}

impl<T: NoticeStore + ?Sized> Notices for T {}

/// Something that may notify someone, with no job of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum NoticeSource {
    /// `user` liked the action.
    #[serde(rename_all = "camelCase")]
    Like { action_id: ObjectId, user: String },
    /// `user` was assigned to `ref_id` by `by`.
    #[serde(rename_all = "camelCase")]
    Assigned {
        ref_id: String,
        user: String,
        by: String,
    },
}

impl NoticeSource {
    /// Its key: a job waits once per key, and its notice is written once.
    pub fn key(&self) -> String {
        match self {
            NoticeSource::Like { action_id, user } => format!("l:{action_id}:{user}"),
            NoticeSource::Assigned { ref_id, user, .. } => format!("a:{ref_id}:{user}"),
        }
    }
}

/// A notice job, as its [`Job`]'s payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoticeJob {
    pub tenant: String,
    pub source: NoticeSource,
    /// When it happened.
    pub at: Millis,
}

impl NoticeJob {
    /// As a job of the queue: keyed by its source, queued when it happened.
    pub fn to_job(&self) -> StoreResult<Job> {
        Job::new(
            JobKind::Notice,
            &self.tenant,
            &self.source.key(),
            self,
            self.at,
        )
    }

    /// The notice job a queued job carries.
    pub fn of_job(job: &Job) -> StoreResult<NoticeJob> {
        job.payload()
    }
}
