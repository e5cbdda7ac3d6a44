//! The relevancy policy: which readers a comment bumps, and how far.
//!
//! A comment on an action raises the action in the feeds of the readers it
//! matters to. Each rule names a kind of reader and a boost; a reader's item
//! goes to `time of the comment + boost` (the largest boost of the rules that
//! match them), and only ever up. A reader no rule matches keeps the item where
//! it was. Rules come from a TOML file and/or flags; a rule can be turned off.
//!
//! ```toml
//! [boost]
//! assigned = "4h"      # reader is assigned to one of the action's refIds
//! supervisor = "2h"    # the commenter is the reader's supervisor
//! participated = "1h"  # the reader did the action or commented on it
//! department = "0s"    # reader is in one of the commenter's departments
//! ```

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::model::{Action, BumpRule, Comment, GroupKind, Millis};
use crate::store::Graph;
use crate::store::{Direction, Store, StoreResult};

const MINUTE: Millis = 60_000;
const HOUR: Millis = 60 * MINUTE;

/// The boost of each rule; `None` turns a rule off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BumpRules {
    pub assigned: Option<Millis>,
    pub supervisor: Option<Millis>,
    pub participated: Option<Millis>,
    pub department: Option<Millis>,
}

impl Default for BumpRules {
    /// The people closest to a thing see its news first: whoever is assigned
    /// to it, then a supervisor's word to their reports, then those already in
    /// the conversation, then the commenter's department (up to now, no more).
    fn default() -> Self {
        Self {
            assigned: Some(4 * HOUR),
            supervisor: Some(2 * HOUR),
            participated: Some(HOUR),
            department: Some(0),
        }
    }
}

/// The rules file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    boost: BoostTable,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoostTable {
    assigned: Option<String>,
    supervisor: Option<String>,
    participated: Option<String>,
    department: Option<String>,
}

impl BumpRules {
    pub fn boost(&self, rule: BumpRule) -> Option<Millis> {
        match rule {
            BumpRule::Assigned => self.assigned,
            BumpRule::Supervisor => self.supervisor,
            BumpRule::Participated => self.participated,
            BumpRule::Department => self.department,
        }
    }

    fn slot(&mut self, rule: BumpRule) -> &mut Option<Millis> {
        match rule {
            BumpRule::Assigned => &mut self.assigned,
            BumpRule::Supervisor => &mut self.supervisor,
            BumpRule::Participated => &mut self.participated,
            BumpRule::Department => &mut self.department,
        }
    }

    /// Sets one rule from its written form (`"4h"`, `"off"`…).
    pub fn set(&mut self, rule: BumpRule, written: &str) -> Result<(), String> {
        *self.slot(rule) = parse_boost(written).map_err(|e| format!("{}: {e}", rule_key(rule)))?;
        Ok(())
    }

    /// Applies a rules file over these rules: rules it names change, others stay.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        let file: RulesFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let b = file.boost;
        for (rule, written) in [
            (BumpRule::Assigned, b.assigned),
            (BumpRule::Supervisor, b.supervisor),
            (BumpRule::Participated, b.participated),
            (BumpRule::Department, b.department),
        ] {
            if let Some(written) = written {
                self.set(rule, &written)?;
            }
        }
        Ok(())
    }

    /// Reads a rules file over these rules.
    pub fn load(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read bump rules {}: {e}", path.display()))?;
        self.apply_toml(&text)
            .map_err(|e| format!("bad bump rules in {}: {e}", path.display()))
    }

    /// The rules in the file format, for logs.
    pub fn describe(&self) -> String {
        BumpRule::ALL
            .iter()
            .map(|&rule| {
                let boost = self
                    .boost(rule)
                    .map_or_else(|| "off".to_owned(), format_boost);
                format!("{}={boost}", rule_key(rule))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn rule_key(rule: BumpRule) -> &'static str {
    match rule {
        BumpRule::Assigned => "assigned",
        BumpRule::Supervisor => "supervisor",
        BumpRule::Participated => "participated",
        BumpRule::Department => "department",
    }
}

/// Parses a boost: `off`, or a whole number with a unit (`ms`, `s`, `m`, `h`,
/// `d`), at most 365 days.
pub fn parse_boost(written: &str) -> Result<Option<Millis>, String> {
    let written = written.trim();
    if written.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let split = written
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{written:?} has no unit; write e.g. 30m, 4h, 1d or off"))?;
    let (number, unit) = written.split_at(split);
    let number: Millis = number
        .parse()
        .map_err(|_| format!("{written:?} is not a duration; write e.g. 30m, 4h, 1d or off"))?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => MINUTE,
        "h" => HOUR,
        "d" => 24 * HOUR,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {written:?}; use ms, s, m, h or d"
            ))
        }
    };
    let boost = number.saturating_mul(unit_ms);
    if boost > 365 * 24 * HOUR {
        return Err(format!("{written:?} is more than 365 days"));
    }
    Ok(Some(boost))
}

