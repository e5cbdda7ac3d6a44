//! The demo organisation: people, departments, teams, open positions and
//! applicants. Plain constant data, so the seeder and the page's
//! `/demo/roster.json` read one and the same list.

use serde::Serialize;

/// A department or a team.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unit {
    pub id: &'static str,
    pub name: &'static str,
    /// The department a team belongs to (`None` for a department).
    pub department: Option<&'static str>,
    /// Who leads it.
    pub lead: &'static str,
}

/// A member of the demo organisation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    pub id: &'static str,
    pub name: &'static str,
    pub title: &'static str,
    pub department: &'static str,
    pub team: &'static str,
    pub supervisor: Option<&'static str>,
    /// The refs (applicants, positions) this person is assigned to, sorted.
    pub assignments: Vec<&'static str>,
}

/// An open position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Opening {
    pub id: &'static str,
    pub name: &'static str,
    pub department: &'static str,
    /// Assigned to the position; hires for it.
    pub hiring_manager: &'static str,
    /// Who may be asked to rate its applicants.
    pub interviewers: Vec<&'static str>,
}

/// Someone who applied for a position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applicant {
    pub id: &'static str,
    pub name: &'static str,
    pub position: &'static str,
    /// Recruiters assigned to the applicant; the first one runs the process.
    pub recruiters: Vec<&'static str>,
    /// Whether the story ends in a hire.
    pub hired: bool,
}

/// Everything the page needs to know about the demo tenant.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Roster {
    pub tenant: &'static str,
    pub departments: Vec<Unit>,
    pub teams: Vec<Unit>,
    pub users: Vec<Person>,
    pub positions: Vec<Opening>,
    pub applicants: Vec<Applicant>,
}

// (id, name, lead)
#[rustfmt::skip]
const DEPARTMENTS: &[(&str, &str, &str)] = &[
    ("dept-recruiting", "Recruiting", "carol"),
    ("dept-engineering", "Engineering", "dave"),
    ("dept-sales", "Sales", "sam"),
];

// (id, name, department, lead)
#[rustfmt::skip]
const TEAMS: &[(&str, &str, &str, &str)] = &[
    ("team-talent", "Talent Partners", "dept-recruiting", "carol"),
    ("team-sourcing", "Sourcing", "dept-recruiting", "jin"),
    ("team-platform", "Platform", "dept-engineering", "erin"),
    ("team-web", "Web", "dept-engineering", "grace"),
    ("team-enterprise", "Enterprise Sales", "dept-sales", "sam"),
    ("team-mid-market", "Mid-Market", "dept-sales", "zoe"),
];

// (id, name, title, team, supervisor)
#[rustfmt::skip]
const PEOPLE: &[(&str, &str, &str, &str, Option<&str>)] = &[
    ("carol", "Carol Nguyen", "Head of Talent", "team-talent", None),
    ("rita", "Rita Alvarez", "Senior Recruiter", "team-talent", Some("carol")),
    ("omar", "Omar Haddad", "Technical Recruiter", "team-talent", Some("carol")),
    ("ada", "Ada Okafor", "Recruiter", "team-talent", Some("carol")),
    ("jin", "Jin Park", "Sourcing Lead", "team-sourcing", Some("carol")),
    ("lena", "Lena Fischer", "Sourcer", "team-sourcing", Some("jin")),
    ("tomas", "Tomás Silva", "Recruiting Coordinator", "team-sourcing", Some("jin")),
    ("dave", "Dave Kowalski", "VP Engineering", "team-platform", None),
    ("erin", "Erin Walsh", "Staff Engineer", "team-platform", Some("dave")),
    ("frank", "Frank Osei", "Backend Engineer", "team-platform", Some("erin")),
    ("kai", "Kai Tanaka", "Site Reliability Engineer", "team-platform", Some("erin")),
    ("grace", "Grace Liu", "Engineering Manager", "team-web", Some("dave")),
    ("hugo", "Hugo Martin", "Frontend Engineer", "team-web", Some("grace")),
    ("ines", "Inés Romero", "Product Designer", "team-web", Some("grace")),
    ("maya", "Maya Singh", "Frontend Engineer", "team-web", Some("grace")),
    ("sam", "Sam Brooks", "VP Sales", "team-enterprise", None),
    ("tara", "Tara O'Neill", "Account Executive", "team-enterprise", Some("sam")),
    ("victor", "Victor Petrov", "Sales Engineer", "team-enterprise", Some("sam")),
    ("zoe", "Zoe Adams", "Mid-Market Lead", "team-mid-market", Some("sam")),
    ("wendy", "Wendy Chen", "Sales Development Rep", "team-mid-market", Some("zoe")),
];

