//! Where the viewer stopped reading, planned: `markers(feeds:)`, read by
//! the function its resolver calls and written from the viewer's inbox.

use super::bind::{Bind, Fallback};
use super::compile::{arg, only, Arg, Compiler, Fields, Occurrences};
use super::out::Out;
use crate::api::notifications::{self, MarkerNode};
use crate::api::{AppState, Session};
use crate::model::MarkerFeed;

#[derive(Debug)]
pub enum MarkerField {
    Typename,
    Feed,
    Cursor,
    Version,
    UpdatedAt,
}

impl<'a> Compiler<'a> {
    /// `markers(feeds:)`.
    pub(super) fn markers(&self, occ: &Occurrences<'a>) -> Option<(Arg, Fields<MarkerField>)> {
        if !only(occ, &["feeds"]) {
            return None;
        }
        let fields = self.object(&Self::subsets(occ), "Marker", |_, name, occ| match name {
            "__typename" => Some(MarkerField::Typename),
            "feed" => Self::leaf(occ, MarkerField::Feed),
            "cursor" => Self::leaf(occ, MarkerField::Cursor),
            "version" => Self::leaf(occ, MarkerField::Version),
            "updatedAt" => Self::leaf(occ, MarkerField::UpdatedAt),
            _ => None,
        })?;
        Some((arg(occ[0], "feeds"), fields))
    }
}

/// Reads the markers `feeds` asks for; `Ok(Err)` is the field's own error.
pub(super) async fn read(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    feeds: &Arg,
) -> Result<async_graphql::Result<Vec<MarkerNode>>, Fallback> {
    let feeds = bind.enums::<MarkerFeed>(feeds)?;
    Ok(async {
        let viewer = session.viewer()?;
        notifications::markers(state, viewer, feeds.as_deref()).await
    }
    .await)
}

pub(super) fn write(out: &mut Out, fields: &Fields<MarkerField>, markers: &[MarkerNode]) {
    out.list(markers, |out, marker| {
        out.open();
        for f in fields {
            out.key(&f.key);
            match f.kind {
                MarkerField::Typename => out.string("Marker"),
                MarkerField::Feed => out.enumerated(marker.feed),
                MarkerField::Cursor => out.string(&marker.cursor),
                MarkerField::Version => out.number(marker.version),
                MarkerField::UpdatedAt => out.time(&marker.updated_at),
            }
        }
        out.close();
    });
}