fn format_boost(ms: Millis) -> String {
    for (unit, size) in [("d", 24 * HOUR), ("h", HOUR), ("m", MINUTE), ("s", 1_000)] {
        if ms >= size && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Page size when reading department members.
const PAGE: usize = 10_000;

/// The readers `comment` bumps `action` for, each with the rule that gives it
/// the largest boost (ties go to the rule listed first in [`BumpRule::ALL`]).
/// Readers who do not have the item in their feed are among them; the store
/// skips those.
pub async fn targets(
    store: &dyn Store,
    rules: &BumpRules,
    action: &Action,
    comment: &Comment,
) -> StoreResult<Vec<(String, BumpRule)>> {
    let tenant = action.tenant.as_str();
    let by = comment.author_id.as_str();
    let mut best: HashMap<String, BumpRule> = HashMap::new();
    let mut add = |reader: String, rule: BumpRule| {
        let Some(boost) = rules.boost(rule) else {
            return;
        };
        best.entry(reader)
            .and_modify(|current| {
                if rules.boost(*current).is_none_or(|b| boost > b) {
                    *current = rule;
                }
            })
            .or_insert(rule);
    };
    for rule in BumpRule::ALL {
        if rules.boost(rule).is_none() {
            continue;
        }
        match rule {
            BumpRule::Assigned => {
                if !action.ref_ids.is_empty() {
                    for (_, user) in store
                        .assignment(tenant, Direction::In, &action.ref_ids)
                        .await?
                    {
                        add(user, rule);
                    }
                }
            }
            BumpRule::Supervisor => {
                for user in store.supervision(tenant, Direction::In, by).await? {
                    add(user, rule);
                }
            }
            BumpRule::Participated => {
                add(action.actor_id.clone(), rule);
                let mut after = None;
                loop {
                    let page = store.comments(tenant, action.id, after, PAGE).await?;
                    let last_page = page.len() < PAGE;
                    after = page.last().map(|c| c.id);
                    for earlier in page {
                        // Comments after this one did not exist when it was made.
                        if earlier.id.bytes() <= comment.id.bytes() {
                            add(earlier.author_id, rule);
                        }
                    }
                    if last_page {
                        break;
                    }
                }
            }
            BumpRule::Department => {
                for membership in store.memberships(tenant, by).await? {
                    if membership.kind != GroupKind::Department {
                        continue;
                    }
                    let mut after: Option<String> = None;
                    loop {
                        let page = store
                            .group_members(tenant, &membership.group_id, after.as_deref(), PAGE)
                            .await?;
                        let last_page = page.len() < PAGE;
                        after = page.last().cloned();
                        for user in page {
                            add(user, rule);
                        }
                        if last_page {
                            break;
                        }
                    }
                }
            }
        }
    }
    let mut targets: Vec<_> = best.into_iter().collect();
    targets.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boosts_parse_with_units_and_off() {
        assert_eq!(parse_boost("4h"), Ok(Some(4 * HOUR)));
        assert_eq!(parse_boost(" 30m "), Ok(Some(30 * MINUTE)));
        assert_eq!(parse_boost("0s"), Ok(Some(0)));
        assert_eq!(parse_boost("1500ms"), Ok(Some(1_500)));
        assert_eq!(parse_boost("2d"), Ok(Some(48 * HOUR)));
        assert_eq!(parse_boost("OFF"), Ok(None));
        for bad in ["", "4", "h", "4 hours", "-1h", "400d", "1.5h"] {
            assert!(parse_boost(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_rules_file_changes_only_what_it_names() {
        let mut rules = BumpRules::default();
        rules
            .apply_toml("[boost]\nassigned = \"1d\"\ndepartment = \"off\"\n")
            .unwrap();
        assert_eq!(rules.assigned, Some(24 * HOUR));
        assert_eq!(rules.department, None);
        assert_eq!(rules.supervisor, BumpRules::default().supervisor);
        assert_eq!(
            rules.describe(),
            "assigned=1d supervisor=2h department=off participated=1h"
        );
    }

    #[test]
    fn a_rules_file_with_unknown_rules_or_bad_boosts_is_refused() {
        let mut rules = BumpRules::default();
        let err = rules
            .apply_toml("[boost]\nassignee = \"1h\"\n")
            .unwrap_err();
        assert!(err.contains("assignee"), "{err}");
        let err = rules
            .apply_toml("[boost]\nassigned = \"soon\"\n")
            .unwrap_err();
        assert!(err.contains("assigned"), "{err}");
        let err = rules.apply_toml("[boosts]\n").unwrap_err();
        assert!(err.contains("boosts"), "{err}");
    }
}
