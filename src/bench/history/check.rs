//! The checker: the final state, as read, against the model.
//!
//! Every action acknowledged is there once (or deleted, if its deletion may
//! have happened), nothing else is; every key is in a state the history
//! allows; counts equal their sets; every reader's whole feed holds exactly
//! what they may see, each once, in relevancy order, each item's rank and
//! reason explained by the action's time or a comment's bump.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{key, Member, Model, Must, ScopeState};
use super::observe::{Action, Item, Observed};
use super::ops::{Entry, Op, Scope, World};

/// What the checker found wrong, and the entities it concerns (the report
/// keeps the operations that touch them).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Violation {
    pub what: String,
    pub entities: Vec<String>,
    /// A reader whose feed lacks an action (by its id), for a look at what
    /// the store holds of it ([`super::probe`]).
    pub lacking: Option<(String, String)>,
}

pub fn violation(what: String, entities: Vec<String>) -> Violation {
    Violation {
        what,
        entities,
        lacking: None,
    }
}

fn act(label: &str) -> String {
    format!("action:{label}")
}

const HOUR: i64 = 3_600_000;

/// The boosts of the default bump rules (docs/feeds.md, "Relevancy"):
/// assigned, supervisor, participated, department.
pub const BOOSTS: [(&str, i64); 4] = [
    ("ASSIGNED", 4 * HOUR),
    ("SUPERVISOR", 2 * HOUR),
    ("PARTICIPATED", HOUR),
    ("DEPARTMENT", 0),
];

/// The actions found, one per text, with the model's view of each.
pub struct Found<'a> {
    pub by_id: BTreeMap<String, &'a Action>,
    pub by_label: BTreeMap<String, &'a Action>,
}

/// Records, actions, comments, likes and every key's final state.
pub fn state<'s>(world: &World, model: &Model, seen: &'s Observed) -> (Vec<Violation>, Found<'s>) {
    let mut out = Vec::new();
    let mut found = Found {
        by_id: BTreeMap::new(),
        by_label: BTreeMap::new(),
    };
    for (label, copies) in &seen.actions {
        let Some(record) = model.records.get(label) else {
            out.push(violation(
                format!("action {label} is stored but no client recorded it"),
                vec![act(label)],
            ));
            continue;
        };
        if copies.len() > 1 {
            out.push(violation(
                format!("action {label} is stored {} times", copies.len()),
                vec![act(label)],
            ));
        }
        let a = &copies[0];
        if matches!(record.outcome, super::ops::Outcome::Failed(_)) {
            out.push(violation(
                format!("action {label} is stored though its recordAction failed"),
                vec![act(label)],
            ));
        }
        if let super::ops::Outcome::Ok(Some(id)) = &record.outcome {
            if *id != a.id {
                out.push(violation(
                    format!(
                        "action {label} is stored as {} but was acknowledged as {id}",
                        a.id
                    ),
                    vec![act(label)],
                ));
            }
        }
        found.by_id.insert(a.id.clone(), a);
        found.by_label.insert(label.clone(), a);
    }
    for (label, record) in &model.records {
        let deleted = Must::of(model.deleted[label].iter().copied());
        let there = found.by_label.contains_key(label);
        if record.ok() && !there && deleted != Must::Yes && deleted != Must::Either {
            out.push(violation(
                format!("action {label} was acknowledged ({}) and is gone", record),
                vec![act(label)],
            ));
        }
        if there && deleted == Must::Yes {
            out.push(violation(
                format!("action {label} was deleted (acknowledged) and is still there"),
                vec![act(label)],
            ));
        }
    }
    for (label, a) in &found.by_label {
        let hidden = &model.hidden[label.as_str()];
        if !hidden.contains(&a.hidden) {
            out.push(violation(
                format!(
                    "action {label} has hidden = {}; the history allows {hidden:?}",
                    a.hidden
                ),
                vec![act(label)],
            ));
        }
        if scope_candidates(model, a).is_empty() {
            out.push(violation(
                format!(
                    "action {label} has scope {} for {:?}; the history allows {:?}",
                    a.scope,
                    a.readers,
                    model.scopes[label.as_str()]
                        .iter()
                        .map(|s| (s.scope.name(), &s.readers))
                        .collect::<Vec<_>>()
                ),
                vec![act(label)],
            ));
        }
        out.extend(comments(model, a));
        out.extend(likes(model, seen, a));
    }
    out.extend(keys(world, model, seen));
    (out, found)
}

