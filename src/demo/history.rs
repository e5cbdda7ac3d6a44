//! A month in the life of the demo organisation, generated from the roster
//! with a small seeded PRNG: who follows and befriends whom, the actions
//! (applications, rating requests, ratings, hires, statuses) and the comments
//! and likes on them. The same roster and the same `now` always give the same
//! history, so tests can rely on it.

use super::roster::{Applicant, Roster};
use serde_json::json;

use crate::descriptor::Descriptor;
use crate::model::{Millis, Scope};
use crate::rng::Rng;

const MINUTE: Millis = 60_000;
const HOUR: Millis = 60 * MINUTE;
const DAY: Millis = 24 * HOUR;

/// How far back the history reaches.
pub const SPAN: Millis = 30 * DAY;

/// Nothing in the history happens later than this before `now`, so even the
/// newest seeded action sits below anything done live.
const QUIET: Millis = 5 * MINUTE;

/// One action to record.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedAction {
    pub actor: &'static str,
    pub conducted: Millis,
    pub scope: Scope,
    /// The readers of a `RESTRICTED` action.
    pub readers: Vec<&'static str>,
    pub ref_ids: Vec<&'static str>,
    pub tags: Vec<&'static str>,
    pub descriptor: Descriptor,
}

/// A comment on the action at `action` (an index into `History::actions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedComment {
    pub action: usize,
    pub author: &'static str,
    pub text: &'static str,
    pub created: Millis,
}

/// Everything that happened, oldest action first.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    /// `(follower, followed)`.
    pub follows: Vec<(&'static str, &'static str)>,
    /// Friendships, each pair once.
    pub friends: Vec<(&'static str, &'static str)>,
    /// Sorted by `conducted`.
    pub actions: Vec<PlannedAction>,
    pub comments: Vec<PlannedComment>,
    /// `(action index, user)`, each pair once.
    pub likes: Vec<(usize, &'static str)>,
}

const SEED: u64 = 0x5249_5645_5246_4545; // "RIVERFEE"

const STATUS_GENERAL: &[&str] = &[
    "Coffee machine on 3 is fixed. You're welcome.",
    "Reminder: all-hands Thursday at 4pm, questions welcome in advance.",
    "Great offsite yesterday — thanks to everyone who organised it!",
    "Working from the Lisbon office this week, say hi if you're around.",
    "Who's up for the quiz night on Friday?",
    "Back from parental leave. What did I miss?",
    "Our new office plants have names now. Meet Fern Gully and Sir Cactus.",
    "Shout-out to the people team for the smooth benefits switch.",
];

const STATUS_RECRUITING: &[&str] = &[
    "Pipeline review done: three onsites booked for next week.",
    "Our referral bonus doubled this quarter — send us your best people!",
    "Updated the interview rubric for senior roles, feedback welcome.",
    "Career fair at the university on Tuesday; looking for two volunteers.",
    "Time-to-offer is down to 18 days. Thank you, interviewers!",
    "Please submit scorecards within 24 hours of an interview.",
    "New job ads are live for the SRE and Sales Engineer roles.",
    "Candidate NPS came back at 71. Kind words about our panels.",
];

const STATUS_ENGINEERING: &[&str] = &[
    "Shipped the new search indexer to production; p99 down by 40%.",
    "Postmortem for Tuesday's incident is up. Blameless, as always.",
    "Looking for a second reviewer on the billing migration PR.",
    "The design system now has dark mode. Feedback very welcome.",
    "We deleted 12k lines of dead code today. Feels good.",
    "On-call handover notes are in the wiki; quiet week so far.",
    "Tech talk Friday: \"What we learned running Raft in production\".",
    "Frontend build time is down to 40 seconds with the new bundler.",
];

const STATUS_SALES: &[&str] = &[
    "Closed the Northwind renewal — three years, 20% uplift!",
    "Demo day with Contoso went great; security review next.",
    "Q3 pipeline is the strongest we've had. Let's go!",
    "Need a sales engineer for a call with Initech on Thursday.",
    "New pricing page is live; conversion up 8% in its first week.",
    "Heading to the SaaS summit in Berlin, ping me for intros.",
];

