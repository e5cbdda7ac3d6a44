//! An action's comments, planned: `Action.comments(first:, after:)`
//! wherever an action is written. The rows below a page (its actions'
//! comments and their authors) are read after the page and before it is
//! written: a first pass over the page writes nowhere and notes each page
//! of comments it meets, those are read together, then the page is
//! written from them. The values come from the same functions the
//! async-graphql resolvers call.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use async_graphql::parser::types::SelectionSet;
use futures_util::future::join_all;

use super::compile::{
    arg, ActionField, Arg, Compiler, Fields, Occurrences, PageInfoField, UserField,
};
use super::notices::only;
use super::run::{page_info, user, Fallback, Out, Run};
use crate::api::comments::{comments_page, CommentConnection, CommentNode};
use crate::api::query::users_by_id;
use crate::api::types::{ActionNode, UserNode};
use crate::api::{AppState, Session};
use crate::model::ObjectId;

#[derive(Debug)]
pub enum CommentsField {
    Typename,
    Edges(Fields<CommentEdgeField>),
    Nodes(Fields<CommentField>),
    PageInfo(Fields<PageInfoField>),
}

#[derive(Debug)]
pub enum CommentEdgeField {
    Typename,
    Cursor,
    Node(Fields<CommentField>),
}

#[derive(Debug)]
pub enum CommentField {
    Typename,
    Id,
    CommentId,
    ActionId,
    Author(Fields<UserField>),
    AuthorId,
    Text,
    Created,
}

impl<'a> Compiler<'a> {
    /// `Action.comments(first:, after:)`.
    pub(super) fn comments(&self, occ: &Occurrences<'a>) -> Option<ActionField> {
        if !only(occ, &["first", "after"]) {
            return None;
        }
        let fields = self.object(
            &Self::subsets(occ),
            "CommentConnection",
            |this, name, occ| match name {
                "__typename" => Some(CommentsField::Typename),
                "edges" => Some(CommentsField::Edges(
                    this.comment_edge(&Self::subsets(occ))?,
                )),
                "nodes" => Some(CommentsField::Nodes(this.comment(&Self::subsets(occ))?)),
                "pageInfo" => Some(CommentsField::PageInfo(
                    this.page_info(&Self::subsets(occ))?,
                )),
                _ => None,
            },
        )?;
        self.reads_below();
        Some(ActionField::Comments {
            first: arg(occ[0], "first"),
            after: arg(occ[0], "after"),
            fields,
        })
    }

    fn comment_edge(&self, sets: &[&'a SelectionSet]) -> Option<Fields<CommentEdgeField>> {
        self.object(sets, "CommentEdge", |this, name, occ| match name {
            "__typename" => Some(CommentEdgeField::Typename),
            "cursor" => Self::leaf(occ, CommentEdgeField::Cursor),
            "node" => Some(CommentEdgeField::Node(this.comment(&Self::subsets(occ))?)),
            _ => None,
        })
    }

    fn comment(&self, sets: &[&'a SelectionSet]) -> Option<Fields<CommentField>> {
        self.object(sets, "Comment", |this, name, occ| match name {
            "__typename" => Some(CommentField::Typename),
            "id" => Self::leaf(occ, CommentField::Id),
            "commentId" => Self::leaf(occ, CommentField::CommentId),
            "actionId" => Self::leaf(occ, CommentField::ActionId),
            "author" => Self::leaf(occ, ())
                .and_then(|()| this.user(&Self::subsets(occ)))
                .map(CommentField::Author),
            "authorId" => Self::leaf(occ, CommentField::AuthorId),
            "text" => Self::leaf(occ, CommentField::Text),
            "created" => Self::leaf(occ, CommentField::Created),
            _ => None,
        })
    }
}

/// One page of one action's comments, by its arguments as bound.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct PageOf {
    action: ObjectId,
    first: Option<i32>,
    after: Option<String>,
}

/// What is below a page's rows: noted by a first pass over the page, then
/// read, then written from.
#[derive(Default)]
pub(super) struct Below {
    /// The first pass: note what is met, write nothing of it.
    noting: bool,
    noted: RefCell<Vec<PageOf>>,
    authors_wanted: Cell<bool>,
    /// An argument that does not bind, or a page not read: async-graphql
    /// answers the request.
    fell_back: Cell<bool>,
    pages: HashMap<PageOf, CommentConnection>,
    authors: HashMap<String, UserNode>,
}

impl Below {
    pub(super) fn noting() -> Self {
        Below {
            noting: true,
            ..Below::default()
        }
    }

