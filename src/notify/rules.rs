//! The notification rules: which reasons notify, how notices (and, on the
//! home feed, items) group, and how many groups a user keeps. They come
//! from a TOML file and/or flags, like the bump rules:
//!
//! ```toml
//! [notify]
//! off = ["reply"]                          # reasons that notify nobody
//! group_by = ["reason", "object", "day"]   # the notification group key
//! feed_group_by = ["verb", "object", "day"]  # `aggregatedFeed`'s key
//! groups_kept = 1000                       # per user; the oldest go
//! ```

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::model::{Action, Millis, Notice, NoticeReason};
use crate::store::notices::DEFAULT_GROUPS_KEPT;

/// One part of a group key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupPart {
    /// Why (notices) or what kind of action (feed items).
    Reason,
    /// The action's descriptor type (`ApplicationRating`…); for notices,
    /// the same as `Reason`.
    Verb,
    /// What it is about: the action (notices: the one commented on or
    /// liked; feed items: the action's first ref), else the ref.
    Object,
    /// Who did it: one group per actor.
    Actor,
    /// The UTC day it happened.
    Day,
    /// The UTC hour it happened.
    Hour,
    /// Each notice (feed item) alone: no grouping.
    Notice,
}

impl GroupPart {
    const NAMES: [(&'static str, GroupPart); 7] = [
        ("reason", GroupPart::Reason),
        ("verb", GroupPart::Verb),
        ("object", GroupPart::Object),
        ("actor", GroupPart::Actor),
        ("day", GroupPart::Day),
        ("hour", GroupPart::Hour),
        ("notice", GroupPart::Notice),
    ];

    fn parse(name: &str) -> Result<GroupPart, String> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name.trim())
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                format!(
                    "unknown group key part {name:?}; use {}",
                    Self::NAMES.map(|(n, _)| n).join(", ")
                )
            })
    }

    fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Parses a group key: part names, comma separated.
pub fn parse_group_by(written: &str) -> Result<Vec<GroupPart>, String> {
    let parts = written
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(GroupPart::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if parts.is_empty() {
        return Err("a group key needs at least one part".into());
    }
    Ok(parts)
}

/// The notification rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoticeRules {
    /// Reasons that notify nobody.
    pub off: Vec<NoticeReason>,
    pub group_by: Vec<GroupPart>,
    pub feed_group_by: Vec<GroupPart>,
    pub groups_kept: usize,
}