/// What interviewers write, by how they rated: high, middling, low.
const RATING_TEXT_ENGINEERING: [&[&str]; 3] = [
    &[
        "Strong system design, clear communicator. Hire.",
        "Excellent debugging session; asked great questions.",
        "Deep experience with our stack; would raise the bar.",
        "Best portfolio review this quarter. Very thoughtful process.",
    ],
    &[
        "Solid fundamentals, a bit quiet on trade-offs.",
        "Good coding, needed hints on the concurrency part.",
        "Promising, but limited experience at our scale.",
    ],
    &[
        "Struggled with the core exercise; not a fit for this level.",
        "Could not explain the design choices in their own project.",
    ],
];

const RATING_TEXT_SALES: [&[&str]; 3] = [
    &[
        "Crisp discovery call role-play, handled objections calmly.",
        "Knows our market cold; brought two sharp account plans.",
        "Great demo of the product after one hour with it. Hire.",
    ],
    &[
        "Good energy, pipeline numbers were hard to verify.",
        "Nice culture add; negotiation skills unclear from my session.",
    ],
    &[
        "Great energy, but the case study missed the customer's problem.",
        "Communication was hard to follow; would not move forward.",
    ],
];

const RATING_TAGS_ENGINEERING: &[&str] = &[
    "system-design",
    "coding",
    "communication",
    "culture-add",
    "portfolio",
];

const RATING_TAGS_SALES: &[&str] = &["discovery", "negotiation", "communication", "culture-add"];

const COMMENTS_RECRUITING: &[&str] = &[
    "Agree — let's move fast on this one.",
    "Can we get the onsite scheduled for next week?",
    "I'd like to join the debrief.",
    "Sent the take-home; due Friday.",
    "Reference checks came back glowing.",
    "Compensation expectations are within band.",
    "Let's loop in the hiring manager before we decide.",
    "Congrats, great outcome for the team!",
];

const COMMENTS_STATUS: &[&str] = &[
    "Love this!",
    "Thanks for sharing.",
    "Count me in.",
    "Nice work, everyone.",
    "Ha, finally!",
    "Great news!",
    "Can you share the slides?",
];

impl History {
    /// The history of `roster`, ending shortly before `now`.
    pub fn generate(roster: &Roster, now: Millis) -> Self {
        let mut rng = Rng::new(SEED);
        let (follows, friends) = graph(roster, &mut rng);
        let mut actions = Vec::new();
        for applicant in &roster.applicants {
            recruiting(roster, applicant, now, &mut rng, &mut actions);
        }
        statuses(roster, now, &mut rng, &mut actions);
        actions.retain(|a| a.conducted <= now - QUIET);
        actions.sort_by_key(|a| a.conducted);
        let (comments, likes) = reactions(roster, &actions, now, &mut rng);
        History {
            follows,
            friends,
            actions,
            comments,
            likes,
        }
    }
}

/// Who follows whom: everyone their supervisor and teammates; recruiters
/// everyone (hiring is everybody's business); everyone a few others at random.
/// A few friendships across departments.
#[allow(clippy::type_complexity)]
fn graph(
    roster: &Roster,
    rng: &mut Rng,
) -> (
    Vec<(&'static str, &'static str)>,
    Vec<(&'static str, &'static str)>,
) {
    let mut follows = Vec::new();
    for user in &roster.users {
        for other in &roster.users {
            if other.id == user.id {
                continue;
            }
            let follows_it = user.department == "dept-recruiting"
                || user.supervisor == Some(other.id)
                || other.team == user.team
                || rng.chance(15);
            if follows_it {
                follows.push((user.id, other.id));
            }
        }
    }
    let mut friends: Vec<(&'static str, &'static str)> = Vec::new();
    while friends.len() < 12 {
        let a = rng.pick(&roster.users);
        let b = rng.pick(&roster.users);
        let pair = if a.id < b.id {
            (a.id, b.id)
        } else {
            (b.id, a.id)
        };
        if a.department != b.department && !friends.contains(&pair) {
            friends.push(pair);
        }
    }
    (follows, friends)
}

