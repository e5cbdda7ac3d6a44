//! The model: what the acknowledged history allows the final state to be.
//!
//! The operations on one key (a follow, a like, a membership…) come from
//! one client, one after another, so a key's final state is what its last
//! acknowledged operation made it, or, after operations cut off by a kill,
//! any of the states they may have left: the model keeps, per key, the set
//! of states the history allows. A failed operation changed nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::ops::{Entry, Op, Scope, World};

/// A membership as the history may have left it: whether the user is a
/// member, and the window (ms since the run began) in which the membership
/// began (`joinGroup` starts one; joining again while a member keeps it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub member: bool,
    pub since: Option<(u64, u64)>,
}

const OUT: Member = Member {
    member: false,
    since: None,
};

/// A scope an action may have now: its scope, its readers, and the groups a
/// group scope reaches (the actor's groups of that kind when it was set),
/// each set one possibility.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeState {
    pub scope: Scope,
    pub readers: Vec<String>,
    pub groups: Vec<BTreeSet<String>>,
}

/// The states a key may be in, after the operations on it.
fn step<T: Clone + PartialEq>(states: &mut Vec<T>, entry: &Entry, next: impl Fn(&T) -> T) {
    if entry.ok() {
        let mut after: Vec<T> = Vec::new();
        for s in states.iter() {
            let n = next(s);
            if !after.contains(&n) {
                after.push(n);
            }
        }
        *states = after;
    } else if entry.unknown() {
        for n in states.iter().map(&next).collect::<Vec<T>>() {
            if !states.contains(&n) {
                states.push(n);
            }
        }
    }
}

/// The possible final states of every key, and indexes into the history.
#[derive(Default)]
pub struct Model<'h> {
    /// Record operations by the text of their action.
    pub records: BTreeMap<String, &'h Entry>,
    /// Comment operations by their text.
    pub comments: BTreeMap<String, &'h Entry>,
    pub follows: BTreeMap<(String, String), Vec<bool>>,
    /// By user and action id.
    pub likes: BTreeMap<(String, String), Vec<bool>>,
    pub members: BTreeMap<(String, String), Vec<Member>>,
    pub supervisor: BTreeMap<String, Vec<Option<String>>>,
    pub assigned: BTreeMap<(String, String), Vec<bool>>,
    /// By user and action id.
    pub mutes: BTreeMap<(String, String), Vec<bool>>,
    /// By action text.
    pub hidden: BTreeMap<String, Vec<bool>>,
    pub deleted: BTreeMap<String, Vec<bool>>,
    pub scopes: BTreeMap<String, Vec<ScopeState>>,
    /// Every scope an action may have had, by action text: widening keeps
    /// the items its readers have (docs/feeds.md, "Scope changes").
    pub former: BTreeMap<String, Vec<ScopeState>>,
    /// Webhooks by index: whether it exists.
    pub hooks: BTreeMap<usize, Vec<bool>>,
    /// The operations that may have happened, per key, for the timing
    /// rules (mutes, likes, hides, assignments, supervisors, webhooks).
    pub touched: BTreeMap<String, Vec<&'h Entry>>,
}

/// A key of [`Model::touched`].
pub fn key(kind: &str, parts: &[&str]) -> String {
    format!("{kind}:{}", parts.join(":"))
}

