//! What every planned write needs: the request, its bound arguments and
//! the rows below its page ([`Run`]), and the passes that read those rows
//! before the page is written ([`Write`]).

use super::below::Below;
use super::bind::{Bind, Fallback};
use super::out::Out;
use crate::api::cursor::LazyCursor;
use crate::api::{AppState, Session, Viewer};

/// Writes a root field's value from what was read for it.
pub(super) struct Write<'a> {
    pub(super) state: &'a AppState,
    pub(super) session: &'a Session,
    pub(super) bind: &'a Bind<'a>,
}

impl Write<'_> {
    /// Writes with `write`; when the plan reads rows below a page's, a
    /// first pass writes nowhere and notes what it meets, that is read,
    /// and the second pass writes.
    pub(super) async fn of<R>(
        &self,
        out: &mut Out,
        write: impl Fn(&Run, &mut Out) -> R,
    ) -> Result<R, Fallback> {
        let mut below = Below::default();
        if self.bind.scope.below {
            below
                .read_with(self.state, self.session, |below| {
                    write(&self.run(below), &mut Out::default());
                })
                .await?;
        }
        let written = write(&self.run(&below), out);
        if below.fell_back() {
            return Err(Fallback);
        }
        Ok(written)
    }

    pub(super) fn run<'b>(&'b self, below: &'b Below) -> Run<'b> {
        Run {
            state: self.state,
            session: self.session,
            bind: self.bind,
            below,
        }
    }
}

/// What writing a page needs besides the page.
pub(super) struct Run<'a> {
    pub(super) state: &'a AppState,
    pub(super) session: &'a Session,
    pub(super) bind: &'a Bind<'a>,
    pub(super) below: &'a Below,
}

impl Run<'_> {
    pub(super) fn viewer(&self) -> Option<&Viewer> {
        self.session.viewer().ok()
    }

    /// A cursor, sealed; a pass that writes nowhere spends no sealing on it.
    pub(super) fn cursor(&self, out: &mut Out, cursor: &LazyCursor) {
        if self.below.noting() {
            return out.null();
        }
        out.string(&cursor.seal(&self.state.cursors));
    }
}
