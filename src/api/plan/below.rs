//! Rows below a page: what a page's rows lead to beyond the page itself
//! (an action's comments and fan-out lease, a comment's author, a user's
//! followers, groups, supervisor and assignments, a webhook's deliveries). They are read after the page and before it
//! is written: a pass over the page writes nowhere and notes each row it
//! meets that is not read yet; those are read, each kind together, and the
//! next pass goes one level further down, until a pass meets nothing new.
//! Then the page is written from the rows.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::Hash;

use futures_util::future::join_all;

use super::bind::Fallback;
use crate::api::comments::{comments_page, CommentConnection};
use crate::api::deliveries::{page as deliveries_page, DeliveryState, WebhookDeliveryConnection};
use crate::api::query::users_by_id;
use crate::api::types::{fan_out_lease, UserConnection, UserNode};
use crate::api::user_node::{assignments_of, groups_of, neighbours_page, supervisor_of, UserList};
use crate::api::{AppState, Session};
use crate::model::{Action, FanOutState, Membership, ObjectId};
use crate::store::Held;

/// Passes over a page before it is written at most: levels of rows below
/// it. A document deeper than this runs on async-graphql.
pub(super) const PASSES: usize = 8;

/// One page of one action's comments, by its arguments as bound.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PageOf {
    pub action: ObjectId,
    pub first: Option<i32>,
    pub after: Option<String>,
}

/// One page of one user's list of users, by its arguments as bound.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct UsersOf {
    pub user: String,
    pub list: UserList,
    pub first: Option<i32>,
    pub after: Option<String>,
}

/// One page of one webhook's deliveries, by its arguments as bound.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct DeliveriesOf {
    pub webhook: String,
    pub state: DeliveryState,
    pub first: Option<i32>,
    pub after: Option<String>,
}

/// The rows below a page, as read so far.
#[derive(Default)]
pub(super) struct Below {
    /// A pass that notes what is missing (else: the page is written, and
    /// anything missing sends the request to async-graphql).
    noting: Cell<bool>,
    missing: RefCell<Missing>,
    /// An argument that does not bind, or a row not read: async-graphql
    /// answers the request.
    fell_back: Cell<bool>,
    comments: HashMap<PageOf, CommentConnection>,
    users: HashMap<String, UserNode>,
    lists: HashMap<UsersOf, UserConnection>,
    supervisors: HashMap<String, Option<String>>,
    assignments: HashMap<String, Vec<String>>,
    groups: HashMap<String, Vec<Membership>>,
    /// Fan-out leases, by action.
    leases: HashMap<ObjectId, Option<Held>>,
    deliveries: HashMap<DeliveriesOf, WebhookDeliveryConnection>,
}

/// What a pass met and found no row for, by kind.
#[derive(Default)]
struct Missing {
    comments: Vec<PageOf>,
    users: Vec<String>,
    lists: Vec<UsersOf>,
    supervisors: Vec<String>,
    assignments: Vec<String>,
    groups: Vec<String>,
    /// Actions whose fan-out lease is read, with their state.
    leases: Vec<(ObjectId, FanOutState)>,
    deliveries: Vec<DeliveriesOf>,
}

impl Missing {
    fn is_empty(&self) -> bool {
        self.comments.is_empty()
            && self.users.is_empty()
            && self.lists.is_empty()
            && self.supervisors.is_empty()
            && self.assignments.is_empty()
            && self.groups.is_empty()
            && self.leases.is_empty()
            && self.deliveries.is_empty()
    }
}

/// The row under `key`, or a note that it is missing.
fn find<'a, K: Hash + Eq + Clone, V>(
    below: &Below,
    rows: &'a HashMap<K, V>,
    key: &K,
    missing: impl FnOnce(&mut Missing) -> &mut Vec<K>,
) -> Option<&'a V> {
    find_noting(below, rows, key, |m| missing(m).push(key.clone()))
}

/// The row under `key`; when it is missing, `note` says so on a noting
/// pass, and anywhere else the request falls back.
fn find_noting<'a, K: Hash + Eq, V>(
    below: &Below,
    rows: &'a HashMap<K, V>,
    key: &K,
    note: impl FnOnce(&mut Missing),
) -> Option<&'a V> {
    let found = rows.get(key);
    if found.is_none() {
        if below.noting.get() {
            note(&mut below.missing.borrow_mut());
        } else {
            below.fell_back.set(true);
        }
    }
    found
}

impl Below {
    /// Whether this is a pass that writes nowhere.
    pub(super) fn noting(&self) -> bool {
        self.noting.get()
    }

    pub(super) fn fell_back(&self) -> bool {
        self.fell_back.get()
    }

    /// An argument below the page that does not bind as async-graphql would
    /// take it.
    pub(super) fn cannot_bind(&self) {
        self.fell_back.set(true);
    }

    pub(super) fn comments(&self, page: PageOf) -> Option<&CommentConnection> {
        find(self, &self.comments, &page, |m| &mut m.comments)
    }

    pub(super) fn user(&self, id: &str) -> Option<&UserNode> {
        find(self, &self.users, &id.to_owned(), |m| &mut m.users)
    }

    pub(super) fn list(&self, page: UsersOf) -> Option<&UserConnection> {
        find(self, &self.lists, &page, |m| &mut m.lists)
    }

