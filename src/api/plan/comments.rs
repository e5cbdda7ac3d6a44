//! An action's comments, planned: `Action.comments(first:, after:)`
//! wherever an action is written, read as rows below the page (see
//! [`Below`](super::below::Below)). The values come from the same functions the async-graphql
//! resolvers call.

use async_graphql::parser::types::SelectionSet;

use super::below::PageOf;
use super::compile::{
    arg, ActionField, Arg, Compiler, Fields, Occurrences, PageInfoField, UserField,
};
use super::notices::only;
use super::run::{page_info, Out, Run};
use crate::api::comments::CommentNode;
use crate::api::types::ActionNode;

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

    pub(super) fn comment(&self, sets: &[&'a SelectionSet]) -> Option<Fields<CommentField>> {
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
        let (Ok(first), Ok(after)) = (self.bind.int(first), self.bind.string(after)) else {
            self.below.cannot_bind();
            return out.null();
        };
        let page = PageOf {
            action: node.action.id,
            first,
            after,
        };
        let Some(c) = self.below.comments(page) else {
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

    pub(super) fn comment(&self, out: &mut Out, fields: &Fields<CommentField>, node: &CommentNode) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                CommentField::Typename => out.string("Comment"),
                CommentField::Id => out.id(&node.global_id()),
                CommentField::CommentId => out.id(&node.own_id()),
                CommentField::ActionId => out.id(&node.own_action_id()),
                CommentField::Author(fields) => self.user_by_id(out, fields, &node.0.author_id),
                CommentField::AuthorId => out.string(&node.0.author_id),
                CommentField::Text => out.string(&node.0.text),
                CommentField::Created => out.time(&node.created_at()),
            }
        }
        out.close();
    }
}
