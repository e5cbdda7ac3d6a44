//! The domain: actions, feed items, users, groups and the limits on their inputs.
//!
//! Plain data shared by the store, the fan-out worker and the API. Times are
//! milliseconds since the Unix epoch (`Millis`), ids of actions are `ObjectId`s.

mod action;
mod feed;
mod graph;
pub mod limits;
mod notice;
mod reaction;
mod webhook;

pub use action::{Action, FanOut, FanOutState, Foreign, Scope};
pub use bson::oid::ObjectId;
pub use feed::{ActionCopy, Bump, BumpRule, FeedItem, Position, Reason, ReasonKind, Stamp};
pub use graph::{EdgeKind, Group, GroupKind, Membership, MembershipRole, User};
pub use notice::{
    Inbox, Marker, MarkerFeed, Mute, Notice, NoticeCounts, NoticeGroup, NoticeRange, NoticeReason,
    MEMBERS_KEPT,
};
pub use reaction::{Comment, Counts};
pub use webhook::{DeadDelivery, Delivery, EventType, Hold, Paused, Tried, Webhook};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;
