//! Bounds on what clients may send, shared by the API and the store.

use std::fmt;

/// Longest id (user, tenant, group, ref): 256 bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Longest free text (a status, a rating text, a name): 10 KiB.
pub const MAX_TEXT_BYTES: usize = 10 * 1024;
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

/// Free text is at most 10 KiB.
pub fn check_text(field: &str, value: &str) -> Result<(), InputError> {
    if value.len() > MAX_TEXT_BYTES {
        return Err(InputError::new(format!(
            "{field} is {} bytes long; text is at most {MAX_TEXT_BYTES} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// A list of ids: at most 100, each a valid id.
pub fn check_ids(field: &str, values: &[String]) -> Result<(), InputError> {
    if values.len() > MAX_LIST_LEN {
        return Err(InputError::new(format!(
            "{field} has {} entries; at most {MAX_LIST_LEN} are allowed",
            values.len()
        )));
    }
    values.iter().try_for_each(|v| check_id(field, v))
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
    fn page_sizes() {
        assert_eq!(page_size("first", None), Ok(DEFAULT_PAGE));
        assert_eq!(page_size("first", Some(100)), Ok(100));
        assert!(page_size("first", Some(101)).is_err());
        assert!(page_size("first", Some(-1)).is_err());
    }
}
