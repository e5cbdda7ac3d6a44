//! Every query document the project writes down, found when the test runs:
//! string literals of the integration tests, the bench and the web demo,
//! the client tests' sources (their `node_modules` aside), and the README's
//! and docs' code blocks (and the strings in them, as a `curl` body holds
//! one). A piece of text is a document when async-graphql's parser reads
//! it as an executable document with a query operation.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use async_graphql::parser::types::{DocumentOperations, OperationType};

/// A harvested document and the query operations to run in it (`None`:
/// its one operation, anonymous or not).
pub struct Harvested {
    pub origin: String,
    pub document: String,
    pub operations: Vec<Option<String>>,
}

fn files(root: &Path, dir: &str, extensions: &[&str], into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        panic!("cannot read {dir}: the harvest has lost a source");
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "node_modules" && !name.starts_with('.') {
                let sub = path.strip_prefix(root).expect("under the root");
                files(root, &sub.to_string_lossy(), extensions, into);
            }
        } else if extensions.iter().any(|e| name.ends_with(e)) {
            into.push(path);
        }
    }
}

/// The documents of every source, each once.
pub fn harvest() -> Vec<Harvested> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    files(root, "tests/it", &[".rs"], &mut paths);
    files(root, "src/bench", &[".rs"], &mut paths);
    files(root, "web-demo", &[".js", ".html"], &mut paths);
    files(
        root,
        "tests/clients",
        &[".js", ".mjs", ".graphql"],
        &mut paths,
    );
    files(root, "docs", &[".md"], &mut paths);
    paths.push(root.join("README.md"));
    paths.sort();
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("a source file");
        let origin = path
            .strip_prefix(root)
            .expect("under the root")
            .display()
            .to_string();
        let candidates = if origin.ends_with(".md") {
            let mut blocks = fenced_blocks(&text);
            let strings: Vec<String> = blocks.iter().flat_map(|b| literals(b, false)).collect();
            blocks.extend(strings);
            blocks
        } else if origin.ends_with(".graphql") {
            vec![text.clone()]
        } else {
            literals(&text, origin.ends_with(".rs"))
        };
        for candidate in candidates {
            for text in variants(&candidate) {
                let Some(operations) = query_operations(&text) else {
                    continue;
                };
                let squashed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
                if seen.insert(squashed) {
                    found.push(Harvested {
                        origin: origin.clone(),
                        document: text,
                        operations,
                    });
                }
            }
        }
    }
    found
}

/// The text as written, and as a Rust format string would print it.
fn variants(candidate: &str) -> Vec<String> {
    if !candidate.contains('{') {
        return Vec::new();
    }
    let mut out = vec![candidate.to_owned()];
    if candidate.contains("{{") {
        out.push(candidate.replace("{{", "{").replace("}}", "}"));
    }
    out
}

/// The query operations of `text`, if it is an executable document that
/// holds any.
fn query_operations(text: &str) -> Option<Vec<Option<String>>> {
    let document = async_graphql::parser::parse_query(text).ok()?;
    let operations = match &document.operations {
        DocumentOperations::Single(op) => {
            (op.node.ty == OperationType::Query).then_some(vec![None])?
        }
        DocumentOperations::Multiple(ops) => {
            let mut names: Vec<Option<String>> = ops
                .iter()
                .filter(|(_, op)| op.node.ty == OperationType::Query)
                .map(|(name, _)| Some(name.to_string()))
                .collect();
            names.sort();
            (!names.is_empty()).then_some(names)?
        }
    };
    Some(operations)
}

/// The bodies of a Markdown file's fenced code blocks.
fn fenced_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(String::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// The string literals of a Rust, JavaScript or shell text, unescaped:
/// `"…"`, Rust's `r#"…"#`, and (outside Rust) `'…'` and template literals
/// without substitutions. Comments are skipped.
fn literals(text: &str, rust: bool) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    // JavaScript constants (`const PAGE = 20;`, a fragment's text) by
    // name, for the template literals that substitute them.
    let mut constants: HashMap<String, String> = HashMap::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        if rust && c == 'r' && (next == Some('#') || next == Some('"')) {
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') && (i == 0 || !chars[i - 1].is_alphanumeric()) {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let start = j + 1;
                let mut k = start;
                while k + close.len() <= chars.len() && chars[k..k + close.len()] != close[..] {
                    k += 1;
                }
                out.push(chars[start..k.min(chars.len())].iter().collect());
                i = k + close.len();
                continue;
            }
        }
        if rust && c == '\'' {
            // A char literal ('x', '\n', '\''); a lifetime has no closing quote.
            if next == Some('\\') {
                let mut k = i + 2;
                while k < chars.len() && chars[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            continue;
        }
        if !rust && c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if let Some(name) = constant_name(&chars[..start]) {
                constants.insert(name, chars[start..i].iter().collect());
            }
            continue;
        }
        let quote = c == '"' || (!rust && (c == '\'' || c == '`'));
        if !quote {
            i += 1;
            continue;
        }
        let (literal, end, clean) = quoted(&chars, i + 1, c, rust, &constants);
        if clean {
            if let Some(name) = (!rust).then(|| constant_name(&chars[..i])).flatten() {
                constants.insert(name, literal.clone());
            }
            out.push(literal);
        }
        i = end + 1;
    }
    out
}

