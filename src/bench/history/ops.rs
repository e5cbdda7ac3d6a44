//! The operations clients run, the world they run them in, and the history
//! they leave: each operation with when it was sent, when its answer came
//! and what the answer was.
//!
//! Each client owns its users: every operation whose key names a user (a
//! follow, a like, a membership, a supervisor, an assignment, a mute) is
//! made for one of the client's own users, and every operation on an action
//! by the client that recorded it, so the operations on one key are
//! sequential. Every recorded action and comment carries a text no other
//! carries, so an operation cut off by a kill can be resolved by looking.

use std::fmt;

use serde::Serialize;

/// Who may see an action, as the API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Scope {
    Public,
    Team,
    Department,
    Restricted,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Public => "PUBLIC",
            Scope::Team => "TEAM",
            Scope::Department => "DEPARTMENT",
            Scope::Restricted => "RESTRICTED",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        [
            Scope::Public,
            Scope::Team,
            Scope::Department,
            Scope::Restricted,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    /// The kind of group a group-scoped action reaches.
    pub fn group_kind(self) -> Option<&'static str> {
        match self {
            Scope::Team => Some("TEAM"),
            Scope::Department => Some("DEPARTMENT"),
            _ => None,
        }
    }
}

/// An action a client knows of: its id, its text and its actor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ActionRef {
    pub id: String,
    pub label: String,
    pub actor: String,
}

/// One operation, as a client sent it.
#[derive(Clone, Debug, Serialize)]
pub enum Op {
    /// A status post whose text (and first ref) is `label`.
    Record {
        actor: String,
        label: String,
        scope: Scope,
        readers: Vec<String>,
        shared_ref: Option<String>,
    },
    Comment {
        user: String,
        action: ActionRef,
        text: String,
    },
    Like {
        user: String,
        action: ActionRef,
    },
    Unlike {
        user: String,
        action: ActionRef,
    },
    Follow {
        user: String,
        target: String,
    },
    Unfollow {
        user: String,
        target: String,
    },
    Join {
        user: String,
        group: String,
    },
    Leave {
        user: String,
        group: String,
    },
    Hide {
        action: ActionRef,
    },
    Delete {
        action: ActionRef,
    },
    SetScope {
        action: ActionRef,
        scope: Scope,
        readers: Vec<String>,
    },
    SetSupervisor {
        user: String,
        supervisor: Option<String>,
    },
    Assign {
        user: String,
        ref_id: String,
    },
    Unassign {
        user: String,
        ref_id: String,
    },
    Mute {
        user: String,
        action: ActionRef,
    },
    RegisterWebhook {
        hook: usize,
    },
}

impl Op {
    /// The keys the operation touches (an action by its text, a follow, a
    /// like, a membership…), each as one string. A violation names some
    /// of them, and its history keeps the operations that touch them.
    pub fn entities(&self) -> Vec<String> {
        let a = |r: &ActionRef| format!("action:{}", r.label);
        match self {
            Op::Record {
                actor,
                label,
                shared_ref,
                ..
            } => {
                let mut out = vec![format!("actor:{actor}"), format!("action:{label}")];
                out.extend(shared_ref.iter().map(|r| format!("ref:{r}")));
                out
            }
            Op::Comment { user, action, text } => vec![
                a(action),
                format!("comment:{text}"),
                format!("commenter:{user}"),
            ],
            Op::Like { user, action } | Op::Unlike { user, action } => {
                vec![a(action), format!("like:{user}:{}", action.label)]
            }
            Op::Mute { user, action } => vec![format!("mute:{user}:{}", action.label)],
            Op::Follow { user, target } | Op::Unfollow { user, target } => {
                vec![format!("follow:{user}:{target}")]
            }
            Op::Join { user, group } | Op::Leave { user, group } => {
                vec![format!("member:{user}:{group}"), format!("member:{user}")]
            }
            Op::Hide { action } | Op::Delete { action } | Op::SetScope { action, .. } => {
                vec![a(action)]
            }
            Op::SetSupervisor { user, .. } => vec![format!("supervisor:{user}")],
            Op::Assign { user, ref_id } | Op::Unassign { user, ref_id } => {
                vec![format!("assign:{user}:{ref_id}"), format!("ref:{ref_id}")]
            }
            Op::RegisterWebhook { hook } => vec![format!("webhook:{hook}")],
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Record {
                actor,
                label,
                scope,
                readers,
                shared_ref,
            } => {
                write!(f, "{actor} records {label} {}", scope.name())?;
                if !readers.is_empty() {
                    write!(f, " for {}", readers.join(","))?;
                }
                if let Some(r) = shared_ref {
                    write!(f, " about {r}")?;
                }
                Ok(())
            }
            Op::Comment { user, action, text } => {
                write!(f, "{user} comments {text} on {}", action.label)
            }
            Op::Like { user, action } => write!(f, "{user} likes {}", action.label),
            Op::Unlike { user, action } => write!(f, "{user} unlikes {}", action.label),
            Op::Follow { user, target } => write!(f, "{user} follows {target}"),
            Op::Unfollow { user, target } => write!(f, "{user} unfollows {target}"),
            Op::Join { user, group } => write!(f, "service puts {user} in {group}"),
            Op::Leave { user, group } => write!(f, "service takes {user} out of {group}"),
            Op::Hide { action } => write!(f, "{} hides {}", action.actor, action.label),
            Op::Delete { action } => write!(f, "{} deletes {}", action.actor, action.label),
            Op::SetScope {
                action,
                scope,
                readers,
            } => write!(
                f,
                "{} scopes {} {} {}",
                action.actor,
                action.label,
                scope.name(),
                readers.join(",")
            ),
            Op::SetSupervisor { user, supervisor } => write!(
                f,
                "service sets {user}'s supervisor to {}",
                supervisor.as_deref().unwrap_or("none")
            ),
            Op::Assign { user, ref_id } => write!(f, "service assigns {user} to {ref_id}"),
            Op::Unassign { user, ref_id } => write!(f, "service unassigns {user} from {ref_id}"),
            Op::Mute { user, action } => write!(f, "{user} mutes {}", action.label),
            Op::RegisterWebhook { hook } => write!(f, "service registers webhook {hook}"),
        }
    }
}