/// One applicant's story: applied, raters asked, ratings in, maybe hired.
fn recruiting(
    roster: &Roster,
    applicant: &Applicant,
    now: Millis,
    rng: &mut Rng,
    out: &mut Vec<PlannedAction>,
) {
    let Some(position) = roster.position(applicant.position) else {
        return;
    };
    let name = |id: &str| roster.user(id).map_or("", |u| u.name);
    let recruiter = applicant.recruiters[0];
    let refs = vec![applicant.id, position.id];
    let applied = rng.between(now - SPAN, now - 6 * DAY);
    out.push(PlannedAction {
        actor: recruiter,
        conducted: applied,
        scope: if rng.chance(80) {
            Scope::Public
        } else {
            Scope::Department
        },
        readers: Vec::new(),
        ref_ids: refs.clone(),
        tags: vec!["applied"],
        descriptor: Descriptor::new(
            "NewApplicant",
            json!({
                "applicantId": applicant.id,
                "applicantName": applicant.name,
                "positionId": position.id,
                "positionName": position.name,
            }),
        ),
    });

    let mut panel: Vec<&'static str> = position.interviewers.clone();
    panel.push(position.hiring_manager);
    let raters = 1 + rng.below(3);
    let mut last = applied;
    let mut scores = Vec::new();
    for _ in 0..raters {
        let rater = panel.remove(rng.below(panel.len()));
        let asked = rng.between(applied + 2 * HOUR, applied + 3 * DAY);
        let requester = if rng.chance(75) {
            recruiter
        } else {
            position.hiring_manager
        };
        let (scope, readers) = match rng.below(100) {
            0..=14 => (Scope::Restricted, vec![rater, position.hiring_manager]),
            15..=44 => (Scope::Team, Vec::new()),
            _ => (Scope::Public, Vec::new()),
        };
        out.push(PlannedAction {
            actor: requester,
            conducted: asked,
            scope,
            readers: readers.into_iter().filter(|r| *r != requester).collect(),
            ref_ids: refs.clone(),
            tags: vec!["rating-request"],
            descriptor: Descriptor::new(
                "ApplicantRatingRequested",
                json!({
                    "applicantId": applicant.id,
                    "applicantName": applicant.name,
                    "positionId": position.id,
                    "positionName": position.name,
                    "raterId": rater,
                    "raterName": name(rater),
                    "requestedById": requester,
                    "requestedByName": name(requester),
                }),
            ),
        });
        if !rng.chance(85) {
            continue;
        }
        let rated = rng.between(asked + 3 * HOUR, asked + 3 * DAY);
        let score = if applicant.hired {
            3.5 + 0.5 * rng.below(4) as f64
        } else {
            2.0 + 0.5 * rng.below(7) as f64
        };
        let (texts, tags) = if position.department == "dept-sales" {
            (RATING_TEXT_SALES, RATING_TAGS_SALES)
        } else {
            (RATING_TEXT_ENGINEERING, RATING_TAGS_ENGINEERING)
        };
        let band = if score >= 4.0 {
            0
        } else if score >= 3.0 {
            1
        } else {
            2
        };
        let text = rng.pick(texts[band]);
        let tag = *rng.pick(tags);
        let (scope, readers) = match rng.below(100) {
            0..=9 => (
                Scope::Restricted,
                applicant
                    .recruiters
                    .iter()
                    .copied()
                    .chain([position.hiring_manager])
                    .filter(|r| *r != rater)
                    .collect(),
            ),
            10..=39 => (Scope::Department, Vec::new()),
            _ => (Scope::Public, Vec::new()),
        };
        out.push(PlannedAction {
            actor: rater,
            conducted: rated,
            scope,
            readers,
            ref_ids: refs.clone(),
            tags: vec!["rating"],
            descriptor: Descriptor::new(
                "ApplicationRating",
                json!({
                    "raterId": rater,
                    "raterName": name(rater),
                    "positionId": position.id,
                    "positionName": position.name,
                    "applicantId": applicant.id,
                    "applicantName": applicant.name,
                    "ratingScore": score,
                    "ratingText": *text,
                    "tags": [tag],
                }),
            ),
        });
        scores.push(score);
        last = last.max(rated);
    }

    if applicant.hired {
        let hired = rng.between(last + DAY, last + 4 * DAY).min(now - HOUR);
        let manager = position.hiring_manager;
        out.push(PlannedAction {
            actor: manager,
            conducted: hired.max(last + MINUTE),
            scope: Scope::Public,
            readers: Vec::new(),
            ref_ids: refs,
            tags: vec!["hired"],
            descriptor: Descriptor::new(
                "ApplicantHired",
                json!({
                    "applicantId": applicant.id,
                    "applicantName": applicant.name,
                    "positionId": position.id,
                    "positionName": position.name,
                    "hiredById": manager,
                    "hiredByName": name(manager),
                }),
            ),
        });
    }
}

