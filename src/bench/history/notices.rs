//! The checker's second half: every notice owed is there exactly once
//! (docs/notifications.md: who hears of what), none that is not owed, and
//! every webhook event owed reached the receiver, each `webhook-id` one
//! event.

use std::collections::{BTreeMap, BTreeSet};

use super::check::{violation, Found, Violation};
use super::model::{key, Model};
use super::observe::{Action, Observed};
use super::ops::{Entry, Op, SERVICE};
use super::receiver::Delivery;

/// How many of a notice an owner may hold: at least, at most.
type Bounds = (usize, usize);

/// A notice as the checker names it: owner, reason, who did it, and what
/// it is about (the comment for `COMMENT` / `REPLY`, the action for
/// `LIKE`, the ref for `ASSIGNED`).
type Key = (String, String, String, String);

/// Narrows what a comment's job owes by its action's hiding: the bump job
/// of a comment on an action hidden by the time it runs raises nothing and
/// tells nobody (src/fanout/jobs.rs, `read_bump`), so a hide acknowledged
/// before the comment was sent silences it, and one that may have come
/// later may or may not.
fn hidden_since(model: &Model, a: &Action, cause: Option<&Entry>, bounds: Bounds) -> Bounds {
    let hides = model.ops(&key("hide", &[&a.label]));
    if hides.is_empty() {
        return bounds;
    }
    if let Some(cause) = cause {
        if hides.iter().any(|h| h.ok() && h.before(cause)) {
            return (0, 0);
        }
    }
    (0, bounds.1)
}

/// Narrows what a comment's notice to `owner` owes by their mutes of the
/// thread: a mute applies when the notice is written, by the worker, some
/// time after the comment (docs/notifications.md, "Preferences"), so one
/// acknowledged before the comment was sent silences it, and one sent
/// later may or may not.
fn muted(
    model: &Model,
    owner: &str,
    action: &str,
    cause: Option<&Entry>,
    bounds: Bounds,
) -> Bounds {
    let mutes = model.ops(&key("mute", &[owner, action]));
    if mutes.is_empty() {
        return bounds;
    }
    if let Some(cause) = cause {
        if mutes.iter().any(|m| m.ok() && m.before(cause)) {
            return (0, 0);
        }
    }
    (0, bounds.1)
}

fn owe(owed: &mut BTreeMap<Key, Bounds>, k: Key, b: Bounds) {
    let slot = owed.entry(k).or_insert((0, 0));
    slot.0 = slot.0.max(b.0);
    slot.1 = slot.1.max(b.1);
}

/// The notices the history owes, per key.
fn owed(model: &Model, seen: &Observed, found: &Found) -> BTreeMap<Key, Bounds> {
    let mut owed = BTreeMap::new();
    for a in found.by_id.values() {
        comment_notices(model, a, &mut owed);
    }
    for ((liker, id), states) in &model.likes {
        let Some(a) = found.by_id.get(id) else {
            continue;
        };
        let liked_once = model
            .ops(&key("like", &[liker, id]))
            .iter()
            .any(|e| matches!(e.op, Op::Like { .. }));
        if *liker == a.actor || !liked_once {
            continue;
        }
        let _ = states;
        // The like's notice job writes it if the like still stands and the
        // action is not hidden when it runs (src/notify/mod.rs, for_job).
        let standing = seen
            .liked
            .get(&(liker.clone(), id.clone()))
            .copied()
            .flatten()
            == Some(true);
        let hidden = !model.ops(&key("hide", &[&a.label])).is_empty();
        let min = usize::from(standing && !hidden);
        let b = muted(model, &a.actor, id, None, (min, 1));
        owe(
            &mut owed,
            (a.actor.clone(), "LIKE".into(), liker.clone(), id.clone()),
            b,
        );
    }
    for (u, r) in model.assigned.keys() {
        let ops = model.ops(&key("assign", &[u, r]));
        if !ops.iter().any(|e| matches!(e.op, Op::Assign { .. })) {
            continue;
        }
        // Written by the assignment's notice job if it still stands then.
        let standing = seen.assignments.get(u).is_some_and(|s| s.contains(r));
        owe(
            &mut owed,
            (u.clone(), "ASSIGNED".into(), SERVICE.into(), r.clone()),
            (usize::from(standing), 1),
        );
    }
    owed
}

