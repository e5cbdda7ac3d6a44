//! Processes killed in the middle of a burst of notices: every notice
//! owed is there once after the restart, on the embedded store and on
//! MongoDB.

use super::*;

/// One step of a fan's part in the notice burst.
#[derive(Clone, Copy, Debug)]
enum Reaction {
    Like(usize),
    Comment(usize),
}

/// Sends `reaction` as `fan`; the comment's id if it was answered (a like
/// answers `Some("")`), none if the process did not answer.
async fn react(client: &Client, actions: &[String], reaction: Reaction) -> Option<String> {
    let (query, action) = match reaction {
        Reaction::Like(a) => ("mutation($id: ID!) { like(actionId: $id) { actionId } }", a),
        Reaction::Comment(a) => (
            "mutation($id: ID!) { comment(actionId: $id, text: \"Nice\") { commentId } }",
            a,
        ),
    };
    let body = client
        .try_post(query, json!({ "id": actions[action] }))
        .await?;
    match reaction {
        Reaction::Like(_) => body["data"]["like"].is_object().then(String::new),
        Reaction::Comment(_) => body["data"]["comment"]["commentId"]
            .as_str()
            .map(str::to_owned),
    }
}

/// Notice and bump jobs the process ran to their end.
async fn notice_jobs_done(proc: &Proc) -> u64 {
    let text = reqwest::get(format!("{}/metrics", proc.base))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    ["notice", "bump"]
        .iter()
        .filter_map(|job| {
            let name = format!("riverfeed_jobs_total{{job=\"{job}\",outcome=\"ok\"}}");
            text.lines().find_map(|line| {
                let (key, value) = line.rsplit_once(' ')?;
                (key == name).then(|| value.parse::<f64>().expect("numeric") as u64)
            })
        })
        .sum()
}

/// An owner's notices, each as (reason, action, who, comment), from every
/// group (each group listed whole; a group is about one action, under the
/// default grouping).
async fn notices_of(client: &Client) -> Vec<(String, String, String, String)> {
    let page = client
        .data(
            "{ notifications(first: 20) { pageInfo { hasNextPage } edges { node {
               count action { actionId } notifications(first: 50) { reason actorId commentId } } } } }",
            json!({}),
        )
        .await["notifications"]
        .clone();
    assert_eq!(
        page["pageInfo"]["hasNextPage"], false,
        "one page holds them"
    );
    let mut all = Vec::new();
    for edge in page["edges"].as_array().expect("edges") {
        let group = &edge["node"];
        let members = group["notifications"].as_array().expect("members");
        assert_eq!(group["count"].as_u64(), Some(members.len() as u64));
        for n in members {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            all.push((
                text(&n["reason"]),
                text(&group["action"]["actionId"]),
                text(&n["actorId"]),
                text(&n["commentId"]),
            ));
        }
    }
    all.sort();
    all
}

