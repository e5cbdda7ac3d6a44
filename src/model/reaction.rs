//! Reactions: comments and likes on an action, and the counts kept with it.

use serde::{Deserialize, Serialize};

use super::{Millis, ObjectId};

/// A comment on an action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: ObjectId,
    pub action_id: ObjectId,
    pub author_id: String,
    pub text: String,
    pub created: Millis,
}

/// Reaction counts, kept on the action so a feed page shows them without
/// counting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub comments: u64,
    pub likes: u64,
}