/// `COMMENT` to the actor of each comment by another, `REPLY` to each
/// earlier commenter (by comment id, as src/notify/mod.rs reads them).
fn comment_notices(model: &Model, a: &Action, owed: &mut BTreeMap<Key, Bounds>) {
    let mut sorted = a.comments.clone();
    sorted.sort_by(|x, y| x.id.cmp(&y.id));
    for (i, c) in sorted.iter().enumerate() {
        let cause = model.comments.get(&c.text).copied();
        let muted = |owner: &str, bounds: Bounds| {
            hidden_since(model, a, cause, muted(model, owner, &a.id, cause, bounds))
        };
        if c.author != a.actor {
            let b = muted(&a.actor, (1, 1));
            owe(
                owed,
                (
                    a.actor.clone(),
                    "COMMENT".into(),
                    c.author.clone(),
                    c.id.clone(),
                ),
                b,
            );
        }
        let mut earlier: BTreeMap<&str, bool> = BTreeMap::new();
        for e in &sorted[..i] {
            if e.author == c.author || e.author == a.actor {
                continue;
            }
            // A comment that surely came before this one was sent was there
            // when its notices were worked out; one made at the same time may
            // not have been.
            let surely = match (model.comments.get(&e.text), cause) {
                (Some(pe), Some(pc)) => pe.before(pc),
                _ => false,
            };
            *earlier.entry(e.author.as_str()).or_default() |= surely;
        }
        for (owner, surely) in earlier {
            let b = muted(owner, (usize::from(surely), 1));
            owe(
                owed,
                (
                    owner.to_owned(),
                    "REPLY".into(),
                    c.author.clone(),
                    c.id.clone(),
                ),
                b,
            );
        }
    }
}

