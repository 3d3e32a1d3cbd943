//! `kafka-group`: inspect and operate consumer groups with static members (KIP-345) from the
//! shell, in the manner of Kafka's own `kafka-consumer-groups.sh`.
//!
//! One module per subcommand; this file holds the global options, the client set-up and the
//! mapping from errors to exit codes that scripts rely on.

// First, so that its `out!`/`outln!` macros are in scope in the subcommand modules.
#[macro_use]
mod output;
mod broker_versions;
mod describe;
mod join;
mod properties;
mod remove_member;
mod transactions;

use clap::{Parser, Subcommand};
use kafka_group::{Client, Error};
use std::process::ExitCode;
use std::time::Duration;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  usage or configuration error
  2  broker or Kafka error (unreachable, timed out, error code from the broker)
  3  not found: describe of a group its coordinator does not know (or that is dead),
     remove-member of an instance id that is not in the group, transactions describe of
     a transactional id its coordinator does not know
  4  not supported by the broker (too old: missing capability or no common API version)
  5  remove-member --wait: a removed instance came back (its process still runs)
  6  join: the member never joined its group before --duration, --max-records or the end
     of input stopped it (the last cause, e.g. a refused connection, is printed)

Logs go to standard error (-v info, -vv debug, -vvv trace; RUST_LOG overrides).";

/// Inspect and operate Kafka consumer groups with static members (KIP-345).
#[derive(Debug, Parser)]
#[command(name = "kafka-group", version, after_help = EXIT_CODES)]
struct Cli {
    /// Brokers to bootstrap from, comma-separated, as for Kafka's own tools.
    #[arg(
        long,
        global = true,
        env = "KAFKA_BOOTSTRAP",
        value_name = "HOST:PORT[,HOST:PORT...]"
    )]
    bootstrap_server: Option<String>,

    /// More log output on standard error: -v info, -vv debug, -vvv trace.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    /// Print one JSON document instead of tables (`join`: one JSON object per line).
    #[arg(long, global = true)]
    json: bool,

    /// A properties file of client settings, as Kafka's tools take it (`security.protocol`,
    /// `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`,
    /// `ssl.endpoint.identification.algorithm`, `sasl.mechanism`, `sasl.username`,
    /// `sasl.password`, `sasl.jaas.config` for PlainLoginModule and ScramLoginModule, timeouts,
    /// `client.id`); a consumer's or producer's keys are skipped, unknown ones ignored with a
    /// warning.
    #[arg(long, global = true, value_name = "FILE")]
    command_config: Option<std::path::PathBuf>,

    /// How long to keep retrying each broker call, in seconds.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30)]
    timeout: u64,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Describe(describe::Args),
    RemoveMember(remove_member::Args),
    Join(join::Args),
    BrokerVersions(broker_versions::Args),
    Transactions(transactions::Args),
}

/// What a subcommand ends with when it does not succeed: the exit code and a message for
/// standard error.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

/// Exit code 1.
pub const USAGE: u8 = 1;
/// Exit code 2.
pub const BROKER: u8 = 2;
/// Exit code 3.
pub const NOT_FOUND: u8 = 3;
/// Exit code 4.
pub const UNSUPPORTED: u8 = 4;
/// Exit code 5.
pub const CAME_BACK: u8 = 5;
/// Exit code 6.
pub const NEVER_JOINED: u8 = 6;

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match &e {
            Error::Config { .. } => USAGE,
            Error::MissingCapability { .. } | Error::UnsupportedVersion { .. } => UNSUPPORTED,
            _ => BROKER,
        };
        Failure::new(code, e.to_string())
    }
}

/// What every subcommand gets: a connected client and the global output choice.
pub struct Ctx {
    pub client: Client,
    pub json: bool,
    pub timeout: Duration,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap exits with 2 on usage errors; 2 means a broker error here.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { USAGE } else { 0 });
        }
    };
    let level = match cli.verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    env_logger::Builder::new()
        .filter_level(level)
        .parse_env("RUST_LOG")
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("kafka-group: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let Some(bootstrap) = cli.bootstrap_server.filter(|b| !b.trim().is_empty()) else {
        return Err(Failure::new(
            USAGE,
            "no brokers given: use --bootstrap-server HOST:PORT or set KAFKA_BOOTSTRAP",
        ));
    };
    if cli.timeout == 0 {
        return Err(Failure::new(USAGE, "--timeout must be at least 1 second"));
    }
    let timeout = Duration::from_secs(cli.timeout);
    let mut builder = Client::builder()
        .client_id("kafka-group-cli")
        .api_timeout(timeout)
        // request.timeout.ms is an int32 of milliseconds; a longer --timeout still bounds the
        // whole command through the api timeout.
        .request_timeout(timeout.min(Duration::from_millis(i32::MAX as u64)))
        .connect_timeout(timeout.min(Duration::from_secs(10)));
    if let Some(path) = &cli.command_config {
        builder = properties::apply(builder, path)?;
    }
    // The command line wins over the file, as in Kafka's tools.
    let client = builder.bootstrap_servers(bootstrap).build()?;
    let ctx = Ctx {
        client,
        json: cli.json,
        timeout,
    };
    match cli.command {
        Command::Describe(args) => describe::run(&ctx, args),
        Command::RemoveMember(args) => remove_member::run(&ctx, args),
        Command::Join(args) => join::run(&ctx, args),
        Command::BrokerVersions(args) => broker_versions::run(&ctx, args),
        Command::Transactions(args) => transactions::run(&ctx, args),
    }
}