// (id, name, hiring manager, interviewers)
#[rustfmt::skip]
const POSITIONS: &[(&str, &str, &str, &[&str])] = &[
    ("position-senior-backend", "Senior Backend Engineer", "erin", &["frank", "kai", "dave"]),
    ("position-sre", "Site Reliability Engineer", "erin", &["kai", "frank"]),
    ("position-frontend", "Frontend Engineer", "grace", &["hugo", "maya", "ines"]),
    ("position-product-designer", "Product Designer", "grace", &["ines", "hugo"]),
    ("position-account-executive", "Account Executive", "sam", &["tara", "zoe"]),
    ("position-sales-engineer", "Sales Engineer", "sam", &["victor", "tara", "kai"]),
];

// (id, name, position, recruiters, hired)
#[rustfmt::skip]
const APPLICANTS: &[(&str, &str, &str, &[&str], bool)] = &[
    ("applicant-mary-fanning", "Mary Fanning", "position-senior-backend", &["rita", "omar"], true),
    ("applicant-li-wei", "Li Wei", "position-senior-backend", &["omar"], false),
    ("applicant-jonas-berg", "Jonas Berg", "position-senior-backend", &["rita"], false),
    ("applicant-amara-diallo", "Amara Diallo", "position-senior-backend", &["omar", "lena"], false),
    ("applicant-priya-raman", "Priya Raman", "position-sre", &["omar"], true),
    ("applicant-ethan-cole", "Ethan Cole", "position-sre", &["lena"], false),
    ("applicant-sofia-marquez", "Sofia Márquez", "position-sre", &["omar"], false),
    ("applicant-noah-fischer", "Noah Fischer", "position-frontend", &["rita"], false),
    ("applicant-chloe-dubois", "Chloé Dubois", "position-frontend", &["ada", "rita"], true),
    ("applicant-mateo-rossi", "Mateo Rossi", "position-frontend", &["ada"], false),
    ("applicant-hana-sato", "Hana Sato", "position-frontend", &["lena"], false),
    ("applicant-olivia-brown", "Olivia Brown", "position-product-designer", &["ada"], false),
    ("applicant-kwame-mensah", "Kwame Mensah", "position-product-designer", &["rita"], false),
    ("applicant-elena-popescu", "Elena Popescu", "position-product-designer", &["ada"], false),
    ("applicant-james-oconnor", "James O'Connor", "position-account-executive", &["jin"], true),
    ("applicant-fatima-zahra", "Fatima Zahra", "position-account-executive", &["jin", "ada"], false),
    ("applicant-lucas-silva", "Lucas Silva", "position-account-executive", &["tomas"], false),
    ("applicant-grace-kim", "Grace Kim", "position-account-executive", &["jin"], false),
    ("applicant-daniel-weiss", "Daniel Weiss", "position-sales-engineer", &["tomas"], false),
    ("applicant-aisha-khan", "Aisha Khan", "position-sales-engineer", &["jin", "omar"], false),
    ("applicant-ben-carter", "Ben Carter", "position-sales-engineer", &["tomas"], false),
    ("applicant-yuki-tanaka", "Yuki Tanaka", "position-senior-backend", &["rita"], false),
    ("applicant-ivan-horvat", "Ivan Horvat", "position-sre", &["lena", "omar"], false),
    ("applicant-nadia-haddad", "Nadia Haddad", "position-frontend", &["ada"], false),
];