/// Every owner's notices against what is owed.
pub fn notices(
    model: &Model,
    seen: &Observed,
    found: &Found,
    history: &[Entry],
    cap: usize,
) -> (Vec<Violation>, usize) {
    let mut out = Vec::new();
    let owed = owed(model, seen, found);
    // Comments on actions deleted since: their notices may be there or not,
    // and their action reads null.
    let gone: BTreeSet<String> = history
        .iter()
        .filter_map(|e| match (&e.op, &e.outcome) {
            (Op::Comment { action, .. }, super::ops::Outcome::Ok(Some(id)))
                if !found.by_id.contains_key(&action.id) =>
            {
                Some(id.clone())
            }
            _ => None,
        })
        .collect();
    let unknown_on_gone = history.iter().any(|e| matches!(&e.op, Op::Comment { action, .. } if e.unknown() && !found.by_id.contains_key(&action.id)));
    let mut unjudged = 0;
    let mut have: BTreeMap<Key, usize> = BTreeMap::new();
    for (owner, list) in &seen.notices {
        if seen.notice_groups.get(owner).copied().unwrap_or(0) >= cap {
            out.push(violation(
                format!("{owner} holds {cap} notification groups, the cap: the oldest are trimmed and the model cannot judge"),
                vec![],
            ));
        }
        for n in list {
            let about = match n.reason.as_str() {
                "COMMENT" | "REPLY" => n.comment.clone(),
                "LIKE" => n.action.clone(),
                "ASSIGNED" => n.ref_id.clone(),
                _ => None,
            };
            let Some(about) = about else {
                // A like of an action deleted since: its action reads null.
                unjudged += 1;
                continue;
            };
            let k = (owner.clone(), n.reason.clone(), n.actor.clone(), about);
            if !owed.contains_key(&k)
                && (gone.contains(&k.3) || unknown_on_gone && n.action.is_none())
            {
                unjudged += 1;
                continue;
            }
            *have.entry(k).or_default() += 1;
        }
    }
    let label_of = |id: &str| found.by_id.get(id).map(|a| a.label.clone());
    let comment_action: BTreeMap<&str, &Action> = found
        .by_id
        .values()
        .flat_map(|a| a.comments.iter().map(move |c| (c.id.as_str(), *a)))
        .collect();
    let entities = |k: &Key| {
        let mut e = Vec::new();
        if let Some(l) = label_of(&k.3) {
            e.push(format!("action:{l}"));
            e.push(format!("like:{}:{l}", k.2));
            e.push(format!("mute:{}:{l}", k.0));
        }
        if let Some(a) = comment_action.get(k.3.as_str()) {
            e.push(format!("action:{}", a.label));
            e.push(format!("mute:{}:{}", k.0, a.label));
        }
        if k.1 == "ASSIGNED" {
            e.push(format!("assign:{}:{}", k.0, k.3));
        }
        e
    };
    let name = |k: &Key| {
        let about = label_of(&k.3)
            .or_else(|| {
                comment_action.get(k.3.as_str()).and_then(|a| {
                    a.comments
                        .iter()
                        .find(|c| c.id == k.3)
                        .map(|c| format!("{} on {}", c.text, a.label))
                })
            })
            .unwrap_or_else(|| k.3.clone());
        format!("{}'s {} notice from {} about {about}", k.0, k.1, k.2)
    };
    for (k, (lo, hi)) in &owed {
        let n = have.get(k).copied().unwrap_or(0);
        if n < *lo {
            out.push(violation(
                format!("{} is missing (owed {lo})", name(k)),
                entities(k),
            ));
        } else if n > *hi {
            out.push(violation(
                format!("{} is there {n} times (at most {hi})", name(k)),
                entities(k),
            ));
        }
    }
    for (k, n) in &have {
        if !owed.contains_key(k) {
            out.push(violation(
                format!("{} is there {n} times and was never owed", name(k)),
                entities(k),
            ));
        }
    }
    (out, unjudged)
}

/// How long a process may go on with the webhooks it read before a
/// registration (README, Webhooks: "heard by the others within a second").
const HOOKS_HEARD_WITHIN: u64 = 1_000;

/// Whether an event caused by `cause` is owed to the webhook `registered`
/// registered: the cause was sent once every process knew of it.
fn owed_to(registered: &Entry, cause: &Entry) -> bool {
    registered.done + HOOKS_HEARD_WITHIN < cause.sent
}

