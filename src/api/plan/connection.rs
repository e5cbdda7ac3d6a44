//! Connections, planned once for every kind: `edges` (with `cursor` and
//! `node`), `nodes`, `pageInfo`, and the fields a connection has of its own
//! (`eventsCursor`, `unseenCount`…), compiled and written the same way
//! whatever the node.

use async_graphql::parser::types::SelectionSet;

use super::compile::{Compiler, Fields, Occurrences};
use super::out::Out;
use super::run::Run;
use crate::api::page::{Cursored, PageInfo};

/// A field of a connection whose nodes are planned as `N`, with fields of
/// its own planned as `X`.
#[derive(Debug)]
pub enum Connection<N, X = NoneOwn> {
    Typename,
    Edges(Fields<Edge<N>>),
    Nodes(N),
    PageInfo(Fields<PageInfoField>),
    Own(X),
}

#[derive(Debug)]
pub enum Edge<N> {
    Typename,
    Cursor,
    Node(N),
}

/// A connection with no fields of its own.
#[derive(Debug)]
pub enum NoneOwn {}

#[derive(Debug)]
pub enum PageInfoField {
    Typename,
    HasPreviousPage,
    HasNextPage,
    StartCursor,
    EndCursor,
}

/// A connection's GraphQL type and its edges'.
pub(super) type Names = (&'static str, &'static str);

/// Every node selection of a connection's fields (`nodes`, `edges.node`).
pub(super) fn node_fields<N, X>(fields: &Fields<Connection<N, X>>) -> impl Iterator<Item = &N> {
    fields.iter().flat_map(|f| {
        let (node, edges) = match &f.kind {
            Connection::Nodes(node) => (Some(node), None),
            Connection::Edges(edges) => (None, Some(edges)),
            _ => (None, None),
        };
        node.into_iter()
            .chain(edges.into_iter().flatten().filter_map(|e| match &e.kind {
                Edge::Node(node) => Some(node),
                _ => None,
            }))
    })
}

impl<'a> Compiler<'a> {
    /// A connection's fields, its nodes planned by `node` and its own fields
    /// by `own`.
    pub(super) fn connection_of<N, X>(
        &self,
        sets: &[&'a SelectionSet],
        (connection, edge): Names,
        node: impl Fn(&Self, &[&'a SelectionSet]) -> Option<N>,
        own: impl Fn(&str, &Occurrences<'a>) -> Option<X>,
    ) -> Option<Fields<Connection<N, X>>> {
        self.object(sets, connection, |this, name, occ| match name {
            "__typename" => Some(Connection::Typename),
            "edges" => {
                let edges =
                    this.object(&Self::subsets(occ), edge, |this, name, occ| match name {
                        "__typename" => Some(Edge::Typename),
                        "cursor" => Self::leaf(occ, Edge::Cursor),
                        "node" => Some(Edge::Node(node(this, &Self::subsets(occ))?)),
                        _ => None,
                    })?;
                Some(Connection::Edges(edges))
            }
            "nodes" => Some(Connection::Nodes(node(this, &Self::subsets(occ))?)),
            "pageInfo" => Some(Connection::PageInfo(this.page_info(&Self::subsets(occ))?)),
            _ => own(name, occ).map(Connection::Own),
        })
    }

    /// A connection with no fields of its own.
    pub(super) fn plain_connection<N>(
        &self,
        sets: &[&'a SelectionSet],
        names: Names,
        node: impl Fn(&Self, &[&'a SelectionSet]) -> Option<N>,
    ) -> Option<Fields<Connection<N>>> {
        self.connection_of(sets, names, node, |_, _| None)
    }

    pub(super) fn page_info(&self, sets: &[&'a SelectionSet]) -> Option<Fields<PageInfoField>> {
        self.object(sets, "PageInfo", |_, name, occ| match name {
            "__typename" => Some(PageInfoField::Typename),
            "hasPreviousPage" => Self::leaf(occ, PageInfoField::HasPreviousPage),
            "hasNextPage" => Self::leaf(occ, PageInfoField::HasNextPage),
            "startCursor" => Self::leaf(occ, PageInfoField::StartCursor),
            "endCursor" => Self::leaf(occ, PageInfoField::EndCursor),
            _ => None,
        })
    }
}

impl Run<'_> {
    /// Writes a connection: each edge's node with `node`, its own fields
    /// with `own`.
    pub(super) fn connection_of<E: Cursored, N, X>(
        &self,
        out: &mut Out,
        fields: &Fields<Connection<N, X>>,
        (connection, edge_type): Names,
        (edges, page): (&[E], &PageInfo),
        node: impl Fn(&mut Out, &N, &E),
        own: impl Fn(&mut Out, &X),
    ) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                Connection::Typename => out.string(connection),
                Connection::Edges(edge_fields) => out.list(edges, |out, edge| {
                    out.open();
                    for e in edge_fields {
                        out.key(&e.key);
                        match &e.kind {
                            Edge::Typename => out.string(edge_type),
                            Edge::Cursor => self.cursor(out, edge.cursor()),
                            Edge::Node(fields) => node(out, fields, edge),
                        }
                    }
                    out.close();
                }),
                Connection::Nodes(fields) => out.list(edges, |out, edge| node(out, fields, edge)),
                Connection::PageInfo(fields) => page_info(out, fields, page),
                Connection::Own(fields) => own(out, fields),
            }
        }
        out.close();
    }

    /// A connection with no fields of its own.
    pub(super) fn plain_connection<E: Cursored, N>(
        &self,
        out: &mut Out,
        fields: &Fields<Connection<N>>,
        names: Names,
        page: (&[E], &PageInfo),
        node: impl Fn(&mut Out, &N, &E),
    ) {
        self.connection_of(out, fields, names, page, node, |_, own| match *own {});
    }
}

pub(super) fn page_info(out: &mut Out, fields: &Fields<PageInfoField>, page: &PageInfo) {
    out.open();
    for f in fields {
        out.key(&f.key);
        match &f.kind {
            PageInfoField::Typename => out.string("PageInfo"),
            PageInfoField::HasPreviousPage => out.bool(page.has_previous_page),
            PageInfoField::HasNextPage => out.bool(page.has_next_page),
            PageInfoField::StartCursor => out.opt_string(page.start_cursor.as_deref()),
            PageInfoField::EndCursor => out.opt_string(page.end_cursor.as_deref()),
        }
    }
    out.close();
}
