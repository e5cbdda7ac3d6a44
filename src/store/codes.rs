//! The codes enums are stored by, written once for both backends: each enum
//! has one table of its variants with the byte the embedded store keeps and
//! the name MongoDB keeps. Both directions read the same table, and reading
//! is strict: a code the table does not hold is corrupt data, reported with
//! the record it was found in, never read as some default variant.
//!
//! Enums MongoDB stores through serde (scopes, reasons inside feed items,
//! fan-out states, descriptors) are strict there already: serde refuses an
//! unknown variant. Their names in the tables below are serde's, so both
//! ways of storing agree.

use std::fmt::{Debug, Display};

use super::{Ended, StoreError, StoreResult};
use super::{RecordKind, Relation};
use crate::model::{BumpRule, EdgeKind, GroupKind, MembershipRole, ReasonKind};

/// The stored codes of one enum.
pub struct Codes<T: 'static> {
    /// What the code says, for messages ("group kind").
    pub what: &'static str,
    /// Each variant with its embedded byte and its MongoDB name.
    rows: &'static [(T, u8, &'static str)],
}

impl<T: Copy + PartialEq + Debug> Codes<T> {
    /// The byte the embedded store keeps for `value`.
    pub fn byte(&self, value: T) -> u8 {
        self.row(value).1
    }

    /// The name MongoDB keeps for `value`.
    pub fn name(&self, value: T) -> &'static str {
        self.row(value).2
    }

    /// The variant stored as `byte` in `record`; corrupt if none is.
    pub fn read_byte(&self, byte: u8, record: impl Display) -> StoreResult<T> {
        self.rows
            .iter()
            .find(|row| row.1 == byte)
            .map(|row| row.0)
            .ok_or_else(|| unknown(record, self.what, byte))
    }

    /// The variant stored as `name` in `record`; corrupt if none is.
    pub fn read_name(&self, name: &str, record: impl Display) -> StoreResult<T> {
        self.rows
            .iter()
            .find(|row| row.2 == name)
            .map(|row| row.0)
            .ok_or_else(|| unknown(record, self.what, name))
    }

    fn row(&self, value: T) -> &(T, u8, &'static str) {
        // Every variant has its row: the tests below go through them all.
        self.rows
            .iter()
            .find(|row| row.0 == value)
            .unwrap_or_else(|| panic!("{value:?} has no stored {} code", self.what))
    }
}

/// The error for a code no table holds.
fn unknown(record: impl Display, what: &str, code: impl Debug) -> StoreError {
    StoreError::corrupt(record, format!("unknown {what} code {code:?}"))
}

pub const GROUP_KIND: Codes<GroupKind> = Codes {
    what: "group kind",
    rows: &[
        (GroupKind::Team, 0, "TEAM"),
        (GroupKind::Department, 1, "DEPARTMENT"),
    ],
};

pub const ROLE: Codes<MembershipRole> = Codes {
    what: "membership role",
    rows: &[
        (MembershipRole::Member, 0, "MEMBER"),
        (MembershipRole::Lead, 1, "LEAD"),
    ],
};

/// An edge's kind. The byte is the one the embedded store keys the
/// edge's outgoing side (and a cut) by; an edge's incoming side has its own
/// (see `embedded/graph.rs`).
pub const EDGE_KIND: Codes<EdgeKind> = Codes {
    what: "edge kind",
    rows: &[
        (EdgeKind::Follows, 0, "follows"),
        (EdgeKind::Friend, 2, "friend"),
        (EdgeKind::Group, 3, "followsGroup"),
    ],
};

/// What a record holds.
pub const RECORD_KIND: Codes<RecordKind> = Codes {
    what: "record kind",
    rows: &[
        (RecordKind::Meta, 0, "meta"),
        (RecordKind::Cut, 1, "cut"),
        (RecordKind::Celebrity, 2, "celebrity"),
        (RecordKind::Inbox, 3, "inbox"),
        (RecordKind::Group, 4, "group"),
        (RecordKind::GroupFeed, 5, "groupFeed"),
        (RecordKind::Webhook, 6, "webhook"),
        (RecordKind::DeadDelivery, 7, "deadDelivery"),
        (RecordKind::IdempotencyKey, 8, "idempotencyKey"),
        (RecordKind::Deletion, 9, "deletion"),
    ],
};

/// What a relation says.
pub const RELATION: Codes<Relation> = Codes {
    what: "relation",
    rows: &[
        (Relation::Edge(EdgeKind::Follows), 0, "follows"),
        (Relation::Edge(EdgeKind::Friend), 1, "friend"),
        (Relation::Edge(EdgeKind::Group), 2, "followsGroup"),
        (Relation::Member, 3, "member"),
        (Relation::Assigned, 4, "assigned"),
        (Relation::ReportsTo, 5, "reportsTo"),
        (Relation::Likes, 6, "likes"),
    ],
};

