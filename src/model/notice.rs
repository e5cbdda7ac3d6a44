//! Notifications: what happened *to* a user, grouped, with seen and read
//! state, and the per-user inbox state beside them (what was seen, the
//! preferences, the markers).
//!
//! A notification ([`Notice`]) is one thing that happened to its owner (a
//! comment on their action, a like, …). Notices with the same group key
//! (by default reason + object + day) form one [`NoticeGroup`]: "Rita and 3
//! others liked your rating of Mary Fanning". The group is the unit that is
//! stored, listed and counted; its members are kept inside it, so adding a
//! member, marking one read or archiving the group is a change to one
//! record, written whole under its version (compare and set).
//!
//! *Seen* is a watermark per user (everything up to a time was seen: the
//! bell was opened); *read* is per member (this one was opened).

use async_graphql::Enum;
use serde::{Deserialize, Serialize};

use super::{Millis, ObjectId};

/// Why a user was notified.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Enum,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NoticeReason {
    /// Someone commented on the user's action.
    Comment,
    /// Someone liked the user's action.
    Like,
    /// A new comment in a discussion the user took part in (commented on).
    Reply,
    /// The user was assigned to a ref (an applicant, a position).
    Assigned,
    /// The user was asked to rate an applicant.
    RatingRequested,
    /// An applicant the user is assigned to was hired.
    Hired,
}

impl NoticeReason {
    pub const ALL: [NoticeReason; 6] = [
        NoticeReason::Comment,
        NoticeReason::Like,
        NoticeReason::Reply,
        NoticeReason::Assigned,
        NoticeReason::RatingRequested,
        NoticeReason::Hired,
    ];

    /// Its name in rules files, flags and group keys.
    pub fn key(self) -> &'static str {
        match self {
            NoticeReason::Comment => "comment",
            NoticeReason::Like => "like",
            NoticeReason::Reply => "reply",
            NoticeReason::Assigned => "assigned",
            NoticeReason::RatingRequested => "rating_requested",
            NoticeReason::Hired => "hired",
        }
    }

    pub fn from_key(key: &str) -> Option<NoticeReason> {
        Self::ALL.into_iter().find(|r| r.key() == key)
    }
}

/// One notification: a member of its group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    pub id: ObjectId,
    /// What caused it, unique within its owner's notifications (`c:<comment
    /// id>`, `l:<action id>:<user>`…): writing it again adds nothing.
    pub source: String,
    pub reason: NoticeReason,
    /// Who did it.
    pub actor: String,
    /// The action it is about, if any (the one commented on, liked, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<ObjectId>,
    /// The comment that caused it, for `COMMENT` and `REPLY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment_id: Option<ObjectId>,
    /// The ref it is about (the applicant assigned, hired, to rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_id: Option<String>,
    /// When it happened.
    pub at: Millis,
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub archived: bool,
}

/// Members a group keeps; beyond them the oldest are dropped and counted.
pub const MEMBERS_KEPT: usize = 200;

/// Notices grouped by key, for one owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoticeGroup {
    pub id: ObjectId,
    pub tenant: String,
    pub owner: String,
    /// The group key (`like:<action id>:2026-11-25`…), unique per owner.
    pub key: String,
    /// The first member's reason.
    pub reason: NoticeReason,
    /// Its members, oldest first; at most [`MEMBERS_KEPT`].
    pub members: Vec<Notice>,
    /// Members dropped to keep the group within [`MEMBERS_KEPT`] (and not
    /// archived), and how many of them were unread.
    #[serde(default)]
    pub dropped: u32,
    #[serde(default)]
    pub dropped_unread: u32,
    /// When its latest visible member happened: where it stands in the list.
    pub last: Millis,
    /// Visible members (kept or dropped): 0 once all were archived, and the
    /// group is no longer listed or counted.
    pub visible: u32,
    /// Unread visible members.
    pub unread: u32,
    /// Bumped by every write; a write must find the version it read.
    pub version: u64,
}

impl NoticeGroup {
    /// A new, empty group (version 0: not stored yet).
    pub fn new(tenant: &str, owner: &str, key: &str, reason: NoticeReason) -> NoticeGroup {
        NoticeGroup {
            id: ObjectId::new(),
            tenant: tenant.to_owned(),
            owner: owner.to_owned(),
            key: key.to_owned(),
            reason,
            members: Vec::new(),
            dropped: 0,
            dropped_unread: 0,
            last: 0,
            visible: 0,
            unread: 0,
            version: 0,
        }
    }