impl<'h> Model<'h> {
    pub fn build(world: &World, history: &'h [Entry]) -> Model<'h> {
        let mut m = Model::default();
        for e in history {
            m.apply(world, e);
        }
        m
    }

    fn touch(&mut self, k: String, e: &'h Entry) {
        if e.may_have_happened() {
            self.touched.entry(k).or_default().push(e);
        }
    }

    /// The possible sets of `user`'s groups of `kind` now.
    fn group_sets(&self, world: &World, user: &str, kind: &str) -> Vec<BTreeSet<String>> {
        let mut sets = vec![BTreeSet::new()];
        for (group, k) in world.groups() {
            if k != kind {
                continue;
            }
            let states = self
                .members
                .get(&(user.to_owned(), group.to_owned()))
                .cloned()
                .unwrap_or_else(|| vec![OUT]);
            let (can_in, can_out) = (
                states.iter().any(|s| s.member),
                states.iter().any(|s| !s.member),
            );
            let mut next = Vec::new();
            for set in &sets {
                if can_out {
                    next.push(set.clone());
                }
                if can_in {
                    let mut with = set.clone();
                    with.insert(group.to_owned());
                    next.push(with);
                }
            }
            sets = next;
        }
        sets.dedup();
        sets
    }

    fn scope_state(
        &self,
        world: &World,
        actor: &str,
        scope: Scope,
        readers: &[String],
    ) -> ScopeState {
        ScopeState {
            scope,
            readers: readers.to_vec(),
            groups: scope
                .group_kind()
                .map(|kind| self.group_sets(world, actor, kind))
                .unwrap_or_default(),
        }
    }

    fn apply(&mut self, world: &World, e: &'h Entry) {
        let o = |s: &String| s.to_owned();
        match &e.op {
            Op::Record {
                actor,
                label,
                scope,
                readers,
                ..
            } => {
                self.records.insert(o(label), e);
                let mut sorted = readers.clone();
                sorted.sort();
                let state = self.scope_state(world, actor, *scope, &sorted);
                self.former.insert(o(label), vec![state.clone()]);
                self.scopes.insert(o(label), vec![state]);
                self.hidden.insert(o(label), vec![false]);
                self.deleted.insert(o(label), vec![false]);
            }
            Op::Comment { text, .. } => {
                self.comments.insert(o(text), e);
            }
            Op::Like { user, action } | Op::Unlike { user, action } => {
                let like = matches!(e.op, Op::Like { .. });
                let states = self
                    .likes
                    .entry((o(user), o(&action.id)))
                    .or_insert_with(|| vec![false]);
                step(states, e, |_| like);
                self.touch(key("like", &[user, &action.id]), e);
            }
            Op::Follow { user, target } | Op::Unfollow { user, target } => {
                let follow = matches!(e.op, Op::Follow { .. });
                let states = self
                    .follows
                    .entry((o(user), o(target)))
                    .or_insert_with(|| vec![false]);
                step(states, e, |_| follow);
            }
            Op::Join { user, group } | Op::Leave { user, group } => {
                let join = matches!(e.op, Op::Join { .. });
                let window = (e.sent, e.done);
                let states = self
                    .members
                    .entry((o(user), o(group)))
                    .or_insert_with(|| vec![OUT]);
                step(states, e, |s| match (join, s.member) {
                    (true, true) => s.clone(),
                    (true, false) => Member {
                        member: true,
                        since: Some(window),
                    },
                    (false, _) => OUT,
                });
                self.touch(key("member", &[user, group]), e);
            }
            Op::Hide { action } => {
                if let Some(states) = self.hidden.get_mut(&action.label) {
                    step(states, e, |_| true);
                }
                self.touch(key("hide", &[&action.label]), e);
            }
            Op::Delete { action } => {
                if let Some(states) = self.deleted.get_mut(&action.label) {
                    step(states, e, |_| true);
                }
            }
            Op::SetScope {
                action,
                scope,
                readers,
            } => {
                let mut sorted = readers.clone();
                sorted.sort();
                let state = self.scope_state(world, &action.actor, *scope, &sorted);
                if let Some(former) = self.former.get_mut(&action.label) {
                    if e.may_have_happened() {
                        former.push(state.clone());
                    }
                }
                if let Some(states) = self.scopes.get_mut(&action.label) {
                    step(states, e, |_| state.clone());
                }
                self.touch(key("scope", &[&action.label]), e);
            }
            Op::SetSupervisor { user, supervisor } => {
                let states = self.supervisor.entry(o(user)).or_insert_with(|| vec![None]);
                step(states, e, |_| supervisor.clone());
                self.touch(key("supervisor", &[user]), e);
            }
            Op::Assign { user, ref_id } | Op::Unassign { user, ref_id } => {
                let assign = matches!(e.op, Op::Assign { .. });
                let states = self
                    .assigned
                    .entry((o(user), o(ref_id)))
                    .or_insert_with(|| vec![false]);
                step(states, e, |_| assign);
                self.touch(key("assign", &[user, ref_id]), e);
            }
            Op::Mute { user, action } => {
                let states = self
                    .mutes
                    .entry((o(user), o(&action.id)))
                    .or_insert_with(|| vec![false]);
                step(states, e, |_| true);
                self.touch(key("mute", &[user, &action.id]), e);
            }
            Op::RegisterWebhook { hook } => {
                let states = self.hooks.entry(*hook).or_insert_with(|| vec![false]);
                step(states, e, |_| true);
                self.touch(key("hook", &[&hook.to_string()]), e);
            }
        }
    }

    /// The operations on a key that may have happened.
    pub fn ops(&self, k: &str) -> &[&'h Entry] {
        self.touched.get(k).map_or(&[], Vec::as_slice)
    }
}

/// Three-valued truth: what the model requires, forbids, or allows either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Must {
    Yes,
    No,
    Either,
}

impl Must {
    pub fn of(values: impl IntoIterator<Item = bool>) -> Must {
        let (mut t, mut f) = (false, false);
        for v in values {
            if v {
                t = true;
            } else {
                f = true;
            }
        }
        match (t, f) {
            (true, false) => Must::Yes,
            (false, true) | (false, false) => Must::No,
            (true, true) => Must::Either,
        }
    }
}
