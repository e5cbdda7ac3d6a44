//! Reactions: comments and likes, counted on their action.

use rocksdb::WriteBatch;

use super::actions::{action_lock, comment_key};
use super::families::{DISCUSSIONS, GRAPH, REACTIONS};
use super::keys::{self, reaction, Key, Oid, Reader};
use super::relations::{delete_relation, put_relation, relation_key};
use super::Inner;
use crate::model::{Comment, Counts, Millis, ObjectId, Position};
use crate::store::{BumpJob, Direction, FeedRange, NoticeJob, NoticeSource, Relation, StoreResult};

impl Inner {
    pub(super) fn add_comment(&self, tenant: &str, comment: &Comment) -> StoreResult<Counts> {
        let a = comment.action_id.bytes();
        let _lock = self.lock(&[action_lock(tenant, a)]);
        let mut action = self.existing(tenant, comment.action_id)?;
        let key = comment_key(tenant, a, comment.id.bytes());
        // Stored under its id already (by a retry's first attempt): counted
        // and bumped then, nothing to write now.
        if self.get(REACTIONS, &key)?.is_some() {
            return Ok(action.counts);
        }
        action.counts.comments += 1;
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(REACTIONS), key, keys::encode_record(comment)?);
        let bump = BumpJob {
            tenant: tenant.to_owned(),
            comment: comment.clone(),
        };
        self.queue_in(&mut batch, &bump.to_job()?)?;
        self.put_action(&mut batch, &action)?;
        self.note_discussion(&mut batch, tenant, comment)?;
        self.commit(batch)?;
        let counts = action.counts;
        self.settle(vec![action], &[]);
        Ok(counts)
    }

    pub(super) fn comments(
        &self,
        tenant: &str,
        action_id: ObjectId,
        after: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<Comment>> {
        let prefix = Key::tag(reaction::COMMENT)
            .str(tenant)
            .oid(action_id.bytes())
            .into_vec();
        let lower = match after {
            Some(id) => keys::after(&comment_key(tenant, action_id.bytes(), id.bytes())),
            None => prefix.clone(),
        };
        let mut out = Vec::new();
        self.scan_prefix(REACTIONS, &prefix, &lower, limit, |_, v| {
            out.push(keys::decode_record(v)?);
            Ok(())
        })?;
        Ok(out)
    }

    pub(super) fn set_like(
        &self,
        tenant: &str,
        action_id: ObjectId,
        user: &str,
        on: bool,
        at: Millis,
    ) -> StoreResult<(bool, Counts)> {
        let a = action_id.bytes();
        let notice = NoticeJob {
            tenant: tenant.to_owned(),
            source: NoticeSource::Like {
                action_id,
                user: user.to_owned(),
            },
            at,
        }
        .to_job()?;
        let _lock = self.lock(&[action_lock(tenant, a), Inner::job_lock(&notice)]);
        let mut action = self.existing(tenant, action_id)?;
        let hex = action_id.to_hex();
        let key = relation_key(Direction::Out, Relation::Likes, tenant, user, &hex);
        if self.exists(GRAPH, &key)? == on {
            return Ok((false, action.counts));
        }
        let mut batch = WriteBatch::default();
        if on {
            put_relation(&mut batch, self, Relation::Likes, tenant, (user, &hex), &[]);
            action.counts.likes += 1;
            self.requeue_in(&mut batch, &notice)?;
        } else {
            delete_relation(&mut batch, self, Relation::Likes, tenant, (user, &hex));
            action.counts.likes = action.counts.likes.saturating_sub(1);
        }
        self.put_action(&mut batch, &action)?;
        self.commit(batch)?;
        let counts = action.counts;
        self.settle(vec![action], &[]);
        Ok((true, counts))
    }

    /// Brings `comment`'s action up to the comment's time in the discussions
    /// of everyone who commented on it, its author included (added if new),
    /// in `batch`. The caller holds the action's lock.
    pub(super) fn note_discussion(
        &self,
        batch: &mut WriteBatch,
        tenant: &str,
        comment: &Comment,
    ) -> StoreResult<()> {
        let a = comment.action_id.bytes();
        let prefix = participants_prefix(tenant, a);
        let mut latest = comment.created;
        let mut participants: Vec<(String, i64)> = Vec::new();
        self.scan_prefix(REACTIONS, &prefix, &prefix, usize::MAX, |k, v| {
            let user = Reader(&k[prefix.len()..]).last()?.to_owned();
            let at = decode_time(v)?;
            latest = latest.max(at);
            participants.push((user, at));
            Ok(())
        })?;
        if !participants.iter().any(|(u, _)| *u == comment.author_id) {
            participants.push((comment.author_id.clone(), i64::MIN));
        }
        let mut key = Vec::with_capacity(64);
        for (user, at) in participants {
            if at == latest {
                continue;
            }
            if at != i64::MIN {
                keys::timeline(&mut key, tenant, &user, at, a);
                batch.delete_cf(self.cf(DISCUSSIONS), &key);
            }
            keys::timeline(&mut key, tenant, &user, latest, a);
            batch.put_cf(self.cf(DISCUSSIONS), &key, []);
            let mut participant = prefix.clone();
            participant.extend_from_slice(user.as_bytes());
            batch.put_cf(self.cf(REACTIONS), participant, latest.to_be_bytes());
        }
        Ok(())
    }

    /// Takes an action out of everyone's discussions, in `batch`.
    pub(super) fn drop_discussion(
        &self,
        batch: &mut WriteBatch,
        tenant: &str,
        action: Oid,
    ) -> StoreResult<()> {
        let prefix = participants_prefix(tenant, action);
        let mut key = Vec::with_capacity(64);
        self.scan_prefix(REACTIONS, &prefix, &prefix, usize::MAX, |k, v| {
            let user = Reader(&k[prefix.len()..]).last()?;
            keys::timeline(&mut key, tenant, user, decode_time(v)?, action);
            batch.delete_cf(self.cf(DISCUSSIONS), &key);
            batch.delete_cf(self.cf(REACTIONS), k);
            Ok(())
        })
    }

    pub(super) fn discussions(
        &self,
        tenant: &str,
        user: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        self.ranked_range(DISCUSSIONS, tenant, user, range, |position, _| Ok(position))
    }
}

fn participants_prefix(tenant: &str, action: Oid) -> Vec<u8> {
    Key::tag(reaction::PARTICIPANT)
        .str(tenant)
        .oid(action)
        .into_vec()
}

fn decode_time(v: &[u8]) -> StoreResult<i64> {
    v.try_into()
        .map(i64::from_be_bytes)
        .map_err(|_| keys::corrupt("discussion time"))
}
