//! The home feed in groups, planned: `aggregatedFeed` compiled into the
//! groups' fields and run with the page read once (its items' actions
//! loaded with what the plan shows of them) and one load of the actors
//! the groups list, then written from the rows. The values come from the
//! same functions the async-graphql resolvers call.

use std::collections::HashMap;

use async_graphql::parser::types::SelectionSet;

use super::actions::{action_needs, ItemField};
use super::bind::{Bind, Fallback};
use super::compile::{arg, only, Arg, Compiler, Fields, Occurrences};
use super::connection::{node_fields, Connection, Names};
use super::out::Out;
use super::run::Run;
use super::users::UserField;
use crate::api::aggregate::{aggregated_page, FeedItemGroupConnection, FeedItemGroupNode};
use crate::api::cost::bounded_first;
use crate::api::feed::Needs;
use crate::api::query::users_by_id;
use crate::api::types::UserNode;
use crate::api::{AppState, Session};
use crate::model::limits::{DEFAULT_PAGE, MAX_PAGE};

/// Actors a group lists when `actors` names no `first`.
const ACTORS_BY_DEFAULT: i32 = 3;

#[derive(Debug)]
pub struct GroupsArgs {
    pub first: Arg,
    pub after: Arg,
}

/// The connection of groups and its edges.
const GROUPS: Names = ("FeedItemGroupConnection", "FeedItemGroupEdge");

#[derive(Debug)]
pub enum ItemGroupField {
    Typename,
    Key,
    Verb,
    Items {
        first: Arg,
        fields: Fields<ItemField>,
    },
    Count,
    Actors {
        first: Arg,
        fields: Fields<UserField>,
    },
    ActorCount,
    LastAt,
    FirstAt,
    ActionIds,
}

/// `aggregatedFeed`, planned.
#[derive(Debug)]
pub struct Aggregated {
    pub args: GroupsArgs,
    pub fields: Fields<Connection<Fields<ItemGroupField>>>,
}

impl<'a> Compiler<'a> {
    /// `aggregatedFeed(first:, after:)`.
    pub(super) fn aggregated(&self, occ: &Occurrences<'a>) -> Option<Aggregated> {
        if !only(occ, &["first", "after"]) {
            return None;
        }
        let args = GroupsArgs {
            first: arg(occ[0], "first"),
            after: arg(occ[0], "after"),
        };
        let fields = self.plain_connection(&Self::subsets(occ), GROUPS, |this, sets| {
            this.item_group(sets)
        })?;
        Some(Aggregated { args, fields })
    }