/// The scopes the model allows that match what was read.
pub fn scope_candidates<'m>(model: &'m Model, a: &Action) -> Vec<&'m ScopeState> {
    let mut readers = a.readers.clone();
    readers.sort();
    model
        .scopes
        .get(&a.label)
        .into_iter()
        .flatten()
        .filter(|s| {
            s.scope.name() == a.scope && (s.scope != Scope::Restricted || s.readers == readers)
        })
        .collect()
}

fn comments(model: &Model, a: &Action) -> Vec<Violation> {
    let mut out = Vec::new();
    let here = vec![act(&a.label)];
    if a.comment_count != a.comments.len() as u64 {
        out.push(violation(
            format!(
                "action {} counts {} comments and lists {}",
                a.label,
                a.comment_count,
                a.comments.len()
            ),
            here.clone(),
        ));
    }
    let mut texts = BTreeSet::new();
    for c in &a.comments {
        if !texts.insert(c.text.as_str()) {
            out.push(violation(
                format!("comment {} is stored twice on {}", c.text, a.label),
                vec![act(&a.label), format!("comment:{}", c.text)],
            ));
        }
        match model.comments.get(&c.text) {
            Some(e) if e.may_have_happened() => {
                if let Op::Comment { user, action, .. } = &e.op {
                    if action.label != a.label || *user != c.author {
                        out.push(violation(
                            format!(
                                "comment {} is on {} by {}, not as sent",
                                c.text, a.label, c.author
                            ),
                            here.clone(),
                        ));
                    }
                }
            }
            _ => out.push(violation(
                format!(
                    "comment {} on {} was never acknowledged nor cut off",
                    c.text, a.label
                ),
                here.clone(),
            )),
        }
    }
    for (text, e) in &model.comments {
        if let Op::Comment { action, user, .. } = &e.op {
            if action.label == a.label && e.ok() && !texts.contains(text.as_str()) {
                out.push(violation(
                    format!(
                        "{user}'s acknowledged comment {text} on {} is gone",
                        a.label
                    ),
                    vec![act(&a.label), format!("comment:{text}")],
                ));
            }
        }
    }
    out
}

fn likes(model: &Model, seen: &Observed, a: &Action) -> Vec<Violation> {
    let mut out = Vec::new();
    let (mut lo, mut hi) = (0, 0);
    for ((u, id), states) in &model.likes {
        if *id != a.id {
            continue;
        }
        match seen.liked.get(&(u.clone(), id.clone())).copied().flatten() {
            Some(liked) => {
                if !states.contains(&liked) {
                    out.push(violation(
                        format!(
                            "{u} likes {} = {liked}; the history allows {states:?}",
                            a.label
                        ),
                        vec![format!("like:{u}:{}", a.label)],
                    ));
                }
                if liked {
                    lo += 1;
                    hi += 1;
                }
            }
            // No longer readable by them: the like is there or not.
            None => {
                if states.contains(&true) {
                    hi += 1;
                }
                if !states.contains(&false) {
                    lo += 1;
                }
            }
        }
    }
    if a.like_count < lo || a.like_count > hi {
        out.push(violation(
            format!(
                "action {} counts {} likes; its likers make {lo}..={hi}",
                a.label, a.like_count
            ),
            vec![act(&a.label)],
        ));
    }
    out
}