impl Default for NoticeRules {
    /// Every reason notifies; notices group by reason, object and day
    /// ("Rita and 3 others liked your rating of Mary Fanning"), feed items
    /// by verb, object and day ("4 ratings of Mary Fanning").
    fn default() -> Self {
        Self {
            off: Vec::new(),
            group_by: vec![GroupPart::Reason, GroupPart::Object, GroupPart::Day],
            feed_group_by: vec![GroupPart::Verb, GroupPart::Object, GroupPart::Day],
            groups_kept: DEFAULT_GROUPS_KEPT,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    notify: NotifyTable,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyTable {
    off: Option<Vec<String>>,
    group_by: Option<Vec<String>>,
    feed_group_by: Option<Vec<String>>,
    groups_kept: Option<usize>,
}

impl NoticeRules {
    /// Whether `reason` notifies anyone.
    pub fn on(&self, reason: NoticeReason) -> bool {
        !self.off.contains(&reason)
    }

    /// Turns reasons off, from their names (`like,reply`); `none` turns
    /// every reason back on.
    pub fn set_off(&mut self, written: &str) -> Result<(), String> {
        if written.trim() == "none" {
            self.off.clear();
            return Ok(());
        }
        self.off = written
            .split(',')
            .filter(|r| !r.trim().is_empty())
            .map(|r| {
                NoticeReason::from_key(r.trim()).ok_or_else(|| {
                    format!(
                        "unknown notification reason {r:?}; use {}",
                        NoticeReason::ALL.map(NoticeReason::key).join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    pub fn set_groups_kept(&mut self, kept: usize) -> Result<(), String> {
        if !(1..=100_000).contains(&kept) {
            return Err(format!("groups_kept must be 1 to 100000, got {kept}"));
        }
        self.groups_kept = kept;
        Ok(())
    }

    /// Applies a rules file over these rules: what it names changes.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        let file: RulesFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let n = file.notify;
        if let Some(off) = n.off {
            self.set_off(&off.join(","))?;
        }
        if let Some(parts) = n.group_by {
            self.group_by = parse_group_by(&parts.join(","))?;
        }
        if let Some(parts) = n.feed_group_by {
            self.feed_group_by = parse_group_by(&parts.join(","))?;
        }
        if let Some(kept) = n.groups_kept {
            self.set_groups_kept(kept)?;
        }
        Ok(())
    }

    /// Reads a rules file over these rules.
    pub fn load(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read notification rules {}: {e}", path.display()))?;
        self.apply_toml(&text)
            .map_err(|e| format!("bad notification rules in {}: {e}", path.display()))
    }

    /// The rules, for logs.
    pub fn describe(&self) -> String {
        let names =
            |parts: &[GroupPart]| parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(",");
        let off = if self.off.is_empty() {
            "none".to_owned()
        } else {
            self.off
                .iter()
                .map(|r| r.key())
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "off={off} group_by={} feed_group_by={} groups_kept={}",
            names(&self.group_by),
            names(&self.feed_group_by),
            self.groups_kept
        )
    }

    /// The key of the group `notice` joins.
    pub fn notice_key(&self, notice: &Notice) -> String {
        let object = notice
            .action_id
            .map(|id| id.to_hex())
            .or_else(|| notice.ref_id.clone())
            .unwrap_or_default();
        let parts = (notice.reason.key(), object.as_str(), notice.actor.as_str());
        key_of(&self.group_by, parts, &notice.source, notice.at)
    }

    /// The key of the home-feed group `action` joins.
    pub fn feed_key(&self, action: &Action) -> String {
        let object = action
            .ref_ids
            .first()
            .cloned()
            .unwrap_or_else(|| action.id.to_hex());
        let parts = (
            action.descriptor.type_name(),
            object.as_str(),
            action.actor_id.as_str(),
        );
        key_of(
            &self.feed_group_by,
            parts,
            &action.id.to_hex(),
            action.conducted,
        )
    }
}

/// A key of `parts`, from what is grouped: its verb, object and actor, its
/// own id (for `notice`) and when it happened.
fn key_of(
    parts: &[GroupPart],
    (verb, object, actor): (&str, &str, &str),
    own: &str,
    at: Millis,
) -> String {
    let when = DateTime::<Utc>::from_timestamp_millis(at).unwrap_or_default();
    parts
        .iter()
        .map(|part| match part {
            GroupPart::Reason | GroupPart::Verb => verb.to_owned(),
            GroupPart::Object => object.to_owned(),
            GroupPart::Actor => actor.to_owned(),
            GroupPart::Day => when.format("%Y-%m-%d").to_string(),
            GroupPart::Hour => when.format("%Y-%m-%dT%H").to_string(),
            GroupPart::Notice => own.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ObjectId;

    #[test]
    fn a_rules_file_changes_what_it_names_and_refuses_the_unknown() {
        let mut rules = NoticeRules::default();
        rules
            .apply_toml(
                "[notify]\noff = [\"reply\", \"like\"]\ngroup_by = [\"reason\", \"hour\"]\n",
            )
            .unwrap();
        assert_eq!(rules.off, [NoticeReason::Reply, NoticeReason::Like]);
        assert!(!rules.on(NoticeReason::Like) && rules.on(NoticeReason::Comment));
        assert_eq!(rules.group_by, [GroupPart::Reason, GroupPart::Hour]);
        assert_eq!(rules.feed_group_by, NoticeRules::default().feed_group_by);
        assert_eq!(
            rules.describe(),
            "off=reply,like group_by=reason,hour feed_group_by=verb,object,day groups_kept=1000"
        );
        for bad in [
            "[notify]\noff = [\"likes\"]\n",
            "[notify]\ngroup_by = [\"week\"]\n",
            "[notify]\ngroup_by = []\n",
            "[notify]\ngroups_kept = 0\n",
            "[notifications]\n",
        ] {
            assert!(rules.apply_toml(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn notices_of_one_object_and_day_share_a_key() {
        let rules = NoticeRules::default();
        let action = ObjectId::new();
        let notice = |actor: &str, at: Millis| Notice {
            id: ObjectId::new(),
            source: format!("l:{actor}"),
            reason: NoticeReason::Like,
            actor: actor.into(),
            action_id: Some(action),
            comment_id: None,
            ref_id: None,
            at,
            read: false,
            archived: false,
        };
        let day = 86_400_000;
        let key = rules.notice_key(&notice("rita", 20 * day + 5));
        assert_eq!(key, format!("like|{}|1970-01-21", action.to_hex()));
        assert_eq!(rules.notice_key(&notice("john", 21 * day - 1)), key);
        assert_ne!(rules.notice_key(&notice("john", 21 * day)), key);
    }
}