impl Roster {
    /// The demo organisation.
    pub fn new(tenant: &'static str) -> Self {
        let department_of = |team: &str| {
            TEAMS
                .iter()
                .find(|t| t.0 == team)
                .map(|t| t.2)
                .unwrap_or_default()
        };
        let mut users: Vec<Person> = PEOPLE
            .iter()
            .map(|&(id, name, title, team, supervisor)| Person {
                id,
                name,
                title,
                department: department_of(team),
                team,
                supervisor,
                assignments: Vec::new(),
            })
            .collect();
        let positions: Vec<Opening> = POSITIONS
            .iter()
            .map(|&(id, name, hiring_manager, interviewers)| Opening {
                id,
                name,
                department: users
                    .iter()
                    .find(|u| u.id == hiring_manager)
                    .map(|u| u.department)
                    .unwrap_or_default(),
                hiring_manager,
                interviewers: interviewers.to_vec(),
            })
            .collect();
        let applicants: Vec<Applicant> = APPLICANTS
            .iter()
            .map(|&(id, name, position, recruiters, hired)| Applicant {
                id,
                name,
                position,
                recruiters: recruiters.to_vec(),
                hired,
            })
            .collect();
        for user in &mut users {
            let id = user.id;
            user.assignments = applicants
                .iter()
                .filter(|a| a.recruiters.contains(&id))
                .map(|a| a.id)
                .chain(
                    positions
                        .iter()
                        .filter(|p| p.hiring_manager == id)
                        .map(|p| p.id),
                )
                .collect();
            user.assignments.sort_unstable();
        }
        Roster {
            tenant,
            departments: DEPARTMENTS
                .iter()
                .map(|&(id, name, lead)| Unit {
                    id,
                    name,
                    department: None,
                    lead,
                })
                .collect(),
            teams: TEAMS
                .iter()
                .map(|&(id, name, department, lead)| Unit {
                    id,
                    name,
                    department: Some(department),
                    lead,
                })
                .collect(),
            users,
            positions,
            applicants,
        }
    }

    pub fn user(&self, id: &str) -> Option<&Person> {
        self.users.iter().find(|u| u.id == id)
    }

    pub fn position(&self, id: &str) -> Option<&Opening> {
        self.positions.iter().find(|p| p.id == id)
    }

    /// Whether `user` leads the team or department `unit`.
    pub fn leads(&self, user: &str, unit: &str) -> bool {
        self.departments
            .iter()
            .chain(&self.teams)
            .any(|u| u.id == unit && u.lead == user)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Every name the tables mention exists, so the seeder never links to
    /// nobody.
    #[test]
    fn the_tables_refer_to_people_and_units_that_exist() {
        let roster = Roster::new("demo");
        let people: HashSet<_> = roster.users.iter().map(|u| u.id).collect();
        assert_eq!(people.len(), roster.users.len(), "user ids are unique");
        let units: HashSet<_> = roster
            .departments
            .iter()
            .chain(&roster.teams)
            .map(|u| u.id)
            .collect();
        for user in &roster.users {
            assert!(units.contains(user.team), "{}'s team", user.id);
            assert!(units.contains(user.department), "{}'s department", user.id);
            if let Some(boss) = user.supervisor {
                assert!(people.contains(boss), "{}'s supervisor", user.id);
            }
        }
        for unit in roster.departments.iter().chain(&roster.teams) {
            assert!(people.contains(unit.lead), "lead of {}", unit.id);
        }
        for position in &roster.positions {
            assert!(people.contains(position.hiring_manager), "{}", position.id);
            assert!(position.interviewers.iter().all(|i| people.contains(i)));
        }
        for applicant in &roster.applicants {
            assert!(roster.position(applicant.position).is_some());
            assert!(!applicant.recruiters.is_empty());
            assert!(applicant.recruiters.iter().all(|r| people.contains(r)));
        }
    }

    #[test]
    fn recruiters_are_assigned_to_their_applicants() {
        let roster = Roster::new("demo");
        let rita = roster.user("rita").expect("rita");
        assert!(rita.assignments.contains(&"applicant-mary-fanning"));
        let erin = roster.user("erin").expect("erin");
        assert!(erin.assignments.contains(&"position-senior-backend"));
    }
}
