//! The README's tour works as written: each curl command runs against a live
//! server, each GraphQL block is the same query as its curl, and the
//! subscription block streams events.

use serde_json::{json, Value};

use crate::common::{Backend, TestServer, WsClient};

/// Code blocks of one language in the tour section, in order.
fn tour_blocks(language: &str) -> Vec<String> {
    let readme = include_str!("../../README.md");
    let start = readme.find("## A five-minute tour").expect("tour section");
    let end = readme[start + 3..]
        .find("\n## ")
        .map_or(readme.len(), |i| start + 3 + i);
    let tour = &readme[start..end];
    let fence = format!("```{language}\n");
    let mut blocks = Vec::new();
    let mut rest = tour;
    while let Some(i) = rest.find(&fence) {
        let body = &rest[i + fence.len()..];
        let close = body.find("```").expect("closed fence");
        blocks.push(body[..close].to_owned());
        rest = &body[close..];
    }
    blocks
}

/// Drops what GraphQL ignores between tokens (whitespace, commas), so two
/// layouts of one query compare equal.
fn squash(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != ',')
        .collect()
}

/// The JSON body of a curl line (the single-quoted `-d` argument).
fn curl_body(line: &str) -> Value {
    let start = line.find("-d '").expect("-d") + 4;
    let end = line.rfind('\'').expect("closing quote");
    serde_json::from_str(&line[start..end]).expect("curl body is JSON")
}

#[tokio::test]
async fn the_readme_tour_works_verbatim() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("the embedded store is always there");
    let curls: Vec<String> = tour_blocks("sh")
        .into_iter()
        .filter(|b| b.trim_start().starts_with("curl"))
        .collect();
    // The descriptor type the tour shows is the built-in file's, as it is.
    let (types, graphql): (Vec<String>, Vec<String>) = tour_blocks("graphql")
        .into_iter()
        .partition(|b| b.contains("@descriptor"));
    assert_eq!(types.len(), 1, "the tour shows a descriptor type");
    let default = riverfeed::descriptor::catalog::DEFAULT_SOURCE;
    assert!(
        default.contains(types[0].trim()),
        "the tour's type is not the default file's: {}",
        types[0]
    );
    assert!(curls.len() >= 5, "the tour has its curl steps");

    // The GraphiQL text and the curl text are the same queries.
    let queries: Vec<&String> = graphql
        .iter()
        .filter(|q| !q.trim_start().starts_with("subscription"))
        .collect();
    assert_eq!(queries.len(), curls.len(), "one curl per GraphQL block");
    for (block, curl) in queries.iter().zip(&curls) {
        let body = curl_body(curl);
        assert_eq!(
            squash(body["query"].as_str().unwrap()),
            squash(block),
            "README curl and GraphQL block differ"
        );
    }

    let bob = server.client("acme", "bob");
    let mut outputs = Vec::new();
    for curl in &curls {
        let command = curl
            .trim()
            .replace("localhost:8080", &server.server.addr.to_string());
        let output = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(&command)
            .output()
            .await
            .expect("curl runs");
        assert!(output.status.success(), "{command}: {output:?}");
        let body: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("JSON from {command}: {output:?}"));
        assert!(body.get("errors").is_none(), "{command}: {body:#}");
        if let Some(id) = body["data"]["recordAction"]["actionId"].as_str() {
            bob.wait_delivered(id).await;
        }
        outputs.push(body);
    }
    let feed = outputs
        .iter()
        .find_map(|o| o["data"]["feed"]["edges"].as_array())
        .expect("the tour reads a feed");
    assert_eq!(feed.len(), 1, "{feed:?}");
    let node = &feed[0]["node"];
    assert_eq!(
        node["reason"],
        json!({ "kind": "FOLLOWS", "actorId": "bob" })
    );
    assert_eq!(node["action"]["actor"]["name"], "Bob Builder");
    assert_eq!(
        node["action"]["descriptor"]["applicantName"],
        "Mary Fanning"
    );
    let slice = outputs
        .iter()
        .find_map(|o| o["data"]["slice"]["edges"].as_array())
        .expect("the tour reads a slice");
    assert_eq!(
        slice[0]["node"]["descriptor"]["ratingText"],
        "Strong system design"
    );

    // The subscription block streams Bob's next action to Alice.
    let subscription = graphql
        .iter()
        .find(|q| q.trim_start().starts_with("subscription"))
        .expect("a subscription block");
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("tour", subscription).await;
    server.wait_live_topics(1).await;
    let record = curl_body(&curls[2]);
    let data = bob.data(record["query"].as_str().unwrap(), json!({})).await;
    let event = ws.next_payload().await;
    assert_eq!(event["data"]["feedEvents"]["kind"], "ADDED");
    assert_eq!(
        event["data"]["feedEvents"]["item"]["action"]["actionId"],
        data["recordAction"]["actionId"]
    );
    server.stop().await;
}

