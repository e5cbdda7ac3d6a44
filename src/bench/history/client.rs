//! The clients: each draws operations from its own seeded generator and
//! sends them over HTTP GraphQL, one after another, recording every one in
//! the shared history with what became of it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::ops::{ActionRef, Entry, Op, Outcome, Scope, World, SERVICE};
use crate::rng::Rng;

/// The tenant the history runs in.
pub const TENANT: &str = "history";

/// What the clients share: the actions acknowledged so far (others comment
/// on them, like them…), the history, and when to stop.
pub struct Shared {
    pub start: Instant,
    pub pool: Mutex<Vec<ActionRef>>,
    pub history: Mutex<Vec<Entry>>,
    seq: AtomicUsize,
    pub stop: AtomicBool,
    /// Requests refused at connect (the process was down): sent nowhere.
    pub refused: AtomicUsize,
    /// The webhook receiver's base URL.
    pub hooks: String,
    /// Each kill: when (ms since the run began) and which process.
    pub kills: Mutex<Vec<(u64, String)>>,
}

impl Shared {
    pub fn new(hooks: String) -> Shared {
        Shared {
            start: Instant::now(),
            pool: Mutex::default(),
            history: Mutex::default(),
            seq: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
            hooks,
            kills: Mutex::default(),
        }
    }

    pub fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// What an HTTP request came to.
pub enum Sent {
    /// A GraphQL response.
    Answer(Value),
    /// Refused at connect: the request never reached a process.
    Refused,
    /// Cut off after it was sent, or timed out.
    Cut,
}

/// GraphQL over HTTP to one process, in dev mode.
#[derive(Clone)]
pub struct Http {
    http: reqwest::Client,
    url: String,
}

impl Http {
    pub fn new(base: &str) -> anyhow::Result<Http> {
        Ok(Http {
            http: reqwest::Client::builder()
                // A check's read of a dormant reader's feed on a slow
                // server (the wire server the tests run) merges every
                // source: seconds, not milliseconds.
                .timeout(Duration::from_secs(60))
                .tcp_nodelay(true)
                .build()?,
            url: format!("{base}/graphql"),
        })
    }

    pub async fn send(&self, user: &str, service: bool, query: &str, variables: Value) -> Sent {
        let mut request = self
            .http
            .post(&self.url)
            .header("x-riverfeed-tenant", TENANT)
            .header("x-riverfeed-user", user)
            .json(&json!({ "query": query, "variables": variables }));
        if service {
            request = request.header("x-riverfeed-roles", "service");
        }
        match request.send().await {
            Ok(response) => match response.json::<Value>().await {
                Ok(body) => Sent::Answer(body),
                Err(_) => Sent::Cut,
            },
            Err(err) if err.is_connect() => Sent::Refused,
            Err(_) => Sent::Cut,
        }
    }

