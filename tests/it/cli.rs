//! The command line as a user meets it: `token` refuses a secret `serve`
//! would refuse, with the server's words.

use std::process::{Command, Output};

/// `riverfeed` run with `args`, nothing from the environment's
/// configuration.
fn riverfeed(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_riverfeed"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("RIVERFEED_") {
            command.env_remove(name);
        }
    }
    command.args(args).output().expect("runs")
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
