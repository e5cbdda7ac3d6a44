//! Bounds on what clients may send, shared by the API and the store.

use std::fmt;

/// Longest id (user, tenant, group, ref): 256 bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Longest free text (a status, a rating text, a user's name): 10 KiB.
pub const MAX_TEXT_BYTES: usize = 10 * 1024;
/// Longest name or label a descriptor copies (a string field not marked
/// `@text`): 1 KiB.
pub const MAX_NAME_BYTES: usize = 1024;
/// Longest GraphQL name a document may write (a field, alias, argument,
/// type, fragment, variable, directive, enum value or operation): 128
/// bytes. The schema's longest is under 30 bytes, and a descriptor file's
/// names are held to this bound too, so it leaves room for any name a
/// client means, while the work a name costs validation (a "did you mean"
/// suggestion compares it with the schema's names, at the two lengths
/// multiplied) stays small.
pub const MAX_GRAPHQL_NAME_BYTES: usize = 128;
/// Most entries in a list input (`refIds`, `tags`, `readers`, `ids`).
pub const MAX_LIST_LEN: usize = 100;
/// Default page size.
pub const DEFAULT_PAGE: usize = 25;
/// Largest page size.
pub const MAX_PAGE: usize = 100;

/// A client input that breaks a rule; the API answers it with `BAD_USER_INPUT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError(pub String);

impl InputError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// An id is 1 to 256 bytes with no control characters or surrounding whitespace.
pub fn check_id(field: &str, value: &str) -> Result<(), InputError> {
    if value.is_empty() {
        return Err(InputError::new(format!("{field} must not be empty")));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(InputError::new(format!(
            "{field} is {} bytes long; ids are at most {MAX_ID_BYTES} bytes",
            value.len()
        )));
    }
    if value.chars().any(char::is_control) || value.trim() != value {
        return Err(InputError::new(format!(
            "{field} must not contain control characters or surrounding whitespace"
        )));
    }
    Ok(())
}

/// A descriptor's name or label is at most 1 KiB.
pub fn check_name(field: &str, value: &str) -> Result<(), InputError> {
    check_len(field, value, MAX_NAME_BYTES, "names and labels are")
}

/// Free text is at most 10 KiB.
pub fn check_text(field: &str, value: &str) -> Result<(), InputError> {
    check_len(field, value, MAX_TEXT_BYTES, "text is")
}