    /// `data` of an answer with no errors; an error otherwise. For the
    /// harness's own reads and idempotent set-up only: a request left
    /// unanswered (a process starting again, or a slow server past the
    /// timeout) is sent again, up to [`TRIES`] times in all.
    pub async fn data(
        &self,
        user: &str,
        service: bool,
        query: &str,
        variables: Value,
    ) -> anyhow::Result<Value> {
        for _ in 1..TRIES {
            match self.send(user, service, query, variables.clone()).await {
                Sent::Refused | Sent::Cut => tokio::time::sleep(Duration::from_secs(1)).await,
                answered => return answer(query, answered),
            }
        }
        answer(query, self.send(user, service, query, variables).await)
    }
}

/// How many times the harness sends one of its own requests.
const TRIES: usize = 3;

/// `data` of an answer with no errors; an error otherwise.
fn answer(query: &str, sent: Sent) -> anyhow::Result<Value> {
    match sent {
        Sent::Answer(body) if body.get("errors").is_none() => Ok(body["data"].clone()),
        Sent::Answer(body) => anyhow::bail!("{query}: {}", body["errors"]),
        Sent::Refused | Sent::Cut => anyhow::bail!("{query}: no answer in {TRIES} tries"),
    }
}

/// The share of each operation, out of the sum.
const MIX: [(Kind, u32); 16] = [
    (Kind::Record, 220),
    (Kind::Comment, 160),
    (Kind::Like, 110),
    (Kind::Unlike, 45),
    (Kind::Follow, 80),
    (Kind::Unfollow, 40),
    (Kind::Join, 45),
    (Kind::Leave, 30),
    (Kind::Hide, 12),
    (Kind::Delete, 12),
    (Kind::SetScope, 40),
    (Kind::SetSupervisor, 30),
    (Kind::Assign, 40),
    (Kind::Unassign, 15),
    (Kind::Mute, 25),
    (Kind::Webhook, 2),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Record,
    Comment,
    Like,
    Unlike,
    Follow,
    Unfollow,
    Join,
    Leave,
    Hide,
    Delete,
    SetScope,
    SetSupervisor,
    Assign,
    Unassign,
    Mute,
    Webhook,
}

/// Most webhooks the history registers (a tenant holds 16).
pub const MOST_HOOKS: usize = 2;

/// One client: its users, its generator, what it knows.
pub struct Client {
    pub index: usize,
    world: Arc<World>,
    rng: Rng,
    http: Http,
    shared: Arc<Shared>,
    mine: Vec<String>,
    everyone: Vec<String>,
    /// This client's actions (acknowledged, not deleted).
    own: Vec<ActionRef>,
    recorded: Vec<usize>,
    labels: usize,
    hooks: usize,
}

impl Client {
    pub fn new(
        index: usize,
        seed: u64,
        world: Arc<World>,
        base: &str,
        shared: Arc<Shared>,
    ) -> anyhow::Result<Client> {
        let mine = world.users_of(index);
        Ok(Client {
            index,
            rng: Rng::new(seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            http: Http::new(base)?,
            recorded: vec![0; mine.len()],
            everyone: world.users(),
            mine,
            world,
            shared,
            own: Vec::new(),
            labels: 0,
            hooks: 0,
        })
    }

    /// Runs operations until told to stop.
    pub async fn run(mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            let Some(op) = self.draw() else { continue };
            self.apply(op).await;
        }
    }

    fn draw_kind(&mut self) -> Kind {
        let total: u32 = MIX.iter().map(|(_, w)| w).sum();
        let mut at = self.rng.below(total as usize) as u32;
        for (kind, weight) in MIX {
            if at < weight {
                return kind;
            }
            at -= weight;
        }
        Kind::Record
    }

    fn pick_user(&mut self) -> (usize, String) {
        let n = self.rng.below(self.mine.len());
        (n, self.mine[n].clone())
    }

    fn other_than(&mut self, user: &str) -> String {
        loop {
            let other = self.rng.pick(&self.everyone).clone();
            if other != user {
                return other;
            }
        }
    }

    fn readers(&mut self, actor: &str) -> Vec<String> {
        let n = 1 + self.rng.below(3);
        let mut readers: Vec<String> = (0..n).map(|_| self.other_than(actor)).collect();
        readers.sort();
        readers.dedup();
        readers
    }

    fn any_action(&mut self) -> Option<ActionRef> {
        let pool = self.shared.pool.lock().unwrap_or_else(|e| e.into_inner());
        (!pool.is_empty()).then(|| pool[self.rng.below(pool.len())].clone())
    }

    fn own_action(&mut self) -> Option<ActionRef> {
        (!self.own.is_empty()).then(|| self.own[self.rng.below(self.own.len())].clone())
    }

    fn group(&mut self) -> String {
        let groups: Vec<String> = self.world.groups().map(|(g, _)| g.to_owned()).collect();
        self.rng.pick(&groups).clone()
    }