    fn item_group(&self, sets: &[&'a SelectionSet]) -> Option<Fields<ItemGroupField>> {
        self.object(sets, "FeedItemGroup", |this, name, occ| match name {
            "__typename" => Some(ItemGroupField::Typename),
            "key" => Self::leaf(occ, ItemGroupField::Key),
            "verb" => Self::leaf(occ, ItemGroupField::Verb),
            "items" if only(occ, &["first"]) => Some(ItemGroupField::Items {
                first: arg(occ[0], "first"),
                fields: this.item(&Self::subsets(occ))?,
            }),
            "count" => Self::leaf(occ, ItemGroupField::Count),
            "actors" if only(occ, &["first"]) => Some(ItemGroupField::Actors {
                first: arg(occ[0], "first"),
                fields: this.user(&Self::subsets(occ))?,
            }),
            "actorCount" => Self::leaf(occ, ItemGroupField::ActorCount),
            "lastAt" => Self::leaf(occ, ItemGroupField::LastAt),
            "firstAt" => Self::leaf(occ, ItemGroupField::FirstAt),
            "actionIds" => Self::leaf(occ, ItemGroupField::ActionIds),
            _ => None,
        })
    }
}

/// What the groups of a page ask for beyond the groups.
#[derive(Default)]
struct Wants {
    /// The most actors any `actors(first:)` lists, if any does.
    actors: Option<i32>,
    /// What the items' actions need loaded with them.
    needs: Needs,
}

impl Wants {
    /// What `fields` ask of each group; an argument that would be an error
    /// leaves the request to async-graphql, which says where.
    fn of(
        bind: &Bind<'_>,
        fields: &Fields<ItemGroupField>,
        wants: &mut Wants,
    ) -> Result<(), Fallback> {
        for f in fields {
            match &f.kind {
                ItemGroupField::Items { first, fields } => {
                    bounded_first(bind.int(first)?, DEFAULT_PAGE, MAX_PAGE)
                        .map_err(|_| Fallback)?;
                    for i in fields {
                        if let ItemField::Action(action) = &i.kind {
                            action_needs(action, &mut wants.needs);
                        }
                    }
                }
                ItemGroupField::Actors { first, .. } => {
                    let first = bind.int(first)?.unwrap_or(ACTORS_BY_DEFAULT);
                    bounded_first(Some(first), 3, MAX_PAGE).map_err(|_| Fallback)?;
                    wants.actors = Some(wants.actors.map_or(first, |most| most.max(first)));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The page of groups and the profiles of the actors they list.
pub(super) type Read = (FeedItemGroupConnection, HashMap<String, UserNode>);

/// Reads the page `aggregatedFeed` asks for and the actors it lists;
/// `Ok(Err)` is the field's own error.
pub(super) async fn read(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    args: &GroupsArgs,
    fields: &Fields<Connection<Fields<ItemGroupField>>>,
) -> Result<async_graphql::Result<Read>, Fallback> {
    let (first, after) = (bind.int(&args.first)?, bind.string(&args.after)?);
    let mut wants = Wants::default();
    for group in node_fields(fields) {
        Wants::of(bind, group, &mut wants)?;
    }
    let viewer = match session.viewer() {
        Ok(viewer) => viewer,
        Err(err) => return Ok(Err(err)),
    };
    let connection = match aggregated_page(state, viewer, first, after, wants.needs).await {
        Ok(connection) => connection,
        Err(err) => return Ok(Err(err)),
    };
    let mut ids: Vec<String> = Vec::new();
    if let Some(most) = wants.actors {
        for edge in &connection.edges {
            let listed = edge.node.actor_ids(most).map_err(|_| Fallback)?;
            ids.extend(listed.into_iter().map(str::to_owned));
        }
    }
    ids.sort_unstable();
    ids.dedup();
    // A failed load below is a nested field's error, which async-graphql
    // places: it answers the request instead.
    let users = users_by_id(state, viewer, &ids)
        .await
        .map_err(|_| Fallback)?;
    Ok(Ok((connection, users)))
}

impl Run<'_> {
    pub(super) fn groups(
        &self,
        out: &mut Out,
        fields: &Fields<Connection<Fields<ItemGroupField>>>,
        (c, users): &Read,
    ) {
        self.plain_connection(
            out,
            fields,
            GROUPS,
            (&c.edges, &c.page_info),
            |out, group, edge| self.item_group(out, group, &edge.node, users),
        );
    }

    fn item_group(
        &self,
        out: &mut Out,
        fields: &Fields<ItemGroupField>,
        node: &FeedItemGroupNode,
        users: &HashMap<String, UserNode>,
    ) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                ItemGroupField::Typename => out.string("FeedItemGroup"),
                ItemGroupField::Key => out.string(node.shared_key()),
                ItemGroupField::Verb => out.opt_string(node.descriptor_type()),
                ItemGroupField::Items { first, fields } => {
                    // Bound when the page was read: the same values again.
                    let first = self.bind.int(first).ok().flatten();
                    let items = node.first_items(first).unwrap_or_default();
                    out.list(items, |out, item| self.item(out, fields, item));
                }
                ItemGroupField::Count => out.number(node.size() as u64),
                ItemGroupField::Actors { first, fields } => {
                    let first = self
                        .bind
                        .int(first)
                        .ok()
                        .flatten()
                        .unwrap_or(ACTORS_BY_DEFAULT);
                    let ids = node.actor_ids(first).unwrap_or_default();
                    out.list(&ids, |out, id| match users.get(*id) {
                        Some(found) => self.user(out, fields, found),
                        None => self.user(out, fields, &UserNode::found(id, None)),
                    });
                }
                ItemGroupField::ActorCount => out.number(node.actors_counted() as u64),
                ItemGroupField::LastAt => match node.newest_time() {
                    Some(at) => out.time(&at),
                    None => out.null(),
                },
                ItemGroupField::FirstAt => match node.oldest_time() {
                    Some(at) => out.time(&at),
                    None => out.null(),
                },
                ItemGroupField::ActionIds => {
                    out.list(&node.item_action_ids(), |out, id| out.id(id))
                }
            }
        }
        out.close();
    }
}