/// What became of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// Answered with no error; the id it made (an action's, a comment's, a
    /// webhook's), if any.
    Ok(Option<String>),
    /// Answered with an error (its code): it changed nothing.
    Failed(String),
    /// No answer: the connection was cut, by a kill. Either it happened or
    /// it did not.
    Unknown,
}

/// One operation of the history, with the times (milliseconds since the
/// run began) it was sent and answered: its effect lies between them.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub seq: usize,
    pub client: usize,
    pub op: Op,
    pub sent: u64,
    pub done: u64,
    pub outcome: Outcome,
}

impl Entry {
    pub fn ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok(_))
    }

    pub fn unknown(&self) -> bool {
        self.outcome == Outcome::Unknown
    }

    /// It may have happened: acknowledged, or cut off.
    pub fn may_have_happened(&self) -> bool {
        self.ok() || self.unknown()
    }

    /// This one surely came before `later` was sent.
    pub fn before(&self, later: &Entry) -> bool {
        self.done < later.sent
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match &self.outcome {
            Outcome::Ok(Some(id)) => format!("ok {id}"),
            Outcome::Ok(None) => "ok".to_owned(),
            Outcome::Failed(code) => format!("failed {code}"),
            Outcome::Unknown => "unknown (cut off)".to_owned(),
        };
        write!(
            f,
            "#{:<5} c{} [{:>7}..{:>7} ms] {} -> {outcome}",
            self.seq, self.client, self.sent, self.done, self.op
        )
    }
}

/// The population: users (each owned by one client), groups and refs.
#[derive(Clone, Debug)]
pub struct World {
    pub clients: usize,
    pub users_per_client: usize,
    /// Most actions one user records: below a follow's backfill (100), so
    /// a follow shows every earlier action of the followee, and small
    /// enough that no user reaches the 1,000 notification groups a user
    /// keeps (see [`World::most_notice_groups`]).
    pub actions_per_user: usize,
    pub teams: Vec<String>,
    pub departments: Vec<String>,
    pub refs: Vec<String>,
}

/// The identity the application's backend uses.
pub const SERVICE: &str = "history-service";

impl World {
    pub fn new(clients: usize, users_per_client: usize) -> World {
        World {
            clients,
            users_per_client,
            actions_per_user: 40,
            teams: vec!["team-a".into(), "team-b".into()],
            departments: vec!["dept-a".into(), "dept-b".into()],
            refs: (0..4).map(|i| format!("applicant-{i}")).collect(),
        }
    }

    pub fn user(&self, client: usize, n: usize) -> String {
        format!("u{client}-{n}")
    }

    pub fn users_of(&self, client: usize) -> Vec<String> {
        (0..self.users_per_client)
            .map(|n| self.user(client, n))
            .collect()
    }

    pub fn users(&self) -> Vec<String> {
        (0..self.clients).flat_map(|c| self.users_of(c)).collect()
    }

    pub fn groups(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.teams
            .iter()
            .map(|g| (g.as_str(), "TEAM"))
            .chain(self.departments.iter().map(|g| (g.as_str(), "DEPARTMENT")))
    }

    pub fn group_kind(&self, group: &str) -> &'static str {
        if self.departments.iter().any(|d| d == group) {
            "DEPARTMENT"
        } else {
            "TEAM"
        }
    }

    /// The most notification groups one user can have: a `COMMENT` and a
    /// `LIKE` group per own action, a `REPLY` group per action of anyone
    /// (each keyed by its object and day) and an `ASSIGNED` group per ref.
    /// A run that crosses midnight (UTC) opens new groups for the new
    /// day; the checker counts every user's groups and says so if one ever
    /// reaches the cap.
    pub fn most_notice_groups(&self) -> usize {
        let actions = self.clients * self.users_per_client * self.actions_per_user;
        2 * self.actions_per_user + actions + self.refs.len()
    }
}
