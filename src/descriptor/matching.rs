//! Keyword filters over the free text of descriptors: the `@text` fields
//! of each type (a note, a comment, a status post's text). An action
//! matches when every word of the filter begins a word of its descriptor's
//! text fields, in any case (`stor` finds "Storm", `order` does not find
//! "border"); an action whose type has no text field never matches. Words
//! are runs of letters and digits.

use std::sync::Arc;

use super::catalog::Catalog;
use super::Descriptor;
use crate::model::limits::InputError;
use crate::model::Action;

/// Words one filter may hold.
pub const MAX_WORDS: usize = 8;
/// Longest filter, in bytes.
pub const MAX_BYTES: usize = 1024;
/// Longest word, in characters.
pub const MAX_WORD_CHARS: usize = 64;

/// A keyword filter, read from a request's `matching`.
#[derive(Clone, Debug)]
pub struct Matching {
    /// Lowercase, each once.
    words: Vec<String>,
    catalog: Arc<Catalog>,
}

impl Matching {
    /// The filter `text` asks for: its whitespace-separated words.
    pub fn parse(text: &str, catalog: Arc<Catalog>) -> Result<Matching, InputError> {
        if text.len() > MAX_BYTES {
            return Err(InputError::new(format!(
                "matching is {} bytes; at most {MAX_BYTES} are allowed",
                text.len()
            )));
        }
        let mut words: Vec<String> = Vec::new();
        for word in words_of(text) {
            if word.chars().count() > MAX_WORD_CHARS {
                return Err(InputError::new(format!(
                    "matching has a word longer than {MAX_WORD_CHARS} characters"
                )));
            }
            let word = word.to_lowercase();
            if !words.contains(&word) {
                words.push(word);
            }
        }
        if words.is_empty() {
            return Err(InputError::new("matching needs at least one word"));
        }
        if words.len() > MAX_WORDS {
            return Err(InputError::new(format!(
                "matching has {} words; at most {MAX_WORDS} are allowed",
                words.len()
            )));
        }
        Ok(Matching { words, catalog })
    }

    /// Whether every word begins a word of `action`'s free text.
    pub fn matches(&self, action: &Action) -> bool {
        let text = self.text_of(&action.descriptor);
        let found: Vec<&str> = words_of(&text).collect();
        self.words
            .iter()
            .all(|w| found.iter().any(|f| f.starts_with(w.as_str())))
    }

    /// The descriptor's `@text` fields, lowercase, one per line.
    fn text_of(&self, descriptor: &Descriptor) -> String {
        let Some(ty) = self.catalog.type_of(descriptor) else {
            return String::new();
        };
        let mut text = String::new();
        for field in ty.fields.iter().filter(|f| f.text) {
            let values = match descriptor.field(&field.name) {
                Some(serde_json::Value::String(s)) => vec![s.as_str()],
                Some(serde_json::Value::Array(items)) => {
                    items.iter().filter_map(|v| v.as_str()).collect()
                }
                _ => continue,
            };
            for value in values {
                text.push_str(&value.to_lowercase());
                text.push('\n');
            }
        }
        text
    }
}

/// The words of `text`: its runs of letters and digits.
fn words_of(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn action(descriptor: Descriptor) -> Action {
        Action {
            id: crate::model::ObjectId::new(),
            tenant: "t".into(),
            actor_id: "ann".into(),
            conducted: 0,
            hidden: false,
            scope: crate::model::Scope::Public,
            readers: Vec::new(),
            scope_groups: Vec::new(),
            ref_ids: Vec::new(),
            tags: Vec::new(),
            descriptor,
            fan_out: crate::model::FanOut::pending(),
            counts: Default::default(),
            expires_at: None,
            to: Vec::new(),
            foreign: None,
        }
    }

    #[test]
    fn every_word_in_the_free_text_in_any_case() {
        let catalog = Catalog::builtin();
        let m = |q: &str| Matching::parse(q, catalog.clone()).expect("parses");
        let post = action(Descriptor::new(
            "StatusPost",
            json!({ "text": "Storm at the PORT, two more days" }),
        ));
        assert!(m("storm").matches(&post));
        assert!(m("port.  STOR").matches(&post));
        assert!(!m("storm harbour").matches(&post));
        assert!(
            !m("ort").matches(&post),
            "words are matched from their start"
        );
        // A name field is not free text.
        let hired = action(Descriptor::new(
            "ApplicantHired",
            json!({ "applicantId": "a1", "applicantName": "Storm Jones",
                    "positionId": "p1", "positionName": "Engineer",
                    "hiredById": "ann", "hiredByName": "Ann" }),
        ));
        assert!(!m("storm").matches(&hired));
        for bad in ["", "   ", "?!", "a b c d e f g h i", &"x".repeat(65)] {
            assert!(Matching::parse(bad, catalog.clone()).is_err(), "{bad:?}");
        }
    }
}