/// A burst of likes and comments from `fans` clients on a process that is
/// killed while their notices are being written; started again on the
/// same store, it owes every owner exactly the notices of what was
/// acknowledged (and of the one request each client had in flight, sent
/// again as a client would).
async fn killed_mid_notice_burst(store: &str, flags: &[&str], fans: usize) {
    const OWNERS: usize = 6;
    const ACTIONS_EACH: usize = 2;
    let mut server = Proc::start("serve", store, flags).await;
    let mut actions = Vec::new();
    for o in 0..OWNERS {
        let owner = server.client(&format!("owner-{o}"));
        for k in 0..ACTIONS_EACH {
            actions.push(owner.post_status(&format!("post {o}-{k}"), json!({})).await);
        }
    }
    let owner_of = |a: usize| format!("owner-{}", a / ACTIONS_EACH);
    // Each fan likes every action; fan k also comments on action k, so an
    // action has one commenter and no replies are owed.
    let plan = |fan: usize| -> Vec<Reaction> {
        (0..actions.len())
            .flat_map(|a| {
                let comment = (a == fan).then_some(Reaction::Comment(a));
                std::iter::once(Reaction::Like(a)).chain(comment)
            })
            .collect()
    };
    let acked = std::sync::Arc::new(std::sync::Mutex::new(
        Vec::<(usize, Reaction, String)>::new(),
    ));
    let mut burst = Vec::new();
    for fan in 0..fans {
        let (client, actions, acked) = (
            server.client(&format!("fan-{fan}")),
            actions.clone(),
            acked.clone(),
        );
        let steps = plan(fan);
        burst.push(tokio::spawn(async move {
            for step in steps {
                match react(&client, &actions, step).await {
                    Some(id) => acked.lock().unwrap().push((fan, step, id)),
                    // Killed: this one is in flight, maybe written.
                    None => return Some(step),
                }
            }
            None
        }));
    }
    // Killed a third of the way through.
    let steps: usize = (0..fans).map(|fan| plan(fan).len()).sum();
    let deadline = Instant::now() + PATIENCE;
    while acked.lock().unwrap().len() < steps / 3 {
        assert!(Instant::now() < deadline, "the burst never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill().await;
    let mut in_flight = Vec::new();
    for (fan, task) in burst.into_iter().enumerate() {
        if let Some(step) = task.await.expect("burst task") {
            in_flight.push((fan, step));
        }
    }
    assert!(!in_flight.is_empty(), "killed mid-burst");

    let server = Proc::start("serve", store, flags).await;
    let mut acked = acked.lock().unwrap().clone();
    let in_flight_sent = in_flight.len();
    for (fan, step) in in_flight {
        let client = server.client(&format!("fan-{fan}"));
        let id = react(&client, &actions, step).await.expect("sent again");
        acked.push((fan, step, id));
    }
    // Owed: a LIKE per fan and action liked; a COMMENT per comment stored
    // (an acknowledged one among them, and perhaps one whose answer the
    // kill cut off before the client sent it again).
    let mut owed: HashMap<String, Vec<(String, String, String, String)>> = HashMap::new();
    for (fan, step, _) in &acked {
        if let Reaction::Like(a) = step {
            let like = (
                "LIKE".into(),
                actions[*a].clone(),
                format!("fan-{fan}"),
                String::new(),
            );
            owed.entry(owner_of(*a)).or_default().push(like);
        }
    }
    let reader = server.client("owner-0");
    for (a, id) in actions.iter().enumerate() {
        let stored = reader
            .data(
                "query($id: ID) { action(actionId: $id) { comments(first: 100) { nodes { commentId authorId } } } }",
                json!({ "id": id }),
            )
            .await["action"]["comments"]["nodes"]
            .clone();
        let stored: Vec<(String, String)> = stored
            .as_array()
            .expect("comments")
            .iter()
            .map(|c| {
                (
                    c["commentId"].as_str().expect("id").to_owned(),
                    c["authorId"].as_str().expect("author").to_owned(),
                )
            })
            .collect();
        for (fan, step, comment) in &acked {
            if matches!(step, Reaction::Comment(c) if *c == a) {
                assert!(
                    stored.iter().any(|(c, _)| c == comment),
                    "fan-{fan}'s acknowledged comment {comment} is stored"
                );
            }
        }
        for (comment, author) in stored {
            let notice = ("COMMENT".into(), id.clone(), author, comment);
            owed.entry(owner_of(a)).or_default().push(notice);
        }
    }
    for o in 0..OWNERS {
        let owner = format!("owner-{o}");
        let mut want = owed.remove(&owner).unwrap_or_default();
        want.sort();
        let client = server.client(&owner);
        let deadline = Instant::now() + PATIENCE;
        let mut have = notices_of(&client).await;
        while have.len() < want.len() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            have = notices_of(&client).await;
        }
        assert_eq!(have, want, "{owner}'s notices, each once");
    }
    // The restarted process wrote notices the killed one left (a job each
    // for those sent again, and more).
    let done = notice_jobs_done(&server).await;
    assert!(
        done > in_flight_sent as u64,
        "killed with notices to write: {done} jobs run after the restart"
    );
    eprintln!(
        "killed after {} of {steps} likes and comments; {done} jobs run after the restart; \
         every notice owed there once",
        acked.len()
    );
}

#[tokio::test]
async fn the_embedded_process_killed_mid_notice_burst_owes_every_notice_once() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    killed_mid_notice_burst(&store, &[], 16).await;
}

#[tokio::test]
async fn a_process_killed_mid_notice_burst_on_mongodb_owes_every_notice_once() {
    let Some(uri) = database("procs_notice_burst") else {
        return;
    };
    // A short lease: the killed process's claims are taken up again soon.
    // Fewer clients: the test server is slow.
    killed_mid_notice_burst(&uri, &["--fanout-lease-secs", "1"], 6).await;
    drop_db(&uri).await;
}