    /// Adds `notice` unless a member of the same source is there (or was
    /// dropped: a source is never added twice while the group keeps it).
    /// Returns whether it was added.
    pub fn add(&mut self, notice: Notice) -> bool {
        if self.members.iter().any(|m| m.source == notice.source) {
            return false;
        }
        let at = self
            .members
            .partition_point(|m| (m.at, m.id) <= (notice.at, notice.id));
        self.members.insert(at, notice);
        while self.members.len() > MEMBERS_KEPT {
            let gone = self.members.remove(0);
            if !gone.archived {
                self.dropped += 1;
                if !gone.read {
                    self.dropped_unread += 1;
                }
            }
        }
        self.refresh();
        true
    }

    /// Marks members read: those named (all, if `None`). Returns whether
    /// anything changed.
    pub fn mark_read(&mut self, members: Option<&[ObjectId]>) -> bool {
        let mut changed = false;
        for m in &mut self.members {
            if !m.read && members.is_none_or(|ids| ids.contains(&m.id)) {
                m.read = true;
                changed = true;
            }
        }
        if members.is_none() && self.dropped_unread > 0 {
            self.dropped_unread = 0;
            changed = true;
        }
        self.refresh();
        changed
    }

    /// Archives members: those named (all, if `None`). Archived members are
    /// no longer shown or counted. Returns whether anything changed.
    pub fn archive(&mut self, members: Option<&[ObjectId]>) -> bool {
        let mut changed = false;
        for m in &mut self.members {
            if !m.archived && members.is_none_or(|ids| ids.contains(&m.id)) {
                m.archived = true;
                changed = true;
            }
        }
        if members.is_none() && self.dropped > 0 {
            self.dropped = 0;
            self.dropped_unread = 0;
            changed = true;
        }
        self.refresh();
        changed
    }

    /// Recomputes `last`, `visible` and `unread` from the members.
    fn refresh(&mut self) {
        let shown = self.members.iter().filter(|m| !m.archived);
        let mut visible = self.dropped;
        let mut unread = self.dropped_unread;
        let mut last = None;
        for m in shown {
            visible += 1;
            unread += u32::from(!m.read);
            last = Some(m.at);
        }
        self.visible = visible;
        self.unread = unread;
        // An archived group keeps its place (it is not listed anyway).
        if let Some(last) = last {
            self.last = last;
        }
    }

    /// Its visible members, newest first.
    pub fn shown(&self) -> impl Iterator<Item = &Notice> {
        self.members.iter().rev().filter(|m| !m.archived)
    }

    /// Distinct actors of its visible members, the most recent first.
    pub fn actors(&self) -> Vec<&str> {
        let mut actors: Vec<&str> = Vec::new();
        for m in self.shown() {
            if !actors.contains(&m.actor.as_str()) {
                actors.push(&m.actor);
            }
        }
        actors
    }

    /// When its earliest visible member happened.
    pub fn first(&self) -> Option<Millis> {
        self.shown().last().map(|m| m.at)
    }

    /// Where it stands in its owner's list: newest `last` first, then id.
    pub fn position(&self) -> (Millis, ObjectId) {
        (self.last, self.id)
    }
}

/// A page of one owner's groups, newest first by `last` (then id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoticeRange {
    /// Only groups strictly before this position (`last`, id).
    pub before: Option<(Millis, ObjectId)>,
    pub limit: usize,
    /// Only groups with an unread member.
    pub unread_only: bool,
}

/// A user's notification counts, in groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoticeCounts {
    /// Groups with a member newer than the seen watermark.
    pub unseen: u64,
    /// Groups with an unread member.
    pub unread: u64,
}

/// One action's thread muted: no notices about it until `until` (for good
/// if `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mute {
    pub action_id: ObjectId,
    #[serde(default)]
    pub until: Option<Millis>,
}

/// Which feed a marker is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MarkerFeed {
    /// The home feed.
    Home,
    /// The notifications.
    Notifications,
}

/// Where a user stopped reading one feed, on whichever device (Mastodon's
/// markers): an opaque cursor of that feed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    pub feed: MarkerFeed,
    pub cursor: String,
    /// Counts the marker's writes: a client may set it only over the
    /// version it read.
    pub version: u64,
    pub updated: Millis,
}

