//! What the subscribers of one event share: its result, serialised once per
//! selection, with a hole for each value that is the subscriber's own (their
//! resume cursor, their item's id). Each subscriber fills the holes into a
//! copy of the bytes instead of executing and serialising the selection.

use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

/// The values that are each subscriber's own, by the kind of hole they fill.
pub mod hole {
    /// The feed item's `ownerId`.
    pub const OWNER_ID: usize = 0;
    /// The feed item's `id`.
    pub const ID: usize = 1;
    /// The feed item's `cursor`.
    pub const CURSOR: usize = 2;
    /// The event's `resumeCursor`.
    pub const RESUME_CURSOR: usize = 3;
    /// The feed item's `action`, when the subscriber may read it: the
    /// first of its kinds (one per `action` of the selection), whose bytes
    /// the template holds, written once ([`super::Template::common`]).
    pub const ACTION: usize = 4;
}

/// A serialised result with holes: `parts[0] hole[0] parts[1] … parts[n]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<String>,
    /// Which of the subscriber's values goes into each hole.
    holes: Vec<usize>,
    /// Values the same for every subscriber who may have them, by kind.
    common: Vec<(usize, Option<String>)>,
}

impl Template {
    /// `json` cut at each of `holes` (a byte offset and the kind of value
    /// that goes there), in order; `common` the values written once.
    pub fn split(
        json: &str,
        holes: &[(usize, usize)],
        common: Vec<(usize, Option<String>)>,
    ) -> Self {
        let mut parts = Vec::with_capacity(holes.len() + 1);
        let mut from = 0;
        for &(at, _) in holes {
            parts.push(json[from..at].to_owned());
            from = at;
        }
        parts.push(json[from..].to_owned());
        Self {
            parts,
            holes: holes.iter().map(|&(_, kind)| kind).collect(),
            common,
        }
    }

    /// The value of kind `kind` written once for every subscriber, if it
    /// was written (`None` when there was nothing to write).
    pub fn common(&self, kind: usize) -> Option<&str> {
        self.common
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, value)| value.as_deref())
    }

    /// `json` cut at every JSON string `"<prefix><i>"` (`prefix` starts
    /// with the opening quote; `i` a digit below `kinds`), which becomes a
    /// hole for value `i`.
    pub fn cut(json: &str, prefix: &str, kinds: usize) -> Self {
        let mut parts = Vec::new();
        let mut holes = Vec::new();
        let mut part = String::new();
        let mut rest = json;
        while let Some(at) = rest.find(prefix) {
            let after = &rest[at + prefix.len()..];
            // A marker is a JSON string: the prefix (opening quote
            // included), one digit, the closing quote.
            let kind = match after.as_bytes() {
                [digit, b'"', ..] => Some(digit.wrapping_sub(b'0') as usize).filter(|&k| k < kinds),
                _ => None,
            };
            match kind {
                Some(kind) => {
                    part.push_str(&rest[..at]);
                    parts.push(std::mem::take(&mut part));
                    holes.push(kind);
                    rest = &after[2..];
                }
                // Not a marker after all (it cannot be, with a random
                // prefix): text like the rest.
                None => {
                    part.push_str(&rest[..at + prefix.len()]);
                    rest = after;
                }
            }
        }
        part.push_str(rest);
        parts.push(part);
        Self {
            parts,
            holes,
            common: Vec::new(),
        }
    }

    /// Whether any hole takes value `kind`.
    pub fn uses(&self, kind: usize) -> bool {
        self.holes.contains(&kind)
    }

    /// The bytes with `values[i]` (already JSON) in each hole of kind `i`,
    /// `null` where there is none.
    pub fn fill(&self, values: &[Option<&str>]) -> String {
        let extra: usize = self
            .holes
            .iter()
            .map(|&k| values.get(k).copied().flatten().map_or(4, str::len))
            .sum();
        let mut out =
            String::with_capacity(self.parts.iter().map(String::len).sum::<usize>() + extra);
        for (i, part) in self.parts.iter().enumerate() {
            out.push_str(part);
            if let Some(&kind) = self.holes.get(i) {
                match values.get(kind).copied().flatten() {
                    Some(value) => out.push_str(value),
                    None => out.push_str("null"),
                }
            }
        }
        out
    }
}

/// Where one selection's template is: made by the first subscriber that
/// asks, `None` when it could not be made.
pub type Slot = Arc<OnceCell<Option<Arc<Template>>>>;

/// The templates of one event (or of events alike but for their reader),
/// one per selection that asked for it. A selection whose template could
/// not be made (its execution failed) holds `None`: its subscribers execute
/// it themselves.
#[derive(Default)]
pub struct Renders {
    /// A std mutex: held for a scan of a few entries, never across an await.
    /// The cells are async: the first subscriber of a selection renders it,
    /// the others wait for that instead of rendering it again.
    slots: Mutex<Vec<(Arc<str>, Slot)>>,
}

impl Renders {
    /// The cell of the selection `shape`.
    pub fn slot(&self, shape: &Arc<str>) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, cell)) = slots
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, shape) || s == shape)
        {
            return cell.clone();
        }
        let cell = Arc::new(OnceCell::new());
        slots.push((shape.clone(), cell.clone()));
        cell
    }
}

impl std::fmt::Debug for Renders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Renders")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_takes_each_value_where_its_marker_was_and_keeps_the_rest() {
        let prefix = "\"hole-7:";
        let json = r#"{"a":"hole-7:1","b":["hole-7:0","hole-7:9","hole-7:1"],"c":"hole-7:x"}"#;
        let template = Template::cut(json, prefix, 2);
        assert!(template.uses(0) && template.uses(1) && !template.uses(2));
        let values = [Some(r#""zero""#), Some("1")];
        assert_eq!(
            template.fill(&values),
            r#"{"a":1,"b":["zero","hole-7:9",1],"c":"hole-7:x"}"#,
            "a digit past `kinds` or no digit is text"
        );
        assert_eq!(Template::cut("[]", prefix, 2).fill(&values), "[]");
    }

    #[test]
    fn a_template_split_at_offsets_takes_each_value_there() {
        let json = r#"{"a":,"b":[,1]}"#;
        let template = Template::split(json, &[(5, 1), (11, 0)], vec![(2, Some("{}".into()))]);
        assert_eq!(template.common(2), Some("{}"));
        assert_eq!(template.common(1), None);
        assert_eq!(template.fill(&[Some("0"), None]), r#"{"a":null,"b":[0,1]}"#);
    }

    #[test]
    fn one_selection_has_one_slot_per_event() {
        let renders = Renders::default();
        let (a, b) = (Arc::<str>::from("{kind}"), Arc::<str>::from("{kind}"));
        assert!(Arc::ptr_eq(&renders.slot(&a), &renders.slot(&b)));
        assert!(!Arc::ptr_eq(
            &renders.slot(&a),
            &renders.slot(&"{item}".into())
        ));
    }
}