/// Follows (both ways), memberships, supervisors, assignments, mutes and
/// webhooks, each against the states its history allows.
fn keys(world: &World, model: &Model, seen: &Observed) -> Vec<Violation> {
    let mut out = Vec::new();
    let empty = BTreeSet::new();
    for u in world.users() {
        let following = seen.following.get(&u).unwrap_or(&empty);
        for t in world.users() {
            let states = model
                .follows
                .get(&(u.clone(), t.clone()))
                .cloned()
                .unwrap_or_else(|| vec![false]);
            let now = following.contains(&t);
            if !states.contains(&now) {
                out.push(violation(
                    format!("{u} follows {t} = {now}; the history allows {states:?}"),
                    vec![format!("follow:{u}:{t}")],
                ));
            }
            let back = seen.followers.get(&t).unwrap_or(&empty).contains(&u);
            if back != now {
                out.push(violation(
                    format!("{u}'s following has {t} = {now}, {t}'s followers have {u} = {back}"),
                    vec![format!("follow:{u}:{t}")],
                ));
            }
        }
        let groups = seen.groups.get(&u).unwrap_or(&empty);
        for (g, _) in world.groups() {
            let states: Vec<bool> = model
                .members
                .get(&(u.clone(), g.to_owned()))
                .map(|s| s.iter().map(|m| m.member).collect())
                .unwrap_or_else(|| vec![false]);
            let now = groups.contains(g);
            if !states.contains(&now) {
                out.push(violation(
                    format!("{u} is a member of {g} = {now}; the history allows {states:?}"),
                    vec![format!("member:{u}:{g}")],
                ));
            }
        }
        let supervisor = seen.supervisor.get(&u).cloned().flatten();
        let states = model
            .supervisor
            .get(&u)
            .cloned()
            .unwrap_or_else(|| vec![None]);
        if !states.contains(&supervisor) {
            out.push(violation(
                format!("{u}'s supervisor is {supervisor:?}; the history allows {states:?}"),
                vec![format!("supervisor:{u}")],
            ));
        }
        let assigned = seen.assignments.get(&u).unwrap_or(&empty);
        for r in &world.refs {
            let states = model
                .assigned
                .get(&(u.clone(), r.clone()))
                .cloned()
                .unwrap_or_else(|| vec![false]);
            let now = assigned.contains(r);
            if !states.contains(&now) {
                out.push(violation(
                    format!("{u} is assigned to {r} = {now}; the history allows {states:?}"),
                    vec![format!("assign:{u}:{r}")],
                ));
            }
        }
        let mutes = seen.mutes.get(&u).unwrap_or(&empty);
        for ((m, id), states) in &model.mutes {
            if *m != u {
                continue;
            }
            let now = mutes.contains(id);
            if !states.contains(&now) {
                let label = model
                    .ops(&key("mute", &[&u, id]))
                    .iter()
                    .find_map(|e| match &e.op {
                        Op::Mute { action, .. } => Some(action.label.clone()),
                        _ => None,
                    })
                    .unwrap_or_else(|| id.clone());
                out.push(violation(
                    format!("{u} mutes {label} = {now}; the history allows {states:?}"),
                    vec![format!("mute:{u}:{label}")],
                ));
            }
        }
    }
    out
}

/// A three-valued OR.
fn any(values: impl IntoIterator<Item = Must>) -> Must {
    let mut all_no = true;
    for v in values {
        match v {
            Must::Yes => return Must::Yes,
            Must::Either => all_no = false,
            Must::No => {}
        }
    }
    if all_no {
        Must::No
    } else {
        Must::Either
    }
}

/// What is true in every case, false in every case, or else either.
fn every(values: impl IntoIterator<Item = Must>) -> Must {
    let mut seen: Option<Must> = None;
    for v in values {
        seen = match (seen, v) {
            (None, v) => Some(v),
            (Some(a), b) if a == b => Some(a),
            _ => return Must::Either,
        };
    }
    seen.unwrap_or(Must::No)
}

/// Whether `reader`'s membership of `group` began before the action
/// recorded by `record` was conducted (a member reads what the group got
/// from when they joined: src/timeline/access.rs).
fn member_before(states: &[Member], record: &Entry) -> Must {
    every(states.iter().map(|s| match (s.member, s.since) {
        (false, _) | (true, None) => Must::No,
        (true, Some((lo, hi))) => {
            if hi < record.sent {
                Must::Yes
            } else if lo > record.done {
                Must::No
            } else {
                Must::Either
            }
        }
    }))
}

/// Whether `reader` may see action `a` in their feed, by the rules of
/// README "Who sees what" and docs/feeds.md.
pub fn visible(model: &Model, seen: &Observed, reader: &str, a: &Action) -> Must {
    if a.hidden {
        return Must::No;
    }
    if a.actor == reader {
        return Must::Yes;
    }
    match a.scope.as_str() {
        // Every action of a followee shows: a user records at most
        // `actions_per_user`, below the follow's backfill of 100. Only a
        // followee's: a comment (the reader's own, which bumps it) is no
        // reason to see it (docs/feeds.md, "Follows"). A reader an earlier
        // scope reached may keep what they had: widening takes nothing
        // away ("Scope changes").
        "PUBLIC" => {
            let follows = seen
                .following
                .get(reader)
                .is_some_and(|f| f.contains(&a.actor));
            let reached_before = model.former.get(&a.label).is_some_and(|states| {
                states.iter().any(|s| match s.scope {
                    Scope::Public => false,
                    Scope::Restricted => s.readers.iter().any(|r| r == reader),
                    _ => true,
                })
            });
            if follows {
                Must::Yes
            } else if reached_before {
                Must::Either
            } else {
                Must::No
            }
        }
        "RESTRICTED" => Must::of([a.readers.iter().any(|r| r == reader)]),
        _ => {
            let Some(record) = model.records.get(&a.label) else {
                return Must::Either;
            };
            let member_now = seen.groups.get(reader);
            let candidates = scope_candidates(model, a);
            if candidates.is_empty() {
                return Must::Either;
            }
            every(candidates.iter().flat_map(|c| {
                c.groups.iter().map(|set| {
                    any(set.iter().map(|g| {
                        let states: Vec<Member> = model
                            .members
                            .get(&(reader.to_owned(), g.clone()))
                            .cloned()
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|m| Some(m.member) == member_now.map(|n| n.contains(g)))
                            .collect();
                        member_before(&states, record)
                    }))
                })
            }))
        }
    }
}

