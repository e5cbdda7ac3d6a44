//! Global ids (Relay object identification): every `Node` is named by the
//! unpadded base64url of `<Type>:<key>`, opaque to clients.
//!
//! Keys: an action's id (24 hex digits); a user's id as the application
//! gave it; a comment's action and comment ids (`<action hex>:<comment
//! hex>`: comments are stored under their action, and whoever may read the
//! action may read its comments); a feed item's action id and owner
//! (`<action hex>:<owner>`: the fixed-length part first, since user ids are
//! any string); a notification group's id, and a notification's group and
//! member ids (both the viewer's own: no owner in them).
//!
//! Arguments that name an action or a user take its raw id or its global
//! id alike: [`action_id_arg`] and [`user_id_arg`] decode them. A global id
//! of another type is refused with `BAD_USER_INPUT`.

use async_graphql::ID;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::error::bad_input;
use crate::model::limits::normalize_id;
use crate::model::ObjectId;

/// What a global id names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GlobalId {
    Action(ObjectId),
    User(String),
    Comment {
        action: ObjectId,
        comment: ObjectId,
    },
    FeedItem {
        action: ObjectId,
        owner: String,
    },
    /// One of the viewer's notification groups.
    NotificationGroup(ObjectId),
    /// One notification of a group of the viewer's.
    Notification {
        group: ObjectId,
        member: ObjectId,
    },
}