    /// The next operation, if the one drawn has something to act on.
    fn draw(&mut self) -> Option<Op> {
        let kind = self.draw_kind();
        let (n, user) = self.pick_user();
        Some(match kind {
            Kind::Record => {
                if self.recorded[n] >= self.world.actions_per_user {
                    return None;
                }
                self.recorded[n] += 1;
                self.labels += 1;
                let label = format!("a{}-{}", self.index, self.labels);
                let scope = match self.rng.below(20) {
                    0..=10 => Scope::Public,
                    11..=13 => Scope::Team,
                    14..=15 => Scope::Department,
                    _ => Scope::Restricted,
                };
                let readers = if scope == Scope::Restricted {
                    self.readers(&user)
                } else {
                    Vec::new()
                };
                let shared_ref = self
                    .rng
                    .chance(50)
                    .then(|| self.rng.pick(&self.world.refs).clone());
                Op::Record {
                    actor: user,
                    label,
                    scope,
                    readers,
                    shared_ref,
                }
            }
            Kind::Comment => {
                let action = self.any_action()?;
                self.labels += 1;
                let text = format!("c{}-{}", self.index, self.labels);
                Op::Comment { user, action, text }
            }
            Kind::Like => Op::Like {
                user,
                action: self.any_action()?,
            },
            Kind::Unlike => Op::Unlike {
                user,
                action: self.any_action()?,
            },
            Kind::Mute => Op::Mute {
                user,
                action: self.any_action()?,
            },
            Kind::Follow => Op::Follow {
                target: self.other_than(&user),
                user,
            },
            Kind::Unfollow => Op::Unfollow {
                target: self.other_than(&user),
                user,
            },
            Kind::Join => Op::Join {
                group: self.group(),
                user,
            },
            Kind::Leave => Op::Leave {
                group: self.group(),
                user,
            },
            Kind::Hide => Op::Hide {
                action: self.own_action()?,
            },
            Kind::Delete => Op::Delete {
                action: self.own_action()?,
            },
            Kind::SetScope => {
                let action = self.own_action()?;
                let scope = match self.rng.below(3) {
                    0 => Scope::Public,
                    1 => Scope::Team,
                    _ => Scope::Restricted,
                };
                let readers = if scope == Scope::Restricted {
                    self.readers(&action.actor)
                } else {
                    Vec::new()
                };
                Op::SetScope {
                    action,
                    scope,
                    readers,
                }
            }
            Kind::SetSupervisor => Op::SetSupervisor {
                supervisor: (!self.rng.chance(20)).then(|| self.other_than(&user)),
                user,
            },
            Kind::Assign => Op::Assign {
                ref_id: self.rng.pick(&self.world.refs).clone(),
                user,
            },
            Kind::Unassign => Op::Unassign {
                ref_id: self.rng.pick(&self.world.refs).clone(),
                user,
            },
            Kind::Webhook => {
                if self.index != 0 || self.hooks >= MOST_HOOKS {
                    return None;
                }
                self.hooks += 1;
                Op::RegisterWebhook {
                    hook: self.hooks - 1,
                }
            }
        })
    }