fn check_len(field: &str, value: &str, max: usize, what: &str) -> Result<(), InputError> {
    if value.len() > max {
        return Err(InputError::new(format!(
            "{field} is {} bytes long; {what} at most {max} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// An id as a client gives it, made the one form it is kept under: an id
/// holding an invisible or bidi control character (a format character,
/// Unicode's `Cf`: zero-width spaces and joiners, U+2060, U+FEFF, the bidi
/// embeddings, overrides, isolates and marks…) is refused, naming it; any
/// other is put in Unicode's NFC and checked as [`check_id`] checks. So ids
/// that look the same are the same: `e` + U+0301 and `é` name one user.
pub fn normalize_id(field: &str, value: &str) -> Result<String, InputError> {
    use unicode_normalization::UnicodeNormalization as _;
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory as _};

    if let Some(hidden) = value
        .chars()
        .find(|c| c.general_category() == GeneralCategory::Format)
    {
        return Err(InputError::new(format!(
            "{field} contains U+{:04X}, an invisible or bidi control character; ids must not",
            hidden as u32
        )));
    }
    let value = if unicode_normalization::is_nfc(value) {
        value.to_owned()
    } else {
        value.nfc().collect()
    };
    check_id(field, &value)?;
    Ok(value)
}

/// An id that did not come through the API (a record an import reads) as
/// the API would have kept it: refused where [`normalize_id`] refuses it,
/// and where it is not the form [`normalize_id`] keeps (Unicode's NFC), so
/// that nothing is written under an id no client could name.
pub fn check_kept_id(field: &str, value: &str) -> Result<(), InputError> {
    let kept = normalize_id(field, value)?;
    if kept != value {
        return Err(InputError::new(format!(
            "{field} {value:?} is not in Unicode NFC ({kept:?} is the same id); ids are kept in NFC"
        )));
    }
    Ok(())
}

/// Puts an id in place in the form [`normalize_id`] gives it.
pub fn normalize_id_in(field: &str, value: &mut String) -> Result<(), InputError> {
    *value = normalize_id(field, value)?;
    Ok(())
}

/// A list of ids: at most 100, each as [`normalize_id`] gives it.
pub fn normalize_ids(field: &str, values: Vec<String>) -> Result<Vec<String>, InputError> {
    if values.len() > MAX_LIST_LEN {
        return Err(InputError::new(format!(
            "{field} has {} entries; at most {MAX_LIST_LEN} are allowed",
            values.len()
        )));
    }
    values.iter().map(|v| normalize_id(field, v)).collect()
}

/// A page size: 0 to 100, 25 when absent.
pub fn page_size(field: &str, value: Option<i32>) -> Result<usize, InputError> {
    match value {
        None => Ok(DEFAULT_PAGE),
        Some(n) if n < 0 => Err(InputError::new(format!("{field} must not be negative"))),
        Some(n) if n as usize > MAX_PAGE => Err(InputError::new(format!(
            "{field} is {n}; pages hold at most {MAX_PAGE} items"
        ))),
        Some(n) => Ok(n as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bounded_and_clean() {
        assert!(check_id("id", "alice").is_ok());
        assert!(check_id("id", "").is_err());
        assert!(check_id("id", " alice").is_err());
        assert!(check_id("id", "a\u{0}b").is_err());
        assert!(check_id("id", &"x".repeat(MAX_ID_BYTES)).is_ok());
        assert!(check_id("id", &"x".repeat(MAX_ID_BYTES + 1)).is_err());
    }

    #[test]
    fn ids_that_look_alike_are_one_and_hidden_characters_are_refused() {
        assert_eq!(normalize_id("id", "e\u{301}"), Ok("\u{e9}".to_owned()));
        assert_eq!(normalize_id("id", "\u{e9}"), Ok("\u{e9}".to_owned()));
        for (hidden, named) in [
            ("bob\u{200B}", "U+200B"),
            ("\u{202E}bob", "U+202E"),
            ("b\u{2066}ob", "U+2066"),
            ("bo\u{FEFF}b", "U+FEFF"),
            ("b\u{61C}ob", "U+061C"),
            ("b\u{AD}ob", "U+00AD"),
        ] {
            let refused = normalize_id("user", hidden).expect_err(hidden);
            assert!(refused.0.contains(named), "{refused}");
        }
        // The length is the normalised one's.
        assert!(normalize_id("id", &"e\u{301}".repeat(MAX_ID_BYTES / 2)).is_ok());
        assert!(normalize_id("id", " bob").is_err());
    }

    #[test]
    fn a_kept_id_is_one_the_api_would_have_kept() {
        assert_eq!(check_kept_id("id", "\u{e9}"), Ok(()));
        let decomposed = check_kept_id("id", "e\u{301}").expect_err("not NFC");
        assert!(decomposed.0.contains("NFC"), "{decomposed}");
        let hidden = check_kept_id("id", "bob\u{200B}").expect_err("hidden");
        assert!(hidden.0.contains("U+200B"), "{hidden}");
        assert!(check_kept_id("id", &"x".repeat(MAX_ID_BYTES + 1)).is_err());
    }

    #[test]
    fn page_sizes() {
        assert_eq!(page_size("first", None), Ok(DEFAULT_PAGE));
        assert_eq!(page_size("first", Some(100)), Ok(100));
        assert!(page_size("first", Some(101)).is_err());
        assert!(page_size("first", Some(-1)).is_err());
    }
}