/// The webhook deliveries: each `webhook-id` names one event, every event
/// is of something that happened, and every event owed to a registered
/// endpoint arrived at least once.
pub fn webhooks(
    model: &Model,
    seen: &Observed,
    found: &Found,
    history: &[Entry],
    deliveries: &[Delivery],
    hooks_base: &str,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let event = |d: &Delivery| -> (String, String) {
        let ty = d.body["type"].as_str().unwrap_or_default().to_owned();
        let id = match ty.as_str() {
            "comment.added" => &d.body["data"]["commentId"],
            _ => &d.body["data"]["actionId"],
        };
        (ty, id.as_str().unwrap_or_default().to_owned())
    };
    let mut by_id: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
    let mut got: BTreeMap<usize, BTreeSet<(String, String)>> = BTreeMap::new();
    for d in deliveries {
        by_id.entry(d.id.as_str()).or_default().insert(event(d));
        got.entry(d.hook).or_default().insert(event(d));
    }
    for (id, events) in &by_id {
        if events.len() > 1 {
            out.push(violation(
                format!(
                    "webhook-id {id} carried {} events: {events:?}",
                    events.len()
                ),
                vec![],
            ));
        }
    }
    let acked_actions: BTreeSet<&str> = history
        .iter()
        .filter_map(|e| match (&e.op, &e.outcome) {
            (Op::Record { .. }, super::ops::Outcome::Ok(Some(id))) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let comments: BTreeMap<&str, (&Action, &str)> = found
        .by_id
        .values()
        .flat_map(|a| {
            a.comments
                .iter()
                .map(move |c| (c.id.as_str(), (*a, c.text.as_str())))
        })
        .collect();
    let acked_comments: BTreeSet<&str> = history
        .iter()
        .filter_map(|e| match (&e.op, &e.outcome) {
            (Op::Comment { .. }, super::ops::Outcome::Ok(Some(id))) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    // A comment cut off by a kill, on an action deleted since: its id is
    // known to nobody, and its event may have been told.
    let cut_on_gone: BTreeSet<&str> = history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Comment { action, .. } if e.unknown() && !found.by_id.contains_key(&action.id) => {
                Some(action.id.as_str())
            }
            _ => None,
        })
        .collect();
    let on_action: BTreeMap<&str, &str> = deliveries
        .iter()
        .filter_map(|d| {
            let comment = d.body["data"]["commentId"].as_str()?;
            Some((comment, d.body["data"]["actionId"].as_str()?))
        })
        .collect();
    for (hook, events) in &got {
        for (ty, id) in events {
            let real = match ty.as_str() {
                "action.recorded" => {
                    acked_actions.contains(id.as_str()) || found.by_id.contains_key(id)
                }
                "comment.added" => {
                    acked_comments.contains(id.as_str())
                        || comments.contains_key(id.as_str())
                        || on_action
                            .get(id.as_str())
                            .is_some_and(|a| cut_on_gone.contains(a))
                }
                _ => false,
            };
            if !real {
                out.push(violation(
                    format!("webhook {hook} was told {ty} {id}, which never happened"),
                    vec![format!("webhook:{hook}")],
                ));
            }
        }
    }
    for (hook, states) in &model.hooks {
        let url = format!("{hooks_base}/hook/{hook}");
        let there = seen.hooks.contains_key(&url);
        if !states.contains(&there) {
            out.push(violation(
                format!("webhook {hook} registered = {there}; the history allows {states:?}"),
                vec![format!("webhook:{hook}")],
            ));
        }
        if !there {
            continue;
        }
        let Some(registered) = model
            .ops(&key("hook", &[&hook.to_string()]))
            .first()
            .copied()
        else {
            continue;
        };
        let empty = BTreeSet::new();
        let heard = got.get(hook).unwrap_or(&empty);
        for a in found.by_id.values() {
            let Some(record) = model.records.get(&a.label) else {
                continue;
            };
            // A hidden action's jobs tell nobody (see [`hidden_since`]).
            let hidden = !model.ops(&key("hide", &[&a.label])).is_empty();
            if !hidden
                && owed_to(registered, record)
                && !heard.contains(&("action.recorded".to_owned(), a.id.clone()))
            {
                out.push(violation(
                    format!("webhook {hook} never got action.recorded for {}", a.label),
                    vec![format!("webhook:{hook}"), format!("action:{}", a.label)],
                ));
            }
        }
        for (id, (a, text)) in &comments {
            let Some(sent) = model.comments.get(*text) else {
                continue;
            };
            let hidden = !model.ops(&key("hide", &[&a.label])).is_empty();
            if !hidden
                && owed_to(registered, sent)
                && !heard.contains(&("comment.added".to_owned(), (*id).to_owned()))
            {
                out.push(violation(
                    format!(
                        "webhook {hook} never got comment.added for {text} on {}",
                        a.label
                    ),
                    vec![
                        format!("webhook:{hook}"),
                        format!("action:{}", a.label),
                        format!("comment:{text}"),
                    ],
                ));
            }
        }
    }
    out
}
