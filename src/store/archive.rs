//! Every record a store holds, in a form that does not depend on the backend:
//! what `riverfeed export` writes as JSON Lines and `riverfeed import` reads
//! back, into the same backend or another one. A deployment moves from the
//! embedded store to MongoDB this way, backups are made this way, and a data
//! directory of an earlier embedded format is converted this way.
//!
//! Records are restored as they were: ids, relevancies, change stamps, counts,
//! hidden-item tombstones, and queued fan-outs and bumps (a fan-out that was
//! in progress is queued again, as after a crash). Importing the same records
//! twice leaves one copy of each.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};

use super::StoreResult;
use crate::model::limits::{check_id, InputError};
use crate::model::{
    Action, Comment, FeedItem, GroupKind, MembershipRole, Millis, ObjectId, Reason,
};

/// Which kind of edge a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EdgeRecordKind {
    /// `from` follows `to`.
    Follows,
    /// `from` and `to` are friends (one record per pair, `from < to`).
    Friend,
    /// `from` follows the group `to`.
    Group,
}

/// One feed item as stored, with its tombstone flag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemRecord {
    pub owner: String,
    pub action_id: ObjectId,
    pub relevancy: Millis,
    pub reason: Reason,
    pub changed: Millis,
    /// The reader hid the item: it stays out of the feed, and a re-run of the
    /// fan-out does not bring it back.
    #[serde(default)]
    pub hidden: bool,
}

impl ItemRecord {
    /// The record of a visible item.
    pub fn visible(item: FeedItem) -> Self {
        Self {
            owner: item.owner,
            action_id: item.action_id,
            relevancy: item.relevancy,
            reason: item.reason,
            changed: item.changed,
            hidden: false,
        }
    }
}

/// One record of one tenant. The JSON form is an object with a `record` field
/// naming the variant.
// Unboxed on purpose: records live one at a time in a stream, or a batch (a
// thousand) at a time in a Vec, where a few hundred bytes each is nothing and
// a box per action would be an allocation per action.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "record",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Record {
    /// A user, with a display name if one was set.
    User {
        tenant: String,
        id: String,
        name: Option<String>,
    },
    Edge {
        tenant: String,
        kind: EdgeRecordKind,
        from: String,
        to: String,
    },
    Membership {
        tenant: String,
        group: String,
        group_kind: GroupKind,
        user: String,
        role: MembershipRole,
        /// When the membership began (0 in archives written before
        /// memberships had a start).
        #[serde(default)]
        since: Millis,
    },
    Assignment {
        tenant: String,
        user: String,
        ref_id: String,
    },
    Supervisor {
        tenant: String,
        user: String,
        supervisor: String,
    },
    /// An action, with its counts and fan-out state (tenant inside).
    Action {
        action: Action,
    },
    /// A comment; `bumpQueued` when the bump it causes is still to do.
    Comment {
        tenant: String,
        comment: Comment,
        bump_queued: bool,
    },
    Like {
        tenant: String,
        action_id: ObjectId,
        user: String,
    },
    FeedItem {
        tenant: String,
        item: ItemRecord,
    },
}

impl Record {
    /// The tenant the record belongs to.
    pub fn tenant(&self) -> &str {
        match self {
            Record::User { tenant, .. }
            | Record::Edge { tenant, .. }
            | Record::Membership { tenant, .. }
            | Record::Assignment { tenant, .. }
            | Record::Supervisor { tenant, .. }
            | Record::Comment { tenant, .. }
            | Record::Like { tenant, .. }
            | Record::FeedItem { tenant, .. } => tenant,
            Record::Action { action } => &action.tenant,
        }
    }

    /// Checks the ids a record holds the way the API checks them, so that an
    /// import never writes what the API would have refused.
    pub fn check(&self) -> Result<(), InputError> {
        check_id("tenant", self.tenant())?;
        match self {
            Record::User { id, .. } => check_id("id", id),
            Record::Edge { from, to, .. } => {
                check_id("from", from)?;
                check_id("to", to)?;
                if from == to {
                    return Err(InputError::new(format!("an edge from {from:?} to itself")));
                }
                Ok(())
            }
            Record::Membership { group, user, .. } => {
                check_id("group", group)?;
                check_id("user", user)
            }
            Record::Assignment { user, ref_id, .. } => {
                check_id("user", user)?;
                check_id("refId", ref_id)
            }
            Record::Supervisor {
                user, supervisor, ..
            } => {
                check_id("user", user)?;
                check_id("supervisor", supervisor)
            }
            Record::Action { action } => check_id("actorId", &action.actor_id),
            Record::Comment { comment, .. } => check_id("authorId", &comment.author_id),
            Record::Like { user, .. } => check_id("user", user),
            Record::FeedItem { item, .. } => check_id("owner", &item.owner),
        }
    }

    /// A short name of the variant, for counts and messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::User { .. } => "user",
            Record::Edge { .. } => "edge",
            Record::Membership { .. } => "membership",
            Record::Assignment { .. } => "assignment",
            Record::Supervisor { .. } => "supervisor",
            Record::Action { .. } => "action",
            Record::Comment { .. } => "comment",
            Record::Like { .. } => "like",
            Record::FeedItem { .. } => "feedItem",
        }
    }
}

/// Export and import of whole stores. Part of every [`super::Store`].
#[async_trait]
pub trait Archive: Send + Sync {
    /// Every record of `tenant`, or of all tenants, streamed. Users and the
    /// graph come first, then actions, then what refers to actions (comments,
    /// likes, feed items), so that an import in stream order never meets a
    /// reference to something it has not written yet.
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>>;

    /// Writes records as they are. A record that is already there is
    /// replaced, so importing twice leaves one copy.
    async fn import(&self, records: &[Record]) -> StoreResult<()>;
}