/// What an unfollow ended: the edge's kind, or a membership (`group`).
pub const ENDED: Codes<Ended> = Codes {
    what: "unfollow kind",
    rows: &[
        (Ended::Edge(EdgeKind::Follows), 0, "follows"),
        (Ended::Edge(EdgeKind::Friend), 1, "friend"),
        (Ended::Group, 2, "group"),
        (Ended::Edge(EdgeKind::Group), 3, "followsGroup"),
    ],
};

pub const REASON_KIND: Codes<ReasonKind> = Codes {
    what: "reason",
    rows: &[
        (ReasonKind::Own, 0, "OWN"),
        (ReasonKind::Restricted, 1, "RESTRICTED"),
        (ReasonKind::Team, 2, "TEAM"),
        (ReasonKind::Department, 3, "DEPARTMENT"),
        (ReasonKind::Friend, 4, "FRIEND"),
        (ReasonKind::Follows, 5, "FOLLOWS"),
        (ReasonKind::Bumped, 6, "BUMPED"),
        (ReasonKind::Group, 7, "GROUP"),
    ],
};

pub const BUMP_RULE: Codes<BumpRule> = Codes {
    what: "bump rule",
    rows: &[
        (BumpRule::Assigned, 0, "ASSIGNED"),
        (BumpRule::Supervisor, 1, "SUPERVISOR"),
        (BumpRule::Department, 2, "DEPARTMENT"),
        (BumpRule::Participated, 3, "PARTICIPATED"),
    ],
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::store::ErrorKind;

    /// Every variant round-trips both ways, and no two share a code.
    #[track_caller]
    fn holds<T: Copy + PartialEq + Debug>(codes: &Codes<T>, variants: &[T]) {
        assert_eq!(codes.rows.len(), variants.len(), "{}", codes.what);
        for &v in variants {
            assert_eq!(codes.read_byte(codes.byte(v), "r").unwrap(), v);
            assert_eq!(codes.read_name(codes.name(v), "r").unwrap(), v);
        }
        let bytes: BTreeSet<u8> = codes.rows.iter().map(|r| r.1).collect();
        let names: BTreeSet<&str> = codes.rows.iter().map(|r| r.2).collect();
        assert_eq!(
            bytes.len(),
            variants.len(),
            "{}: a byte repeats",
            codes.what
        );
        assert_eq!(
            names.len(),
            variants.len(),
            "{}: a name repeats",
            codes.what
        );
    }

    #[test]
    fn every_variant_has_one_code_each_way() {
        holds(&GROUP_KIND, &[GroupKind::Team, GroupKind::Department]);
        holds(&ROLE, &[MembershipRole::Member, MembershipRole::Lead]);
        holds(&RECORD_KIND, &crate::store::RecordKind::ALL);
        holds(&RELATION, &Relation::ALL);
        holds(
            &EDGE_KIND,
            &[EdgeKind::Follows, EdgeKind::Friend, EdgeKind::Group],
        );
        holds(
            &ENDED,
            &[
                Ended::Edge(EdgeKind::Follows),
                Ended::Edge(EdgeKind::Friend),
                Ended::Edge(EdgeKind::Group),
                Ended::Group,
            ],
        );
        holds(
            &REASON_KIND,
            &[
                ReasonKind::Own,
                ReasonKind::Restricted,
                ReasonKind::Team,
                ReasonKind::Department,
                ReasonKind::Friend,
                ReasonKind::Follows,
                ReasonKind::Bumped,
                ReasonKind::Group,
            ],
        );
        holds(&BUMP_RULE, &BumpRule::ALL);
    }

    /// The names of enums MongoDB stores through serde are serde's.
    #[test]
    fn names_agree_with_serde() {
        fn serde_name<T: serde::Serialize>(v: T) -> String {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        }
        for row in REASON_KIND.rows {
            assert_eq!(serde_name(row.0), row.2);
        }
        for row in BUMP_RULE.rows {
            assert_eq!(serde_name(row.0), row.2);
        }
        for row in GROUP_KIND.rows {
            assert_eq!(serde_name(row.0), row.2);
        }
        for row in ROLE.rows {
            assert_eq!(serde_name(row.0), row.2);
        }
    }

    #[test]
    fn an_unknown_code_is_corrupt_and_names_its_record() {
        let err = GROUP_KIND
            .read_byte(9, "graph family, group acme/g1")
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(err.message.contains("graph family, group acme/g1"), "{err}");
        assert!(err.message.contains("group kind code 9"), "{err}");
        let err = ROLE
            .read_name("CAPTAIN", "memberships 65f0c0ffee")
            .unwrap_err();
        assert!(err.message.contains("memberships 65f0c0ffee"), "{err}");
        assert!(err.message.contains("\"CAPTAIN\""), "{err}");
    }
}
