//! The JSON a plan writes: straight into the response's buffer, escaped
//! and formatted as async-graphql's responses are.

use async_graphql::resolver_utils::EnumType;
use async_graphql::{Name, ID};
use async_graphql_value::ConstValue;
use chrono::{DateTime, Utc};

/// A JSON writer: a key writes the separator its object needs; lists
/// separate their own items.
#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
    /// Whether the next key is the first of its object.
    first: bool,
    /// Writing a template of live events: where each value that is a
    /// subscriber's own goes (its offset and its kind of hole), written
    /// by each subscriber instead ([`crate::events::shared`]).
    holes: Option<Vec<(usize, usize)>>,
}

impl Out {
    /// A writer of a template, with holes for what is each subscriber's own.
    pub(super) fn template() -> Self {
        Self {
            holes: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// The holes written, by offset and kind.
    pub(super) fn holes(&self) -> &[(usize, usize)] {
        self.holes.as_deref().unwrap_or_default()
    }

    /// A value that is each subscriber's own (of hole `kind`): written by
    /// `write`, or a hole in a template.
    pub(super) fn own(&mut self, kind: usize, write: impl FnOnce(&mut Self)) {
        match &mut self.holes {
            Some(holes) => {
                holes.push((self.buf.len(), kind));
                self.first = false;
            }
            None => write(self),
        }
    }

    pub(super) fn open(&mut self) {
        self.buf.push(b'{');
        self.first = true;
    }

    /// Ends an object; one with no field written is `null`, as async-graphql
    /// answers an object whose every field was skipped.
    pub(super) fn close(&mut self) {
        if self.first && self.buf.last() == Some(&b'{') {
            self.buf.pop();
            self.buf.extend_from_slice(b"null");
        } else {
            self.buf.push(b'}');
        }
        self.first = false;
    }

    /// Ends an object that is `{}` when empty (a descriptor's).
    pub(super) fn close_as_written(&mut self) {
        self.buf.push(b'}');
        self.first = false;
    }

    pub(super) fn key(&mut self, key: &Name) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
        // GraphQL names need no escaping.
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    pub(super) fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.buf.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            each(self, item);
        }
        self.buf.push(b']');
        self.first = false;
    }

    pub(super) fn string(&mut self, s: &str) {
        // serde_json escapes as async-graphql's responses are escaped.
        let _ = serde_json::to_writer(&mut self.buf, s);
    }

    pub(super) fn opt_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.null(),
        }
    }

    pub(super) fn id(&mut self, id: &ID) {
        self.string(id.as_str());
    }

    pub(super) fn null(&mut self) {
        self.buf.extend_from_slice(b"null");
    }

    pub(super) fn bool(&mut self, b: bool) {
        self.buf
            .extend_from_slice(if b { b"true" } else { b"false" });
    }

    pub(super) fn number(&mut self, n: u64) {
        let _ = serde_json::to_writer(&mut self.buf, &n);
    }

    /// A `DateTime` as its scalar writes it.
    pub(super) fn time(&mut self, at: &DateTime<Utc>) {
        self.string(&at.to_rfc3339());
    }

    /// An enum value by its GraphQL name.
    pub(super) fn enumerated<E: EnumType>(&mut self, value: E) {
        let name = E::items()
            .iter()
            .find(|item| item.value == value)
            .map_or("", |item| item.name);
        self.string(name);
    }

    pub(super) fn value(&mut self, value: &ConstValue) {
        let _ = serde_json::to_writer(&mut self.buf, value);
    }
}