/// Status posts, spread over the month; mostly public, some for the team or
/// the department only.
fn statuses(roster: &Roster, now: Millis, rng: &mut Rng, out: &mut Vec<PlannedAction>) {
    for _ in 0..150 {
        let author = rng.pick(&roster.users);
        let pool = if rng.chance(30) {
            STATUS_GENERAL
        } else {
            match author.department {
                "dept-recruiting" => STATUS_RECRUITING,
                "dept-engineering" => STATUS_ENGINEERING,
                _ => STATUS_SALES,
            }
        };
        let scope = match rng.below(100) {
            0..=19 => Scope::Team,
            20..=34 => Scope::Department,
            _ => Scope::Public,
        };
        out.push(PlannedAction {
            actor: author.id,
            conducted: rng.between(now - SPAN, now - QUIET),
            scope,
            readers: Vec::new(),
            ref_ids: Vec::new(),
            tags: Vec::new(),
            descriptor: Descriptor::new("StatusPost", json!({ "text": *rng.pick(pool) })),
        });
    }
}

/// Comments and likes, on public actions only: everyone in the tenant may
/// read those, so no reaction comes from someone who could not see the action.
fn reactions(
    roster: &Roster,
    actions: &[PlannedAction],
    now: Millis,
    rng: &mut Rng,
) -> (Vec<PlannedComment>, Vec<(usize, &'static str)>) {
    let public: Vec<usize> = (0..actions.len())
        .filter(|&i| actions[i].scope == Scope::Public)
        .collect();
    let mut comments = Vec::new();
    for _ in 0..28 {
        let index = *rng.pick(&public);
        let action = &actions[index];
        let pool = match action.descriptor.type_name() {
            "StatusPost" => COMMENTS_STATUS,
            _ => COMMENTS_RECRUITING,
        };
        // Some actions get a short thread.
        let thread = 1 + rng.below(3);
        let mut at = action.conducted;
        for _ in 0..thread {
            let author = rng.pick(&roster.users).id;
            at = rng.between(at + MINUTE, at + 6 * HOUR).min(now - MINUTE);
            let text = *rng.pick(pool);
            comments.push(PlannedComment {
                action: index,
                author,
                text,
                created: at,
            });
        }
    }
    comments.sort_by_key(|c| c.created);
    let mut likes = Vec::new();
    for _ in 0..220 {
        let index = *rng.pick(&public);
        let user = rng.pick(&roster.users).id;
        if user != actions[index].actor && !likes.contains(&(index, user)) {
            likes.push((index, user));
        }
    }
    (comments, likes)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const NOW: Millis = 1_767_225_600_000; // 2026-01-01

    #[test]
    fn the_same_roster_and_time_give_the_same_history() {
        let roster = Roster::new("demo");
        assert_eq!(
            History::generate(&roster, NOW),
            History::generate(&roster, NOW)
        );
    }

    #[test]
    fn the_history_covers_the_month_and_every_kind_of_thing() {
        let history = History::generate(&Roster::new("demo"), NOW);
        assert!(
            (200..=400).contains(&history.actions.len()),
            "a few hundred actions, got {}",
            history.actions.len()
        );
        assert!(history
            .actions
            .iter()
            .all(|a| (NOW - SPAN - 5 * DAY..=NOW - QUIET).contains(&a.conducted)));
        assert!(history
            .actions
            .windows(2)
            .all(|w| w[0].conducted <= w[1].conducted));
        let scopes: BTreeSet<_> = history
            .actions
            .iter()
            .map(|a| format!("{:?}", a.scope))
            .collect();
        assert_eq!(scopes.len(), 4, "every scope: {scopes:?}");
        assert!(history.comments.len() >= 28);
        assert!(history.likes.len() >= 100);
        assert!(!history.friends.is_empty());
    }
}