/// The name a JavaScript `const NAME = ` just before a literal gives it.
fn constant_name(before: &[char]) -> Option<String> {
    let text: String = before[before.len().saturating_sub(80)..].iter().collect();
    let head = text.trim_end().strip_suffix('=')?.trim_end();
    let name: String = head
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let keyword = head[..head.len() - name.len()].trim_end();
    (!name.is_empty() && keyword.ends_with("const")).then_some(name)
}

/// The literal from `start` to its closing `quote`: its text unescaped
/// (a template literal's substitutions of `constants` made), where it
/// ends, and whether it is a whole text (a template literal with another
/// substitution is not).
fn quoted(
    chars: &[char],
    start: usize,
    quote: char,
    rust: bool,
    constants: &HashMap<String, String>,
) -> (String, usize, bool) {
    let mut text = String::new();
    let mut clean = true;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if c == quote {
            return (text, i, clean);
        }
        if quote == '`' && c == '$' && chars.get(i + 1) == Some(&'{') {
            let close = (i + 2..chars.len()).find(|&k| chars[k] == '}' || chars[k] == '`');
            let name: String = close.map_or_else(String::new, |k| chars[i + 2..k].iter().collect());
            match (close, constants.get(name.trim())) {
                (Some(k), Some(value)) if chars[k] == '}' => {
                    text.push_str(value);
                    i = k + 1;
                    continue;
                }
                _ => clean = false,
            }
        }
        if c == '\\' {
            let Some(&e) = chars.get(i + 1) else { break };
            match e {
                'n' => text.push('\n'),
                't' => text.push('\t'),
                'r' => text.push('\r'),
                '0' => text.push('\0'),
                '\n' if rust => {
                    i += 2;
                    while i < chars.len() && chars[i].is_whitespace() {
                        i += 1;
                    }
                    continue;
                }
                'u' => {
                    let rest: String = chars[i + 2..].iter().take(10).collect();
                    let (hex, used) = if let Some(braced) = rest.strip_prefix('{') {
                        let close = braced.find('}').unwrap_or(0);
                        (braced[..close].to_owned(), close + 2)
                    } else {
                        (rest.chars().take(4).collect(), 4)
                    };
                    match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        Some(ch) => text.push(ch),
                        None => clean = false,
                    }
                    i += 2 + used;
                    continue;
                }
                other => text.push(other),
            }
            i += 2;
            continue;
        }
        if c == '\n' && quote != '`' && !rust {
            // A quote that is not a string's (an apostrophe in prose).
            return (text, i, false);
        }
        text.push(c);
        i += 1;
    }
    (text, chars.len(), false)
}

#[test]
fn literals_of_rust_and_javascript() {
    let rust = "let a = \"query { \\\n    viewer { id } }\"; let b = r#\"{ feed { nodes { id } } }\"#; // \"{ no }\"\nlet c = 'x';";
    assert_eq!(
        literals(rust, true),
        vec!["query { viewer { id } }", "{ feed { nodes { id } } }"]
    );
    let js = "const q = `query Q($a: ID!) { action(actionId: $a) { id } }`; const r = `${x} {}`; f('{ viewer { name } }');";
    assert_eq!(
        literals(js, false),
        vec![
            "query Q($a: ID!) { action(actionId: $a) { id } }",
            "{ viewer { name } }"
        ]
    );
    let substituted = "const PAGE = 20;\nconst F = 'id';\nconst q = `{ feed(first: ${PAGE}) { nodes { ${ F } } } }`;";
    assert_eq!(
        literals(substituted, false),
        vec!["id", "{ feed(first: 20) { nodes { id } } }"]
    );
    assert_eq!(
        query_operations("query A { viewer { id } } mutation B { markAllRead { removed } } query C { viewer { name } }"),
        Some(vec![Some("A".to_owned()), Some("C".to_owned())])
    );
    assert_eq!(
        query_operations("subscription { feedEvents { kind } }"),
        None
    );
}