/// Every reader's whole feed against the model, under `model_name`.
pub fn feeds(
    world: &World,
    model: &Model,
    seen: &Observed,
    found: &Found,
    feeds: &BTreeMap<String, Vec<Item>>,
    model_name: &str,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for reader in world.users() {
        let items = feeds.get(&reader).map_or(&[][..], Vec::as_slice);
        let here = |a: Option<&Action>| {
            let mut e = vec![format!("member:{reader}")];
            if let Some(a) = a {
                e.push(act(&a.label));
                e.push(format!("follow:{reader}:{}", a.actor));
                e.push(format!("member:{}", a.actor));
            }
            e
        };
        let mut held: BTreeMap<&str, usize> = BTreeMap::new();
        let mut last: Option<i64> = None;
        for item in items {
            *held.entry(item.action_id.as_str()).or_default() += 1;
            let a = found.by_id.get(&item.action_id).copied();
            if last.is_some_and(|l| item.relevancy > l) {
                out.push(violation(
                    format!(
                        "[{model_name}] {reader}'s feed is out of relevancy order at {}",
                        a.map_or(item.action_id.as_str(), |a| a.label.as_str())
                    ),
                    here(a),
                ));
            }
            last = Some(item.relevancy);
            let Some(a) = a else {
                out.push(violation(
                    format!(
                        "[{model_name}] {reader}'s feed holds {}, which is not there (deleted)",
                        item.action_id
                    ),
                    here(None),
                ));
                continue;
            };
            if !item.readable {
                out.push(violation(
                    format!("[{model_name}] {reader}'s feed holds {} with no action: one they may not read", a.label),
                    here(Some(a)),
                ));
            }
            let may = visible(model, seen, &reader, a);
            if may == Must::No {
                out.push(violation(
                    format!(
                        "[{model_name}] {reader}'s feed holds {} ({}, by {}, hidden {}) as {} {} by {} at {}, which they may not see there",
                        a.label, a.scope, a.actor, a.hidden, item.kind,
                        item.rule.as_deref().unwrap_or("-"),
                        item.by.as_deref().unwrap_or("-"),
                        item.relevancy
                    ),
                    here(Some(a)),
                ));
            }
            out.extend(
                rank(model, &reader, a, item, may, model_name)
                    .into_iter()
                    .map(|w| violation(w, here(Some(a)))),
            );
        }
        for (id, n) in &held {
            if *n > 1 {
                let a = found.by_id.get(*id).copied();
                out.push(violation(
                    format!(
                        "[{model_name}] {reader}'s feed holds {} {n} times",
                        a.map_or(*id, |a| a.label.as_str())
                    ),
                    here(a),
                ));
            }
        }
        for a in found.by_id.values() {
            if !held.contains_key(a.id.as_str()) && visible(model, seen, &reader, a) == Must::Yes {
                let mut lacks = violation(
                    format!(
                        "[{model_name}] {reader}'s feed lacks {} ({} by {}), which they may see",
                        a.label, a.scope, a.actor
                    ),
                    here(Some(a)),
                );
                lacks.lacking = Some((reader.clone(), a.id.clone()));
                out.push(lacks);
            }
        }
    }
    out
}