/// A user's notification state: what was seen, preferences and markers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inbox {
    pub tenant: String,
    pub owner: String,
    /// Everything that happened up to here was seen.
    #[serde(default)]
    pub seen_until: Millis,
    /// Reasons the user is not notified for.
    #[serde(default)]
    pub disabled: Vec<NoticeReason>,
    #[serde(default)]
    pub mutes: Vec<Mute>,
    #[serde(default)]
    pub markers: Vec<Marker>,
    /// Bumped by every write; 0 while never stored.
    #[serde(default)]
    pub version: u64,
}

impl Inbox {
    pub fn new(tenant: &str, owner: &str) -> Inbox {
        Inbox {
            tenant: tenant.to_owned(),
            owner: owner.to_owned(),
            ..Inbox::default()
        }
    }

    /// Whether a notice of `reason` about `action` reaches the user at `now`.
    pub fn wants(&self, reason: NoticeReason, action: Option<ObjectId>, now: Millis) -> bool {
        if self.disabled.contains(&reason) {
            return false;
        }
        !action.is_some_and(|id| {
            self.mutes
                .iter()
                .any(|m| m.action_id == id && m.until.is_none_or(|until| until > now))
        })
    }

    /// The mutes still in force at `now`.
    pub fn live_mutes(&self, now: Millis) -> impl Iterator<Item = &Mute> {
        self.mutes
            .iter()
            .filter(move |m| m.until.is_none_or(|until| until > now))
    }

    pub fn marker(&self, feed: MarkerFeed) -> Option<&Marker> {
        self.markers.iter().find(|m| m.feed == feed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(source: &str, actor: &str, at: Millis) -> Notice {
        Notice {
            id: ObjectId::new(),
            source: source.into(),
            reason: NoticeReason::Like,
            actor: actor.into(),
            action_id: None,
            comment_id: None,
            ref_id: None,
            at,
            read: false,
            archived: false,
        }
    }

    #[test]
    fn a_group_adds_each_source_once_and_counts_what_is_unread() {
        let mut g = NoticeGroup::new("acme", "mary", "like:x:day", NoticeReason::Like);
        assert!(g.add(notice("l:1", "rita", 10)));
        assert!(g.add(notice("l:2", "john", 30)));
        assert!(g.add(notice("l:3", "rita", 20)));
        assert!(!g.add(notice("l:2", "john", 40)), "same source again");
        assert_eq!((g.visible, g.unread, g.last), (3, 3, 30));
        assert_eq!(g.actors(), ["john", "rita"]);
        assert_eq!(g.first(), Some(10));
        let one = g.members[1].id;
        assert!(g.mark_read(Some(&[one])));
        assert!(!g.mark_read(Some(&[one])), "already read");
        assert_eq!(g.unread, 2);
        assert!(g.archive(Some(&[g.members[2].id])));
        assert_eq!((g.visible, g.unread, g.last), (2, 1, 20));
        assert!(g.mark_read(None));
        assert_eq!(g.unread, 0);
        assert!(g.archive(None));
        assert_eq!((g.visible, g.unread), (0, 0));
    }

    #[test]
    fn a_full_group_drops_its_oldest_and_keeps_counting_them() {
        let mut g = NoticeGroup::new("acme", "mary", "k", NoticeReason::Like);
        for n in 0..MEMBERS_KEPT + 5 {
            g.add(notice(&format!("l:{n}"), &format!("u{n}"), n as Millis));
        }
        assert_eq!(g.members.len(), MEMBERS_KEPT);
        assert_eq!((g.dropped, g.dropped_unread), (5, 5));
        assert_eq!(g.visible as usize, MEMBERS_KEPT + 5);
        assert_eq!(g.unread as usize, MEMBERS_KEPT + 5);
        g.mark_read(None);
        assert_eq!(g.unread, 0);
    }

    #[test]
    fn mutes_expire_and_kinds_turn_off() {
        let action = ObjectId::new();
        let mut inbox = Inbox::new("acme", "mary");
        inbox.disabled.push(NoticeReason::Like);
        inbox.mutes.push(Mute {
            action_id: action,
            until: Some(100),
        });
        assert!(!inbox.wants(NoticeReason::Like, None, 0));
        assert!(!inbox.wants(NoticeReason::Comment, Some(action), 99));
        assert!(inbox.wants(NoticeReason::Comment, Some(action), 100));
        assert!(inbox.wants(NoticeReason::Comment, Some(ObjectId::new()), 0));
    }
}
