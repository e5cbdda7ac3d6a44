//! The command line: `riverfeed [serve] [flags]` and its commands — `serve`
//! (the default), `worker`, `schema`, `token`, `bench`, `export` and
//! `import`. Each command's own flags live with it ([`TokenArgs`] here,
//! [`BenchArgs`](crate::bench::BenchArgs) with the bench, the archive
//! commands' with them); the server's, shared by every command that opens a
//! store, are [`ServeArgs`] in [`config`](crate::config).

use clap::{Args, Parser, Subcommand};

use crate::auth::{mint_hs256, Claims};
use crate::config::ServeArgs;

#[derive(Debug, Parser)]
#[command(
    name = "riverfeed",
    version,
    about = "Activity feeds over GraphQL, with live subscriptions"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Flags of `serve` (which also runs with no subcommand); they may stand
    /// before or after it.
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl Cli {
    /// Parses the process's arguments. The server's flags stand on every
    /// command, before or after it; a command's help shows its own flags
    /// and the server's it reads, no others.
    pub fn parse_args() -> Self {
        use clap::FromArgMatches;
        let matches = Self::shown().get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    /// The command line, with what each command's help shows.
    fn shown() -> clap::Command {
        use clap::CommandFactory;
        let mut command = Self::command();
        command.build();
        let names: Vec<String> = command
            .get_subcommands()
            .map(|sub| sub.get_name().to_owned())
            .collect();
        for name in names {
            let Some(read) = server_flags_read(&name) else {
                continue;
            };
            command = command.mut_subcommand(name, |sub| {
                sub.mut_args(|arg| {
                    let id = arg.get_id().as_str();
                    let shown = !arg.is_global_set() || read.contains(&id);
                    let hidden = !shown || arg.is_hide_set();
                    arg.hide(hidden)
                })
            });
        }
        command
    }
}

/// The server's flags (of [`ServeArgs`]) a command reads, when it reads
/// only some: its help shows those beside its own. `None`: every one, as
/// `serve`, `worker` and `bench` (which starts a server) read them.
fn server_flags_read(command: &str) -> Option<&'static [&'static str]> {
    // The flags that open a store, and last what an import reads beside
    // them (it rebuilds group feeds).
    const IMPORT: &[&str] = &[
        "data_dir",
        "store",
        "cache_size",
        "timeline_layout",
        "bucket_size",
        "embed_actions",
        "group_feed_size",
    ];
    const STORE: &[&str] = match IMPORT.split_last() {
        Some((_, store)) => store,
        None => &[],
    };
    match command {
        "export" => Some(STORE),
        "import" => Some(IMPORT),
        // The schema printed: the descriptor types and the federation.
        "schema" => Some(&[
            "descriptors",
            "federation",
            "federation_entities",
            "federation_node",
        ]),
        "token" => Some(&[]),
        _ => None,
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the GraphQL API and run the fan-out worker (the default).
    Serve,
    /// Run the fan-out worker and the background jobs (bumps, cleanups,
    /// expiry, river upkeep) without the API: one of any number of workers
    /// sharing a MongoDB store with `serve --no-worker` processes. Answers
    /// `/healthz` and `/metrics` on --listen.
    Worker,
    /// Print the GraphQL schema (SDL).
    Schema,
    /// Mint an HS256 token, for trying the JWT path by hand.
    Token(TokenArgs),
    /// Measure the server in-process: fan-out, feed reads, live delivery.
    /// `--store` picks the backend (a fresh temporary embedded store by
    /// default; a MongoDB URI gets a fresh database, dropped afterwards).
    Bench(crate::bench::BenchArgs),
    /// Write every record of a store (or of one tenant) as JSON Lines, to a
    /// file or stdout. `--store` picks the store as for `serve`.
    Export(crate::archive_cmd::ExportArgs),
    /// Read records (JSON Lines, as `export` writes them) into a store, all
    /// or nothing: the whole archive is checked before anything is written.
    /// A tenant that holds data already takes an archive only with `--merge`.
    Import(crate::archive_cmd::ImportArgs),
    /// Holds live subscribers for `bench` in a process of their own.
    #[command(hide = true)]
    LiveSubscribers(crate::bench::live::SubscribersArgs),
    /// Reads feed pages for `bench` from a process of its own.
    #[command(hide = true)]
    ReadLoad(crate::bench::reads::ReadLoadArgs),
}

#[derive(Clone, Debug, Args)]
pub struct TokenArgs {
    /// The token's tenant.
    #[arg(long)]
    pub tenant: String,
    /// The token's user (`sub`).
    #[arg(long)]
    pub user: String,
    /// Roles: user (the default), service, admin. Repeat for several.
    #[arg(long = "role", value_parser = ["user", "service", "admin"])]
    pub roles: Vec<String>,
    /// The shared secret the server checks tokens with.
    #[arg(long, env = "RIVERFEED_JWT_SECRET", hide_env_values = true)]
    pub secret: String,
    /// Seconds until the token expires.
    #[arg(long, default_value_t = 3600)]
    pub ttl_secs: u64,
    /// `iss` claim.
    #[arg(long, env = "RIVERFEED_JWT_ISSUER")]
    pub issuer: Option<String>,
    /// `aud` claim.
    #[arg(long, env = "RIVERFEED_JWT_AUDIENCE")]
    pub audience: Option<String>,
}

impl TokenArgs {
    /// The token, unless the server would refuse it: a secret `serve`
    /// refuses, or ids it would refuse as arguments.
    pub fn mint(&self) -> anyhow::Result<String> {
        crate::config::check_hs256_secret(&self.secret)
            .map_err(|e| anyhow::anyhow!("--secret is refused as serve refuses it: {e}"))?;
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        // The server refuses a token whose ids it would refuse as arguments:
        // mint none of those, and mint ids in the form the server keeps.
        let id = |flag: &str, value: &str| {
            crate::model::limits::normalize_id(flag, value).map_err(anyhow::Error::msg)
        };
        let claims = Claims {
            sub: id("--user", &self.user)?,
            tenant: id("--tenant", &self.tenant)?,
            roles: (!self.roles.is_empty()).then(|| self.roles.clone()),
            exp: now + self.ttl_secs,
            iat: Some(now),
            iss: self.issuer.clone(),
            aud: self.audience.clone().map(Into::into),
            nbf: None,
        };
        mint_hs256(&claims, self.secret.as_bytes()).map_err(anyhow::Error::msg)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser;

    use super::*;
    use crate::config::parse_size;

    #[test]
    fn a_token_is_minted_for_ids_the_server_accepts_only() {
        let mint = |user: &str| {
            Cli::try_parse_from([
                "riverfeed",
                "token",
                "--tenant",
                "acme",
                "--user",
                user,
                "--secret",
                "a-secret-of-at-least-thirty-two-bytes!!",
            ])
            .map(|cli| match cli.command {
                Some(Command::Token(args)) => args.mint(),
                _ => panic!("the token command"),
            })
            .expect("flags parse")
        };
        assert!(mint("alice").is_ok());
        let err = mint("bob\u{200B}").expect_err("refused").to_string();
        assert!(err.contains("U+200B"), "{err}");
    }

    #[test]
    fn a_token_is_refused_for_a_secret_the_server_refuses() {
        let cli = |args: &[&str]| Cli::try_parse_from(args).expect("flags parse");
        let token = cli(&[
            "riverfeed",
            "token",
            "--tenant",
            "acme",
            "--user",
            "ann",
            "--secret",
            "short",
        ]);
        let Some(Command::Token(args)) = token.command else {
            panic!("the token command");
        };
        let minted = args.mint().expect_err("refused").to_string();
        let served = cli(&["riverfeed", "--jwt-secret", "short"])
            .serve
            .options()
            .err()
            .expect("refused")
            .to_string();
        assert!(minted.ends_with(&served), "{minted} / {served}");
    }

    #[test]
    fn serve_flags_go_before_or_after_the_subcommand() {
        for args in [
            vec![
                "riverfeed",
                "--listen",
                "127.0.0.1:9",
                "--data-dir",
                "d",
                "serve",
            ],
            vec![
                "riverfeed",
                "serve",
                "--listen",
                "127.0.0.1:9",
                "--data-dir",
                "d",
            ],
        ] {
            let cli = Cli::try_parse_from(&args).expect("parses");
            assert!(matches!(cli.command, Some(Command::Serve)));
            assert_eq!(cli.serve.listen.port(), 9, "{args:?}");
            assert_eq!(cli.serve.options().unwrap().store, "embedded:d");
        }
    }

    #[test]
    fn archive_commands_take_the_store_as_serve_does() {
        let cli =
            Cli::try_parse_from(["riverfeed", "export", "--data-dir", "d", "--tenant", "acme"])
                .expect("parses");
        let Some(Command::Export(args)) = &cli.command else {
            panic!("export: {:?}", cli.command);
        };
        assert_eq!(args.tenant.as_deref(), Some("acme"));
        assert_eq!(args.out, PathBuf::from("-"));
        assert_eq!(cli.serve.store_url(), "embedded:d");
        let cli = Cli::try_parse_from([
            "riverfeed",
            "import",
            "--store",
            "mongodb://db/feeds",
            "--in",
            "all.jsonl",
            "--batch",
            "50",
        ])
        .expect("parses");
        let Some(Command::Import(args)) = &cli.command else {
            panic!("import: {:?}", cli.command);
        };
        assert_eq!((args.input.to_str(), args.batch), (Some("all.jsonl"), 50));
        assert_eq!(cli.serve.store_url(), "mongodb://db/feeds");
        assert!(Cli::try_parse_from(["riverfeed", "import", "--batch", "0"]).is_err());
        assert!(Cli::try_parse_from(["riverfeed", "migrate", "--data-dir", "old"]).is_err());
    }

    /// `.env.example` holds every variable the binary reads, and only those
    /// (each flag's environment twin, of every command, and the log
    /// filter), and a value it sets is the flag's default.
    #[test]
    fn the_env_example_lists_every_variable_read() {
        use clap::CommandFactory;
        use std::collections::BTreeMap;
        type Defaults = BTreeMap<String, Option<String>>;
        fn envs(command: &clap::Command, out: &mut Defaults) {
            for arg in command.get_arguments() {
                if let Some(env) = arg.get_env() {
                    let default = arg.get_default_values().first();
                    let default = default.map(|v| v.to_string_lossy().into_owned());
                    out.insert(env.to_string_lossy().into_owned(), default);
                }
            }
            for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
                envs(sub, out);
            }
        }
        let mut read = Defaults::from([("RUST_LOG".to_owned(), None)]);
        envs(&Cli::command(), &mut read);
        let mut listed = Defaults::new();
        for line in include_str!("../.env.example").lines() {
            let set = !line.starts_with('#');
            let Some((name, value)) = line.trim_start_matches(['#', ' ']).split_once('=') else {
                continue;
            };
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                listed.insert(name.to_owned(), set.then(|| value.to_owned()));
            }
        }
        let names = |m: &Defaults| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&listed), names(&read), "variables in .env.example");
        for (name, value) in &listed {
            if let (Some(value), Some(Some(default))) = (value, read.get(name)) {
                assert_eq!(value, default, "{name} in .env.example is not the default");
            }
        }
    }

    /// `export --help` and `import --help` show their own flags and the
    /// store's, not the server's (which they still accept).
    #[test]
    fn archive_commands_show_their_own_flags() {
        let mut command = Cli::shown();
        for (name, shown, hidden) in [
            (
                "export",
                ["--tenant", "--out", "--data-dir", "--store"],
                "--group-feed-size",
            ),
            (
                "import",
                ["--in", "--batch", "--store", "--group-feed-size"],
                "--tenant",
            ),
        ] {
            let help = command
                .find_subcommand_mut(name)
                .expect("command")
                .render_long_help()
                .to_string();
            for flag in shown {
                assert!(help.contains(flag), "{name} --help lacks {flag}");
            }
            for flag in [
                hidden,
                "--listen",
                "--jwt-secret",
                "--feed-model",
                "--rate-limit",
            ] {
                assert!(
                    !help.contains(&format!("{flag} ")),
                    "{name} --help shows {flag}"
                );
            }
        }
        let cli = Cli::try_parse_from(["riverfeed", "export", "--listen", "127.0.0.1:9"])
            .expect("still accepted");
        assert_eq!(cli.serve.listen.port(), 9);
    }

    #[test]
    fn demo_mode_is_for_dev_mode_only() {
        let cli = Cli::try_parse_from(["riverfeed", "serve", "--demo"]).expect("parses");
        assert!(cli.serve.options().expect("dev mode").demo);
        let cli = Cli::try_parse_from([
            "riverfeed",
            "--demo",
            "--jwt-secret",
            "0123456789abcdef0123456789abcdef",
        ])
        .expect("parses");
        let err = cli.serve.options().err().expect("refused with tokens");
        assert!(err.to_string().contains("--demo"), "{err}");
    }

    #[test]
    fn cache_sizes_read_with_or_without_a_unit() {
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("268435456"), Ok(268_435_456));
        let cli = Cli::try_parse_from(["riverfeed"]).unwrap();
        assert_eq!(
            cli.serve
                .options()
                .unwrap()
                .store_settings
                .embedded
                .cache_bytes,
            1 << 30
        );
    }

    #[test]
    fn out_of_range_values_are_refused() {
        for bad in [
            vec!["riverfeed", "--fanout-lease-secs", "0"],
            vec!["riverfeed", "--fanout-lease-secs", "99999999999999"],
            vec!["riverfeed", "--fanout-batch", "0"],
            vec!["riverfeed", "--event-buffer", "100000000"],
            vec!["riverfeed", "--cache-size", "1MiB"],
            vec!["riverfeed", "--cache-size", "12 parsecs"],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_http_connection_cap_leaves_room_for_live_connections() {
        let options = |args: &[&str]| {
            let mut all = vec!["riverfeed"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).expect("parses").serve.options()
        };
        let defaults = options(&[]).unwrap();
        assert_eq!(
            defaults.listen_limits.total(&defaults.ws_limits),
            10_000 + 1_000 + 1_024
        );
        let small = options(&["--max-connections", "100", "--max-http-connections", "1200"]);
        assert_eq!(small.unwrap().listen_limits.max_connections, Some(1200));
        let err = options(&["--max-http-connections", "11000"])
            .err()
            .expect("no room for plain requests");
        assert!(err.to_string().contains("--max-http-connections"), "{err}");
    }
}
