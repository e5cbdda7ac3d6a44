//! The command line as a user meets it: each command's help lists its own
//! flags (and the server's it reads), not every server flag; `token`
//! refuses a secret `serve` would refuse, with the server's words.

use std::process::{Command, Output};

/// `riverfeed` run with `args`, nothing from the environment's
/// configuration.
pub(crate) fn riverfeed(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_riverfeed"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("RIVERFEED_") {
            command.env_remove(name);
        }
    }
    command.args(args).output().expect("runs")
}

/// The flags `command --help` lists (the first words of its flag lines).
fn help(command: &str) -> Vec<String> {
    let output = riverfeed(&[command, "--help"]);
    assert!(output.status.success(), "{command} --help");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .flat_map(|line| {
            line.split_whitespace()
                .map(|word| word.trim_end_matches(','))
                .take_while(|word| word.starts_with('-'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn each_commands_help_shows_its_own_flags() {
    let server_only = [
        "--listen",
        "--jwt-secret",
        "--rate-limit",
        "--cors-origins",
        "--feed-model",
    ];
    for (command, own, hidden) in [
        (
            "schema",
            &[
                "--descriptors",
                "--federation",
                "--federation-entity",
                "--federation-node",
            ][..],
            &["--data-dir", "--store"][..],
        ),
        (
            "token",
            &["--tenant", "--user", "--role", "--secret", "--ttl-secs"][..],
            &["--data-dir", "--descriptors"][..],
        ),
        ("export", &["--tenant", "--out", "--store"][..], &[][..]),
        (
            "import",
            &["--in", "--merge", "--replace-cursor-key", "--store"][..],
            &[][..],
        ),
    ] {
        let flags = help(command);
        let shows = |flag: &&str| flags.iter().any(|f| f == flag);
        for flag in own {
            assert!(shows(flag), "{command} lacks {flag}: {flags:?}");
        }
        for flag in server_only.iter().chain(hidden) {
            assert!(!shows(flag), "{command} --help shows {flag}: {flags:?}");
        }
        assert!(flags.len() < 20, "{command} --help: {flags:?}");
    }
    // `serve` reads them all.
    let flags = help("serve");
    for flag in server_only {
        assert!(flags.iter().any(|f| f == flag), "serve lacks {flag}");
    }
}

#[test]
fn a_token_for_a_secret_the_server_refuses_is_not_minted() {
    let output = riverfeed(&[
        "token", "--tenant", "acme", "--user", "ann", "--secret", "short",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "minted: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(output.stdout.is_empty());
    assert!(
        stderr.contains("--jwt-secret must be at least 32 bytes long"),
        "{stderr}"
    );
    let secret = "a-secret-of-at-least-thirty-two-bytes";
    let output = riverfeed(&[
        "token", "--tenant", "acme", "--user", "ann", "--secret", secret,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).split('.').count(),
        3
    );
}