    pub(super) fn supervisor(&self, of: &str) -> Option<&Option<String>> {
        find(self, &self.supervisors, &of.to_owned(), |m| {
            &mut m.supervisors
        })
    }

    pub(super) fn assignments(&self, of: &str) -> Option<&Vec<String>> {
        find(self, &self.assignments, &of.to_owned(), |m| {
            &mut m.assignments
        })
    }

    pub(super) fn groups(&self, of: &str) -> Option<&Vec<Membership>> {
        find(self, &self.groups, &of.to_owned(), |m| &mut m.groups)
    }

    pub(super) fn deliveries(&self, page: DeliveriesOf) -> Option<&WebhookDeliveryConnection> {
        find(self, &self.deliveries, &page, |m| &mut m.deliveries)
    }

    /// The lease of `action`'s fan-out, noted with the state it is read
    /// by.
    pub(super) fn lease(&self, action: &Action) -> Option<&Option<Held>> {
        find_noting(self, &self.leases, &action.id, |m| {
            m.leases.push((action.id, action.fan_out.state))
        })
    }

    /// Passes over the page with `pass` (which writes nowhere) until one
    /// meets nothing missing, reading what each met.
    pub(super) async fn read_with(
        &mut self,
        state: &AppState,
        session: &Session,
        pass: impl Fn(&Below),
    ) -> Result<(), Fallback> {
        self.noting.set(true);
        for _ in 0..PASSES {
            pass(self);
            if self.fell_back.get() {
                return Err(Fallback);
            }
            let missing = self.missing.take();
            if missing.is_empty() {
                break;
            }
            self.read(state, session, missing).await?;
        }
        self.noting.set(false);
        Ok(())
    }

    /// Reads what a pass met: each kind of row in one call, or in calls
    /// made together. A failure is a nested field's error, which
    /// async-graphql places: it answers the request instead.
    async fn read(
        &mut self,
        state: &AppState,
        session: &Session,
        mut missing: Missing,
    ) -> Result<(), Fallback> {
        let viewer = session.viewer().map_err(|_| Fallback)?;
        let pages = distinct(&mut missing.comments);
        let lists = distinct(&mut missing.lists);
        let users = distinct(&mut missing.users);
        let supervisors = distinct(&mut missing.supervisors);
        let assignments = distinct(&mut missing.assignments);
        let groups = distinct(&mut missing.groups);
        missing.leases.sort_by_key(|(id, _)| *id);
        missing.leases.dedup_by_key(|(id, _)| *id);
        let leases = &missing.leases;
        let tenant = &viewer.tenant;
        let deliveries = distinct(&mut missing.deliveries);
        let (
            read_pages,
            read_lists,
            read_users,
            read_supervisors,
            read_assignments,
            read_groups,
            read_leases,
            read_deliveries,
        ) = tokio::join!(
            join_all(
                pages
                    .iter()
                    .map(|p| { comments_page(state, viewer, p.action, p.first, p.after.clone()) })
            ),
            join_all(lists.iter().map(|l| {
                neighbours_page(state, viewer, &l.user, l.list, l.first, l.after.clone())
            })),
            users_by_id(state, viewer, users),
            join_all(
                supervisors
                    .iter()
                    .map(|id| supervisor_of(state, viewer, id))
            ),
            assignments_of(state, viewer, assignments),
            join_all(groups.iter().map(|id| groups_of(state, viewer, id))),
            join_all(
                leases
                    .iter()
                    .map(|(id, fan_out)| fan_out_lease(state, tenant, *id, *fan_out))
            ),
            join_all(deliveries.iter().map(|d| {
                deliveries_page(state, viewer, &d.webhook, d.state, d.first, d.after.clone())
            })),
        );
        for (page, read) in pages.iter().zip(read_pages) {
            self.comments
                .insert(page.clone(), read.map_err(|_| Fallback)?);
        }
        for (list, read) in lists.iter().zip(read_lists) {
            self.lists.insert(list.clone(), read.map_err(|_| Fallback)?);
        }
        let mut found = read_users.map_err(|_| Fallback)?;
        for id in users {
            let node = found
                .remove(id)
                .unwrap_or_else(|| UserNode::found(id, None));
            self.users.insert(id.clone(), node);
        }
        for (id, read) in supervisors.iter().zip(read_supervisors) {
            self.supervisors
                .insert(id.clone(), read.map_err(|_| Fallback)?);
        }
        let mut assigned = read_assignments.map_err(|_| Fallback)?;
        for id in assignments {
            let refs = assigned.remove(id).unwrap_or_default();
            self.assignments.insert(id.clone(), refs);
        }
        for (id, read) in groups.iter().zip(read_groups) {
            self.groups.insert(id.clone(), read.map_err(|_| Fallback)?);
        }
        for ((id, _), read) in leases.iter().zip(read_leases) {
            self.leases.insert(*id, read.map_err(|_| Fallback)?);
        }
        for (page, read) in deliveries.iter().zip(read_deliveries) {
            self.deliveries
                .insert(page.clone(), read.map_err(|_| Fallback)?);
        }
        Ok(())
    }
}

/// The distinct keys of `keys`, in order.
fn distinct<K: Ord>(keys: &mut Vec<K>) -> &[K] {
    keys.sort();
    keys.dedup();
    keys
}