impl GlobalId {
    /// The type name the id carries (the GraphQL type's).
    pub fn type_name(&self) -> &'static str {
        match self {
            GlobalId::Action(_) => "Action",
            GlobalId::User(_) => "User",
            GlobalId::Comment { .. } => "Comment",
            GlobalId::FeedItem { .. } => "FeedItem",
            GlobalId::NotificationGroup(_) => "NotificationGroup",
            GlobalId::Notification { .. } => "Notification",
        }
    }

    /// The opaque id.
    pub fn encode(&self) -> ID {
        let key = match self {
            GlobalId::Action(id) => id.to_hex(),
            GlobalId::User(id) => id.clone(),
            GlobalId::Comment { action, comment } => {
                format!("{}:{}", action.to_hex(), comment.to_hex())
            }
            GlobalId::FeedItem { action, owner } => format!("{}:{owner}", action.to_hex()),
            GlobalId::NotificationGroup(id) => id.to_hex(),
            GlobalId::Notification { group, member } => {
                format!("{}:{}", group.to_hex(), member.to_hex())
            }
        };
        ID(URL_SAFE_NO_PAD.encode(format!("{}:{key}", self.type_name())))
    }

    /// Reads a global id: `Ok(None)` when `id` is not one (so it may be a
    /// raw id); an error when it names a known type with a key that type
    /// cannot have.
    pub fn decode(id: &str) -> async_graphql::Result<Option<GlobalId>> {
        let Some(text) = URL_SAFE_NO_PAD
            .decode(id)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
        else {
            return Ok(None);
        };
        let Some((kind, key)) = text.split_once(':') else {
            return Ok(None);
        };
        let malformed = || bad_input(format!("{id:?} is not a valid {kind} id"));
        let oid = |hex: &str| ObjectId::parse_str(hex).map_err(|_| malformed());
        let decoded = match kind {
            "Action" => GlobalId::Action(oid(key)?),
            "User" if !key.is_empty() => GlobalId::User(key.to_owned()),
            "User" => return Err(malformed()),
            "Comment" => {
                let (action, comment) = key.split_once(':').ok_or_else(malformed)?;
                GlobalId::Comment {
                    action: oid(action)?,
                    comment: oid(comment)?,
                }
            }
            "FeedItem" => {
                let (action, owner) = key.split_once(':').ok_or_else(malformed)?;
                if owner.is_empty() {
                    return Err(malformed());
                }
                GlobalId::FeedItem {
                    action: oid(action)?,
                    owner: owner.to_owned(),
                }
            }
            "NotificationGroup" => GlobalId::NotificationGroup(oid(key)?),
            "Notification" => {
                let (group, member) = key.split_once(':').ok_or_else(malformed)?;
                GlobalId::Notification {
                    group: oid(group)?,
                    member: oid(member)?,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(decoded))
    }
}

fn wrong_type(field: &str, found: &GlobalId, wanted: &str) -> async_graphql::Error {
    bad_input(format!(
        "`{field}` takes {wanted} id, but this is the global id of a {}",
        found.type_name()
    ))
}

/// An argument that names an action: its id (24 hex digits) or its global id.
pub fn action_id_arg(field: &str, id: &ID) -> async_graphql::Result<ObjectId> {
    if let Ok(oid) = ObjectId::parse_str(id.as_str()) {
        return Ok(oid);
    }
    match GlobalId::decode(id)? {
        Some(GlobalId::Action(oid)) => Ok(oid),
        Some(other) => Err(wrong_type(field, &other, "an action")),
        None => Err(bad_input(format!(
            "`{field}`: {:?} is not an action id (24 hex digits, or an action's global id)",
            id.as_str()
        ))),
    }
}

/// An argument that names a user: the application's id of the user, or the
/// user's global id.
pub fn user_id_arg(field: &str, id: &ID) -> async_graphql::Result<String> {
    let raw = match GlobalId::decode(id)? {
        Some(GlobalId::User(user)) => user,
        Some(other) => return Err(wrong_type(field, &other, "a user")),
        None => id.0.clone(),
    };
    normalize_id(field, &raw).map_err(|e| bad_input(e.0))
}

/// An optional user argument, as [`user_id_arg`].
pub fn opt_user_id_arg(field: &str, id: Option<&ID>) -> async_graphql::Result<Option<String>> {
    id.map(|id| user_id_arg(field, id)).transpose()
}

/// The id just before `id`, for reading from `id` on where reads start
/// strictly after a key; `None` for the smallest id.
pub fn before(id: ObjectId) -> Option<ObjectId> {
    let mut bytes = id.bytes();
    for byte in bytes.iter_mut().rev() {
        if *byte > 0 {
            *byte -= 1;
            return Some(ObjectId::from_bytes(bytes));
        }
        *byte = 0xff;
    }
    None
}

/// An argument renamed into the API's one vocabulary (`actionId`, `userId`…)
/// whose old name (`id`) still works for one release, deprecated: both are
/// optional in the schema, and exactly one must be given. Returns the name
/// given, for later messages, with its value.
pub fn renamed_arg<T>(
    (name, value): (&'static str, Option<T>),
    (old_name, old_value): (&'static str, Option<T>),
) -> async_graphql::Result<(&'static str, T)> {
    match (value, old_value) {
        (Some(value), None) => Ok((name, value)),
        (None, Some(value)) => Ok((old_name, value)),
        (Some(_), Some(_)) => Err(bad_input(format!(
            "give `{name}` or its deprecated old name `{old_name}`, not both"
        ))),
        (None, None) => Err(bad_input(format!("`{name}` is required"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(err: &async_graphql::Error) -> Option<String> {
        let ext = err.extensions.as_ref()?;
        match ext.get("code")? {
            async_graphql::Value::String(code) => Some(code.clone()),
            _ => None,
        }
    }

    #[test]
    fn every_kind_round_trips() {
        let a = ObjectId::new();
        let c = ObjectId::new();
        let all = [
            GlobalId::Action(a),
            GlobalId::User("alice".into()),
            GlobalId::User("a:b:c".into()),
            GlobalId::Comment {
                action: a,
                comment: c,
            },
            GlobalId::FeedItem {
                action: a,
                owner: "bob:with:colons".into(),
            },
        ];
        for id in all {
            let encoded = id.encode();
            assert!(
                encoded
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'),
                "url-safe, unpadded: {encoded:?}"
            );
            assert_eq!(GlobalId::decode(&encoded).unwrap(), Some(id));
        }
    }

    #[test]
    fn the_encoding_is_base64url_of_type_and_key() {
        let a = ObjectId::parse_str("65f000000000000000000001").unwrap();
        let id = GlobalId::FeedItem {
            action: a,
            owner: "alice".into(),
        };
        let text = URL_SAFE_NO_PAD.decode(id.encode().as_str()).unwrap();
        assert_eq!(text, b"FeedItem:65f000000000000000000001:alice");
    }

    #[test]
    fn raw_ids_are_not_global_ids() {
        for raw in ["alice", "65f000000000000000000001", "", "bob@example.com"] {
            assert_eq!(GlobalId::decode(raw).unwrap(), None, "{raw}");
        }
        // Valid base64 of something that is no type of ours.
        let other = URL_SAFE_NO_PAD.encode("Group:sales");
        assert_eq!(GlobalId::decode(&other).unwrap(), None);
    }

    #[test]
    fn a_known_type_with_a_bad_key_is_refused() {
        for text in [
            "Action:xyz",
            "Comment:65f000000000000000000001",
            "FeedItem:nothex:al",
            "User:",
        ] {
            let err = GlobalId::decode(&URL_SAFE_NO_PAD.encode(text)).unwrap_err();
            assert_eq!(code(&err).as_deref(), Some("BAD_USER_INPUT"), "{text}");
        }
    }

    #[test]
    fn arguments_take_raw_and_global_ids_of_their_type_only() {
        let a = ObjectId::new();
        assert_eq!(action_id_arg("id", &ID(a.to_hex())).unwrap(), a);
        assert_eq!(
            action_id_arg("id", &GlobalId::Action(a).encode()).unwrap(),
            a
        );
        assert_eq!(user_id_arg("userId", &ID("alice".into())).unwrap(), "alice");
        let alice = GlobalId::User("alice".into()).encode();
        assert_eq!(user_id_arg("userId", &alice).unwrap(), "alice");

        let err = action_id_arg("id", &alice).unwrap_err();
        assert_eq!(code(&err).as_deref(), Some("BAD_USER_INPUT"));
        assert!(
            err.message.contains("global id of a User"),
            "{}",
            err.message
        );
        let err = user_id_arg("userId", &GlobalId::Action(a).encode()).unwrap_err();
        assert_eq!(code(&err).as_deref(), Some("BAD_USER_INPUT"));
        let err = action_id_arg("id", &ID("nope".into())).unwrap_err();
        assert_eq!(code(&err).as_deref(), Some("BAD_USER_INPUT"));
    }

    #[test]
    fn before_steps_back_one_id() {
        let one = ObjectId::parse_str("65f000000000000000000100").unwrap();
        assert_eq!(before(one).unwrap().to_hex(), "65f0000000000000000000ff");
        assert_eq!(before(ObjectId::from_bytes([0; 12])), None);
    }
}
