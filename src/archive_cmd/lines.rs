//! The lines of an archive: first the deployment's cursor key where it has
//! one (a secret: see docs/export-import.md), then each a [`Record`], and
//! last the end line, which counts the records before it, so that an
//! archive cut short at a line's end is told from a whole one. A line is read up to [`MAX_LINE_BYTES`]
//! and no further: a longer one is refused by its number without being
//! held.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::store::{ErrorKind, Record, StoreError, StoreResult};

/// The longest line an import reads: 16 MiB. No record comes near it:
/// MongoDB keeps no document over 16 MiB, and the largest records are far
/// smaller — an action is made from one request (at most 1 MiB) and its
/// copied names (1 KiB each); a webhook delivery carries such an action's
/// event as an escaped string (a few times that at worst); a notice group
/// keeps at most 200 members and an inbox at most 500 mutes. Sixteen times
/// the largest request leaves room for all of it, and bounds what one bad
/// line can cost an import's memory.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A line's meaning.
// Unboxed as `Record` is: a line lives one at a time.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    Record(Record),
    /// The secret the exporting deployment sealed its cursors with.
    CursorKey {
        secret: Vec<u8>,
    },
    /// The end of the archive, after `records` records.
    End {
        records: u64,
    },
}

/// The lines that are not records, as written:
/// `{"record":"cursorKey","secret":"…"}` (URL-safe base64) and
/// `{"record":"end","records":N}`.
#[derive(Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "camelCase", deny_unknown_fields)]
enum OtherLine {
    CursorKey { secret: String },
    End { records: u64 },
}

/// The cursor key line of an archive, with its newline.
pub fn cursor_key_line(secret: &[u8]) -> StoreResult<Vec<u8>> {
    use base64::Engine;
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    let mut line = serde_json::to_vec(&OtherLine::CursorKey { secret })
        .map_err(|e| StoreError::internal("cannot encode the cursor key line", e))?;
    line.push(b'\n');
    Ok(line)
}

/// The end line of an archive of `records` records, with its newline.
pub fn end_line(records: u64) -> StoreResult<Vec<u8>> {
    let mut line = serde_json::to_vec(&OtherLine::End { records })
        .map_err(|e| StoreError::internal("cannot encode the end line", e))?;
    line.push(b'\n');
    Ok(line)
}

/// Reads one line of an archive: a record, checked as the API checks
/// input, or the end line.
pub fn parse_line(line: &str, number: u64) -> StoreResult<Line> {
    let err = match serde_json::from_str::<Record>(line) {
        Ok(record) => {
            record
                .check()
                .map_err(|e| StoreError::invalid(format!("line {number}: {e}")))?;
            return Ok(Line::Record(record));
        }
        Err(err) => err,
    };
    match serde_json::from_str(line) {
        Ok(OtherLine::End { records }) => return Ok(Line::End { records }),
        Ok(OtherLine::CursorKey { secret }) => {
            use base64::Engine;
            return match base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&secret) {
                Ok(secret) if !secret.is_empty() && secret.len() <= 1024 => {
                    Ok(Line::CursorKey { secret })
                }
                _ => Err(StoreError::invalid(format!(
                    "line {number}: the cursor key is not 1 to 1024 bytes of URL-safe base64 \
                     without padding"
                ))),
            };
        }
        Err(_) => {}
    }
    // serde_json ends its message with the position in the text it was
    // given, which is this one line: say the file's line and the column.
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let cause = text.strip_suffix(&suffix).unwrap_or(&text);
    let cut = match err.classify() {
        serde_json::error::Category::Eof => {
            " (the line stops mid-record: the archive was cut short)"
        }
        _ => "",
    };
    Err(StoreError::invalid(format!(
        "line {number}, column {}: not a record: {cause}{cut}",
        err.column()
    )))
}

/// The lines of an input, numbered from 1, each at most [`MAX_LINE_BYTES`].
pub struct Lines<R> {
    input: R,
    line: Vec<u8>,
    number: u64,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    pub fn new(input: R) -> Self {
        Self {
            input,
            line: Vec::new(),
            number: 0,
        }
    }

    /// The number of the last line read (0 before the first).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The next line's number and text, without its line break; `None` at
    /// the end. A line past [`MAX_LINE_BYTES`] is an error as soon as that
    /// many bytes of it are read, and reading stops there.
    pub async fn next_line(&mut self) -> StoreResult<Option<(u64, &str)>> {
        self.line.clear();
        let number = self.number + 1;
        loop {
            let available = self.input.fill_buf().await.map_err(|e| {
                StoreError::from_source(
                    ErrorKind::Unavailable,
                    format!("line {number}: cannot read it"),
                    e,
                )
            })?;
            if available.is_empty() {
                if self.line.is_empty() {
                    return Ok(None);
                }
                break;
            }
            let (take, done) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (at, true),
                None => (available.len(), false),
            };
            if self.line.len() + take > MAX_LINE_BYTES {
                return Err(StoreError::invalid(format!(
                    "line {number} is longer than {} MiB, the longest line an import reads \
                     (no record is that long); it was not read further",
                    MAX_LINE_BYTES >> 20
                )));
            }
            self.line.extend_from_slice(&available[..take]);
            self.input.consume(take + usize::from(done));
            if done {
                break;
            }
        }
        self.number = number;
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        std::str::from_utf8(&self.line)
            .map(|line| Some((number, line)))
            .map_err(|e| StoreError::invalid(format!("line {number}: not UTF-8 text: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_numbered_and_bounded() {
        let text = b"one\r\n\ntwo\nthree".as_slice();
        let mut lines = Lines::new(text);
        let mut read = Vec::new();
        while let Some((_, line)) = lines.next_line().await.expect("read") {
            read.push(line.to_owned());
        }
        assert_eq!(read, ["one", "", "two", "three"]);
        assert_eq!(lines.number(), 4);

        let long = [b"short\n".as_slice(), &vec![b'x'; MAX_LINE_BYTES + 1]].concat();
        let mut lines = Lines::new(tokio::io::BufReader::with_capacity(4096, &long[..]));
        assert_eq!(lines.next_line().await.expect("read"), Some((1, "short")));
        let err = lines.next_line().await.expect_err("too long");
        assert!(
            err.message.starts_with("line 2 is longer than 16 MiB"),
            "{err}"
        );
    }

    #[test]
    fn the_end_line_is_not_a_record() {
        let end = end_line(3).expect("encodes");
        assert_eq!(end, b"{\"record\":\"end\",\"records\":3}\n");
        let text = std::str::from_utf8(&end).expect("text").trim_end();
        assert_eq!(
            parse_line(text, 9).expect("parses"),
            Line::End { records: 3 }
        );
        let cut = parse_line("{\"record\":\"user\",\"tenant\":\"a", 4).expect_err("cut");
        assert!(cut.message.contains("line 4"), "{cut}");
        assert!(cut.message.contains("cut short"), "{cut}");
    }
}