/// The anchors of a page's headings, as the link targets give them.
fn anchors(page: &str) -> Vec<String> {
    page.lines()
        .filter_map(|line| {
            line.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| line.starts_with('#'))
        })
        .map(|title| {
            title
                .to_lowercase()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// Every relative link in the README and the pages under `docs/` reaches a
/// file that exists and, where it names one, a heading of it: moving a
/// section to another page cannot leave a link behind.
#[test]
fn the_readme_and_docs_links_resolve() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("page");
        let dir = page.parent().expect("dir");
        for link in text
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
        {
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
            let target = if path.is_empty() {
                page.clone()
            } else {
                dir.join(path)
            };
            let found = target.exists()
                && (fragment.is_empty()
                    || anchors(&std::fs::read_to_string(&target).unwrap_or_default())
                        .iter()
                        .any(|a| a == fragment));
            if !found {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}

/// The README's table of every query, mutation and subscription: its
/// arguments and type as the served schema has them, and the first sentence
/// of its description. What is deprecated is left out: the table shows the
/// names to use.
fn operations_table() -> String {
    use async_graphql::parser::types::{TypeKind, TypeSystemDefinition};
    let deprecated = |directives: &[async_graphql::Positioned<
        async_graphql::parser::types::ConstDirective,
    >]| { directives.iter().any(|d| d.node.name.node == "deprecated") };
    let schema = async_graphql::parser::parse_schema(riverfeed::api::sdl(
        &riverfeed::descriptor::Catalog::builtin(),
    ))
    .expect("SDL parses");
    let mut table = String::from("| operation | what it answers |\n|---|---|\n");
    for root in ["Query", "Mutation", "Subscription"] {
        let fields = schema.definitions.iter().find_map(|d| match d {
            TypeSystemDefinition::Type(t) if t.node.name.node == root => match &t.node.kind {
                TypeKind::Object(o) => Some(&o.fields),
                _ => None,
            },
            _ => None,
        });
        for field in fields.expect("root type") {
            let field = &field.node;
            if deprecated(&field.directives) {
                continue;
            }
            let args: Vec<String> = field
                .arguments
                .iter()
                .filter(|a| !deprecated(&a.node.directives))
                .map(|a| format!("{}: {}", a.node.name.node, a.node.ty.node))
                .collect();
            let args = if args.is_empty() {
                String::new()
            } else {
                format!("({})", args.join(", "))
            };
            let description = field.description.as_ref().map_or("", |d| d.node.as_str());
            let first = description
                .split_inclusive(". ")
                .next()
                .unwrap_or_default()
                .replace('\n', " ")
                .replace('|', "\\|");
            let kind = root.to_lowercase();
            table.push_str(&format!(
                "| `{kind} {}{args}: {}` | {} |\n",
                field.name.node,
                field.ty.node,
                first.trim()
            ));
        }
    }
    table
}

/// The README lists every operation with its signature, as the schema has
/// them: a renamed argument or a new field cannot leave it behind.
#[test]
fn the_readme_lists_every_operation_with_its_signature() {
    let table = operations_table();
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains(&table),
        "the README's operations table differs from the schema; it should read:\n\n{table}"
    );
}

/// The README's table of error codes lists every code the server answers
/// with, and no other: the codes are the string constants of the API's
/// errors and the literals the HTTP layer refuses requests with.
#[test]
fn the_readme_lists_every_error_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = vec![root.join("api/error.rs")];
    for entry in std::fs::read_dir(root.join("http")).expect("src/http") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            sources.push(path);
        }
    }
    let mut answered = std::collections::BTreeSet::new();
    for source in sources {
        let text = std::fs::read_to_string(&source).expect("source");
        // Header values, build variables and environment variables are
        // not codes.
        let lines = text.lines().filter(|l| {
            !l.contains("from_static") && !l.contains("env!") && !l.contains("env::var")
        });
        for literal in lines.flat_map(|line| line.split('"').skip(1).step_by(2)) {
            if literal.len() > 3 && literal.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                answered.insert(literal.to_owned());
            }
        }
    }
    let readme = include_str!("../../README.md");
    let start = readme.find("\n## Errors").expect("an Errors section");
    let section = &readme[start..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |i| i + 1)];
    let listed: std::collections::BTreeSet<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(code, _)| code.to_owned()))
        .collect();
    assert_eq!(listed, answered, "codes in the README's Errors table");
}
