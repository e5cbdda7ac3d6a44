//! An action's comments, planned: `Action.comments(first:, after:)`
//! wherever an action is written, read as rows below the page (see
//! [`Below`](super::below::Below)). The values come from the same functions the async-graphql
//! resolvers call.

use async_graphql::parser::types::SelectionSet;

use super::below::PageOf;
use super::compile::{arg, only, Arg, Compiler, Fields, Occurrences};
use super::connection::{Connection, Names};
use super::out::Out;
use super::run::Run;
use super::users::UserField;
use crate::api::comments::CommentNode;
use crate::api::types::ActionNode;

const COMMENTS: Names = ("CommentConnection", "CommentEdge");

/// A page of an action's comments, as its arguments ask.
#[derive(Debug)]
pub struct CommentPage {
    pub first: Arg,
    pub after: Arg,
    pub fields: Fields<Connection<Fields<CommentField>>>,
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
    pub(super) fn comments(&self, occ: &Occurrences<'a>) -> Option<CommentPage> {
        if !only(occ, &["first", "after"]) {
            return None;
        }
        let fields = self.plain_connection(&Self::subsets(occ), COMMENTS, |this, sets| {
            this.comment(sets)
        })?;
        self.reads_below();
        Some(CommentPage {
            first: arg(occ[0], "first"),
            after: arg(occ[0], "after"),
            fields,
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
    pub(super) fn comments(&self, out: &mut Out, page: &CommentPage, node: &ActionNode) {
        let (Ok(first), Ok(after)) = (self.bind.int(&page.first), self.bind.string(&page.after))
        else {
            self.below.cannot_bind();
            return out.null();
        };
        let of = PageOf {
            action: node.action.id,
            first,
            after,
        };
        let Some(c) = self.below.comments(of) else {
            return out.null();
        };
        self.plain_connection(
            out,
            &page.fields,
            COMMENTS,
            (&c.edges, &c.page_info),
            |out, comment, edge| self.comment(out, comment, &edge.node),
        );
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