    /// Sends `op` (again while the process is down, as a client would)
    /// and records what became of it.
    async fn apply(&mut self, op: Op) {
        loop {
            let sent = self.shared.now();
            let (user, service, query, variables) = request(&op, &self.shared.hooks);
            let answer = self.http.send(&user, service, query, variables).await;
            let done = self.shared.now();
            let outcome = match answer {
                Sent::Refused => {
                    self.shared.refused.fetch_add(1, Ordering::Relaxed);
                    if self.shared.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                Sent::Cut => Outcome::Unknown,
                Sent::Answer(body) => match body.get("errors").and_then(|e| e.get(0)) {
                    Some(error) => Outcome::Failed(
                        error["extensions"]["code"]
                            .as_str()
                            .unwrap_or("NO_CODE")
                            .to_owned(),
                    ),
                    None => Outcome::Ok(made_id(&op, &body["data"])),
                },
            };
            self.learn(&op, &outcome);
            let seq = self.shared.seq.fetch_add(1, Ordering::Relaxed);
            let entry = Entry {
                seq,
                client: self.index,
                op,
                sent,
                done,
                outcome,
            };
            self.shared
                .history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(entry);
            return;
        }
    }

    /// What an answer teaches the client about what it may act on.
    fn learn(&mut self, op: &Op, outcome: &Outcome) {
        match (op, outcome) {
            (Op::Record { actor, label, .. }, Outcome::Ok(Some(id))) => {
                let known = ActionRef {
                    id: id.clone(),
                    label: label.clone(),
                    actor: actor.clone(),
                };
                self.own.push(known.clone());
                self.shared
                    .pool
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(known);
            }
            // A hidden action is read by its actor alone: others would only
            // be refused, so nobody picks it again.
            (Op::Delete { action } | Op::Hide { action }, Outcome::Ok(_)) => {
                self.own.retain(|a| a.id != action.id);
                self.shared
                    .pool
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|a| a.id != action.id);
            }
            _ => {}
        }
    }
}

/// The id an acknowledged operation made, from its answer's `data`.
fn made_id(op: &Op, data: &Value) -> Option<String> {
    let id = match op {
        Op::Record { .. } => &data["recordAction"]["actionId"],
        Op::Comment { .. } => &data["comment"]["commentId"],
        Op::RegisterWebhook { .. } => &data["registerWebhook"]["webhook"]["webhookId"],
        _ => return None,
    };
    id.as_str().map(str::to_owned)
}

/// The request for `op`: as whom (and whether with the service role), the
/// document and its variables.
fn request(op: &Op, hooks: &str) -> (String, bool, &'static str, Value) {
    let service = |query, variables| (SERVICE.to_owned(), true, query, variables);
    match op {
        Op::Record {
            actor,
            label,
            scope,
            readers,
            shared_ref,
        } => {
            let mut refs = vec![label.clone()];
            refs.extend(shared_ref.iter().cloned());
            (
                actor.clone(),
                false,
                "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }",
                json!({ "input": {
                    "descriptor": { "statusPost": { "text": label } },
                    "scope": scope.name(),
                    "readers": readers,
                    "refIds": refs,
                } }),
            )
        }
        Op::Comment { user, action, text } => (
            user.clone(),
            false,
            "mutation($id: ID!, $t: String!) { comment(actionId: $id, text: $t) { commentId } }",
            json!({ "id": action.id, "t": text }),
        ),
        Op::Like { user, action } => (
            user.clone(),
            false,
            "mutation($id: ID!) { like(actionId: $id) { actionId } }",
            json!({ "id": action.id }),
        ),
        Op::Unlike { user, action } => (
            user.clone(),
            false,
            "mutation($id: ID!) { unlike(actionId: $id) { actionId } }",
            json!({ "id": action.id }),
        ),
        Op::Follow { user, target } => (
            user.clone(),
            false,
            "mutation($u: ID!) { follow(userId: $u) }",
            json!({ "u": target }),
        ),
        Op::Unfollow { user, target } => (
            user.clone(),
            false,
            "mutation($u: ID!) { unfollow(userId: $u, keepHistory: false) }",
            json!({ "u": target }),
        ),
        // Memberships are the application's to set (`joinGroup` needs the
        // service role); the key is still the client's own user's.
        Op::Join { user, group } => service(
            "mutation($u: ID!, $g: ID!, $k: GroupKind!) { joinGroup(groupId: $g, kind: $k, role: MEMBER, userId: $u) { groupId } }",
            json!({ "u": user, "g": group, "k": if group.starts_with("dept") { "DEPARTMENT" } else { "TEAM" } }),
        ),
        Op::Leave { user, group } => service(
            "mutation($u: ID!, $g: ID!) { leaveGroup(groupId: $g, userId: $u) }",
            json!({ "u": user, "g": group }),
        ),
        Op::Hide { action } => (
            action.actor.clone(),
            false,
            "mutation($id: ID!) { hideAction(actionId: $id) { actionId } }",
            json!({ "id": action.id }),
        ),
        Op::Delete { action } => (
            action.actor.clone(),
            false,
            "mutation($id: ID!) { deleteAction(actionId: $id) }",
            json!({ "id": action.id }),
        ),
        Op::SetScope {
            action,
            scope,
            readers,
        } => (
            action.actor.clone(),
            false,
            "mutation($id: ID!, $s: Scope!, $r: [ID!]!) { setActionScope(actionId: $id, scope: $s, readers: $r) { actionId } }",
            json!({ "id": action.id, "s": scope.name(), "r": readers }),
        ),
        Op::SetSupervisor { user, supervisor } => service(
            "mutation($u: ID!, $s: ID) { setSupervisor(userId: $u, supervisorId: $s) { userId } }",
            json!({ "u": user, "s": supervisor }),
        ),
        Op::Assign { user, ref_id } => service(
            "mutation($u: ID!, $r: String!) { assign(userId: $u, refId: $r) }",
            json!({ "u": user, "r": ref_id }),
        ),
        Op::Unassign { user, ref_id } => service(
            "mutation($u: ID!, $r: String!) { unassign(userId: $u, refId: $r) }",
            json!({ "u": user, "r": ref_id }),
        ),
        Op::Mute { user, action } => (
            user.clone(),
            false,
            "mutation($id: ID!) { muteThread(actionId: $id) { disabled } }",
            json!({ "id": action.id }),
        ),
        Op::RegisterWebhook { hook } => service(
            "mutation($url: String!) { registerWebhook(url: $url, events: [ACTION_RECORDED, COMMENT_ADDED]) { webhook { webhookId } } }",
            json!({ "url": format!("{hooks}/hook/{hook}") }),
        ),
    }
}