    pub(super) fn fell_back(&self) -> bool {
        self.fell_back.get()
    }

    /// Reads what the first pass noted: every page of comments at once,
    /// then their authors in one load. A failure is a nested field's
    /// error, which async-graphql places: it answers the request instead.
    pub(super) async fn read(self, state: &AppState, session: &Session) -> Result<Below, Fallback> {
        if self.fell_back.get() {
            return Err(Fallback);
        }
        let viewer = session.viewer().map_err(|_| Fallback)?;
        let mut noted = self.noted.into_inner();
        noted.sort_by(|a, b| (a.action, a.first, &a.after).cmp(&(b.action, b.first, &b.after)));
        noted.dedup();
        let read =
            join_all(noted.iter().map(|page| {
                comments_page(state, viewer, page.action, page.first, page.after.clone())
            }))
            .await;
        let mut pages = HashMap::with_capacity(noted.len());
        for (page, connection) in noted.into_iter().zip(read) {
            pages.insert(page, connection.map_err(|_| Fallback)?);
        }
        let mut ids: Vec<String> = Vec::new();
        if self.authors_wanted.get() {
            for connection in pages.values() {
                ids.extend(connection.edges.iter().map(|e| e.node.0.author_id.clone()));
            }
            ids.sort_unstable();
            ids.dedup();
        }
        let authors = users_by_id(state, viewer, &ids)
            .await
            .map_err(|_| Fallback)?;
        Ok(Below {
            pages,
            authors,
            ..Below::default()
        })
    }
}

impl Run<'_> {
    /// An action's `comments`: noted on the first pass, written on the
    /// second.
    pub(super) fn comments(
        &self,
        out: &mut Out,
        (first, after): (&Arg, &Arg),
        fields: &Fields<CommentsField>,
        node: &ActionNode,
    ) {
        let below = self.below;
        let (Ok(first), Ok(after)) = (self.bind.int(first), self.bind.string(after)) else {
            below.fell_back.set(true);
            return out.null();
        };
        let page = PageOf {
            action: node.action.id,
            first,
            after,
        };
        if below.noting {
            below.noted.borrow_mut().push(page);
            below
                .authors_wanted
                .set(below.authors_wanted.get() || asks_authors(fields));
            return out.null();
        }
        let Some(c) = below.pages.get(&page) else {
            below.fell_back.set(true);
            return out.null();
        };
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                CommentsField::Typename => out.string("CommentConnection"),
                CommentsField::Edges(edge_fields) => out.list(&c.edges, |out, edge| {
                    out.open();
                    for e in edge_fields {
                        out.key(&e.key);
                        match &e.kind {
                            CommentEdgeField::Typename => out.string("CommentEdge"),
                            CommentEdgeField::Cursor => {
                                out.string(&edge.cursor.seal(&self.state.cursors))
                            }
                            CommentEdgeField::Node(comment) => {
                                self.comment(out, comment, &edge.node)
                            }
                        }
                    }
                    out.close();
                }),
                CommentsField::Nodes(comment) => {
                    out.list(&c.edges, |out, edge| self.comment(out, comment, &edge.node))
                }
                CommentsField::PageInfo(page) => page_info(out, page, &c.page_info),
            }
        }
        out.close();
    }

    fn comment(&self, out: &mut Out, fields: &Fields<CommentField>, node: &CommentNode) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                CommentField::Typename => out.string("Comment"),
                CommentField::Id => out.id(&node.global_id()),
                CommentField::CommentId => out.id(&node.own_id()),
                CommentField::ActionId => out.id(&node.own_action_id()),
                CommentField::Author(fields) => {
                    let id = &node.0.author_id;
                    match self.below.authors.get(id) {
                        Some(found) => user(out, fields, found),
                        None => user(out, fields, &UserNode::found(id, None)),
                    }
                }
                CommentField::AuthorId => out.string(&node.0.author_id),
                CommentField::Text => out.string(&node.0.text),
                CommentField::Created => out.time(&node.created_at()),
            }
        }
        out.close();
    }
}

/// Whether a page of comments shows their authors.
fn asks_authors(fields: &Fields<CommentsField>) -> bool {
    let in_comment = |fields: &Fields<CommentField>| {
        fields
            .iter()
            .any(|f| matches!(f.kind, CommentField::Author(_)))
    };
    fields.iter().any(|f| match &f.kind {
        CommentsField::Nodes(comment) => in_comment(comment),
        CommentsField::Edges(edge) => edge.iter().any(|e| match &e.kind {
            CommentEdgeField::Node(comment) => in_comment(comment),
            _ => false,
        }),
        _ => false,
    })
}
