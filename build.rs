//! Puts GraphiQL's browser bundles where the binary can embed them.
//!
//! GraphiQL and React are pinned npm packages (`src/http/graphiql/package.json`
//! and its lock file), not files of this repository: when they are not
//! installed, or the lock file changed since, this runs `npm ci` there. Then
//! it copies the bundles the page loads into `OUT_DIR`, under names that carry
//! their versions, and writes the list `src/http/graphiql.rs` includes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bundles the page loads: the key the page names it by, its package,
/// its file in the package, what follows the version in the name it is served
/// under (`react-18.3.1.production.min.js`), and its media type.
const BUNDLES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "react.js",
        "react",
        "umd/react.production.min.js",
        ".production.min.js",
        "text/javascript; charset=utf-8",
    ),
    (
        "react-dom.js",
        "react-dom",
        "umd/react-dom.production.min.js",
        ".production.min.js",
        "text/javascript; charset=utf-8",
    ),
    (
        "graphiql.js",
        "graphiql",
        "graphiql.min.js",
        ".min.js",
        "text/javascript; charset=utf-8",
    ),
    (
        "graphiql.css",
        "graphiql",
        "graphiql.min.css",
        ".min.css",
        "text/css; charset=utf-8",
    ),
];

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dir = root.join("src/http/graphiql");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/http/graphiql/package.json");
    // The lock file says what is installed. `node_modules` is not watched:
    // the `npm ci` below rewrites it, which would make the next build run
    // this script again and rebuild the crate for nothing.
    println!("cargo:rerun-if-changed=src/http/graphiql/package-lock.json");

    install(&dir);

    let assets = out.join("graphiql");
    fs::create_dir_all(&assets).expect("create OUT_DIR/graphiql");
    let mut list = String::from(
        "// Written by build.rs: the GraphiQL bundles, by the names they are served under.\n\
         const BUNDLES: &[Bundle] = &[\n",
    );
    for (key, package, file, suffix, content_type) in BUNDLES {
        let package_dir = dir.join("node_modules").join(package);
        let served = format!("{package}-{}{suffix}", version_of(&package_dir));
        fs::copy(package_dir.join(file), assets.join(&served))
            .unwrap_or_else(|err| panic!("cannot copy {package}/{file}: {err}"));
        list.push_str(&format!(
            "    Bundle {{ key: {key:?}, name: {served:?}, content_type: {content_type:?}, \
             body: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/graphiql/{served}\")) }},\n"
        ));
    }
    list.push_str("];\n");
    fs::write(out.join("graphiql_bundles.rs"), list).expect("write the bundle list");
}

/// `npm ci` in `dir` unless its `node_modules` is as the lock file says. An
/// exclusive lock on the lock file keeps two builds (say, a test build and
/// clippy) from installing at once.
fn install(dir: &Path) {
    let lock = dir.join("package-lock.json");
    let guard =
        fs::File::open(&lock).unwrap_or_else(|err| panic!("cannot open {}: {err}", lock.display()));
    guard
        .lock()
        .unwrap_or_else(|err| panic!("cannot lock {}: {err}", lock.display()));
    let installed = dir.join("node_modules/.package-lock.json");
    let current = match (fs::metadata(&lock), fs::metadata(&installed)) {
        (Ok(wanted), Ok(have)) => match (wanted.modified(), have.modified()) {
            (Ok(wanted), Ok(have)) => have >= wanted,
            _ => false,
        },
        _ => false,
    };
    if current {
        return;
    }
    let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
    // Offline when npm's cache has the packages already; the registry otherwise.
    let status = Command::new(npm)
        .args([
            "ci",
            "--no-audit",
            "--no-fund",
            "--prefer-offline",
            "--loglevel=error",
        ])
        .current_dir(dir)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => fail(&format!(
            "`npm ci` in {} failed ({status}): GraphiQL's bundles come from the npm registry \
             the first time they are installed",
            dir.display()
        )),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => fail(
            "building riverfeed needs npm, to install the GraphiQL and React bundles the \
             binary serves (pinned in src/http/graphiql/package-lock.json): install Node.js \
             and npm (on Debian or Ubuntu: apt-get install nodejs npm, which \
             scripts/prerequisites does)",
        ),
        Err(err) => fail(&format!("cannot run npm: {err}")),
    }
}

/// Stops the build with `message` alone (no backtrace: nothing is broken
/// in here).
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}

/// The `version` of the npm package installed in `dir`.
fn version_of(dir: &Path) -> String {
    let manifest = dir.join("package.json");
    let text = fs::read_to_string(&manifest)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", manifest.display()));
    // The top-level `"version": "x.y.z"`: the first such key in these files.
    let after = text
        .split_once("\"version\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(version, _)| version.to_owned());
    match after {
        Some(version)
            if !version.is_empty()
                && version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+')) =>
        {
            version
        }
        _ => panic!("no version in {}", manifest.display()),
    }
}