/// An item's rank and reason, explained: its action's time, or a comment's
/// time plus the boost of the rule its reason names; never below the bump
/// the actor's own item owes every comment (`PARTICIPATED`: the reader did
/// the action).
fn rank(
    model: &Model,
    reader: &str,
    a: &Action,
    item: &Item,
    may: Must,
    model_name: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let boost = |rule: &str| BOOSTS.iter().find(|(r, _)| *r == rule).map(|(_, b)| *b);
    if item.kind == "BUMPED" {
        let (Some(rule), Some(by), Some(at)) = (&item.rule, &item.by, item.at) else {
            out.push(format!(
                "[{model_name}] {reader}'s item {} is BUMPED with no rule, commenter or time",
                a.label
            ));
            return out;
        };
        if !a.comments.iter().any(|c| c.at == at && c.author == *by) {
            out.push(format!(
                "[{model_name}] {reader}'s item {} was bumped by {by} at {at}, and no comment of theirs on it was made then",
                a.label
            ));
        }
        if boost(rule).map(|b| at + b) != Some(item.relevancy) {
            out.push(format!(
                "[{model_name}] {reader}'s item {} stands at {} but a {rule} bump at {at} raises it to {:?}",
                a.label,
                item.relevancy,
                boost(rule).map(|b| at + b)
            ));
        }
        if !rule_may_match(model, reader, a, rule, by) {
            out.push(format!(
                "[{model_name}] {reader}'s item {} was bumped by {by}'s comment under {rule}, which never applied to them",
                a.label
            ));
        }
    } else {
        // A scope change gives the readers who keep the item the reason
        // that applies now, and the item keeps its place (docs/feeds.md,
        // "Scope changes"): a bump's rank under another reason.
        let rescoped = model.scopes.get(&a.label).is_some_and(|_| {
            model
                .ops(&key("scope", &[&a.label]))
                .iter()
                .any(|e| e.may_have_happened())
        });
        let bumped_rank = a
            .comments
            .iter()
            .any(|c| BOOSTS.iter().any(|(_, b)| c.at + b == item.relevancy));
        if item.relevancy != a.conducted && !(rescoped && bumped_rank) {
            out.push(format!(
                "[{model_name}] {reader}'s item {} stands at {} with reason {}, not at its time {}",
                a.label, item.relevancy, item.kind, a.conducted
            ));
        }
        let fits = match item.kind.as_str() {
            "OWN" => reader == a.actor,
            "FOLLOWS" => a.scope == "PUBLIC",
            "RESTRICTED" => a.scope == "RESTRICTED",
            "TEAM" => a.scope == "TEAM",
            "DEPARTMENT" => a.scope == "DEPARTMENT",
            _ => false,
        };
        // A reader a wider scope no longer fans out to, who keeps what an
        // earlier scope gave them, keeps the reason it came by: none
        // applies now (docs/feeds.md, "Scope changes").
        let fits = fits || (may == Must::Either && came_by(model, reader, a, &item.kind));
        if !fits {
            out.push(format!(
                "[{model_name}] {reader}'s item {} ({}, by {}) has reason {}",
                a.label, a.scope, a.actor, item.kind
            ));
        }
    }
    if reader == a.actor {
        let owed = a
            .comments
            .iter()
            .map(|c| c.at + HOUR)
            .max()
            .unwrap_or(a.conducted);
        if item.relevancy < owed.max(a.conducted) {
            out.push(format!(
                "[{model_name}] {reader}'s own item {} stands at {}, below the PARTICIPATED bump of its latest comment ({owed})",
                a.label, item.relevancy
            ));
        }
    }
    out
}

/// Whether bump rule `rule` may ever have matched `reader` for a comment
/// by `by` on `a` (docs/feeds.md's table of rules).
/// Whether an earlier scope of `a` reached `reader` with reason `kind`.
fn came_by(model: &Model, reader: &str, a: &Action, kind: &str) -> bool {
    model.former.get(&a.label).is_some_and(|states| {
        states.iter().any(|s| {
            s.scope.name() == kind
                && (s.scope != Scope::Restricted || s.readers.iter().any(|r| r == reader))
        })
    })
}

fn rule_may_match(model: &Model, reader: &str, a: &Action, rule: &str, by: &str) -> bool {
    match rule {
        "PARTICIPATED" => reader == a.actor || a.comments.iter().any(|c| c.author == reader),
        "SUPERVISOR" => model
            .ops(&key("supervisor", &[reader]))
            .iter()
            .any(|e| matches!(&e.op, Op::SetSupervisor { supervisor: Some(s), .. } if s == by)),
        "ASSIGNED" => {
            let refs: Vec<String> = match model.records.get(&a.label).map(|e| &e.op) {
                Some(Op::Record {
                    label, shared_ref, ..
                }) => std::iter::once(label.clone())
                    .chain(shared_ref.clone())
                    .collect(),
                _ => Vec::new(),
            };
            refs.iter().any(|r| {
                model
                    .ops(&key("assign", &[reader, r]))
                    .iter()
                    .any(|e| matches!(e.op, Op::Assign { .. }))
            })
        }
        "DEPARTMENT" => {
            let dept = |u: &str| -> BTreeSet<String> {
                model
                    .touched
                    .iter()
                    .filter(|(k, es)| {
                        k.starts_with(&format!("member:{u}:dept"))
                            && es.iter().any(|e| matches!(e.op, Op::Join { .. }))
                    })
                    .map(|(k, _)| k.clone().split_off(format!("member:{u}:").len()))
                    .collect()
            };
            reader == by || !dept(reader).is_disjoint(&dept(by))
        }
        _ => false,
    }
}
