//! The command line: `compactd serve` (the default) runs the service; `compactd plan` and
//! `compactd context` work on local session files; `compactd keys` manages API keys ([`keys`]).

mod handoff;
mod input;
mod keys;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

pub use keys::{KeysAction, KeysArgs};

use crate::config::{LogFormat, LoggingConfig, ServeConfig, StorageConfig, SummarizerConfig};
use compactd_core::compaction::pi15::Planner;
use compactd_core::compaction::{CompactionSettings, PlanOutcome};
use compactd_core::session::{ParseOptions, Session};

#[derive(Debug, Parser)]
#[command(
    name = "compactd",
    version,
    about = "Context compaction for LLM coding agents",
    after_help = "Without a command compactd serves: `compactd` is `compactd serve`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process arguments; with no command (or only `serve`'s flags) it is `serve`.
    /// Each command reads only its own settings, so that a setting of a group it does not use
    /// (an invalid `COMPACTD_MODEL_OPTIONS` for `compactd keys list`) cannot stop it.
    pub fn from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Cli {
        let mut args: Vec<std::ffi::OsString> = args.into_iter().collect();
        let first = args.get(1).and_then(|a| a.to_str());
        let asks_for_help = matches!(first, Some("-h" | "--help" | "-V" | "--version"));
        if !asks_for_help && first.is_none_or(|a| a.starts_with('-')) {
            args.insert(1.min(args.len()), "serve".into());
        }
        Cli::parse_from(args)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    Serve(Box<ServeConfig>),
    /// Plan a compaction of a session file exactly as pi would and print the plan as JSON.
    Plan(PlanArgs),
    /// Print the LLM-facing message list rebuilt from a session file as JSON.
    Context(ContextArgs),
    /// Compact a session file with the configured summarizers; print the compaction entry.
    Compact(Box<CompactArgs>),
    /// Hand a session file off to a new session focused on a goal: write it, print the draft.
    Handoff(Box<handoff::HandoffArgs>),
    /// Apply the database migrations and exit.
    Migrate(Box<StorageConfig>),
    /// Create, list and revoke API keys.
    Keys(Box<KeysArgs>),
    /// Exit 0 when the service at URL answers its liveness check (the Docker HEALTHCHECK).
    Healthcheck {
        /// Base URL of the service.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Extra focus for the summary (as `/compact <text>`).
    #[arg(long)]
    pub instructions: Option<String>,
    /// Text the summary must carry verbatim (in a `## Pinned` section); repeatable.
    #[arg(long = "pin")]
    pub pins: Vec<String>,
    /// Append the entry to FILE as the agent would (a v1/v2 file is first rewritten as v3, as pi
    /// rewrites it when it loads it).
    #[arg(long)]
    pub write: bool,
    /// Summarizer settings (the same as `compactd serve`'s).
    #[command(flatten)]
    pub summarizers: SummarizerConfig,
    /// Where the call is logged (the same database as `compactd serve`'s).
    #[command(flatten)]
    pub storage: StorageConfig,
}

/// The token budget of a plan or compaction.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// Tokens of recent conversation to keep verbatim.
    #[arg(long, default_value_t = CompactionSettings::default().keep_recent_tokens)]
    pub keep_recent_tokens: u64,
    /// Tokens reserved for the model's answer.
    #[arg(long, default_value_t = CompactionSettings::default().reserve_tokens,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub reserve_tokens: u64,
}

impl BudgetArgs {
    pub fn settings(&self) -> CompactionSettings {
        CompactionSettings {
            enabled: true,
            reserve_tokens: self.reserve_tokens,
            keep_recent_tokens: self.keep_recent_tokens,
        }
    }
}

#[derive(Debug, Args)]
pub struct SessionArgs {
    /// Session file (JSONL); `-` reads standard input.
    pub file: PathBuf,
    /// Plan from this entry instead of the last one.
    #[arg(long)]
    pub leaf: Option<String>,
    /// Skip malformed lines (as pi does) instead of rejecting the file.
    #[arg(long)]
    pub lenient: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Whose rules: `auto` (the file decides: pi 1.5's entries mean pi 1.5), `pi-1.5` or `pi-0.x`
    #[arg(long, default_value = "auto", value_parser = ["auto", "pi-1.5", "pi-0.x"])]
    pub planner: String,
}

#[derive(Debug, Args)]
pub struct ContextArgs {
    #[command(flatten)]
    pub session: SessionArgs,
}

/// A failure the command reports on stderr with exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(String);

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError(message.into())
    }
}

/// Runs a parsed command, writing its JSON to `out`.
pub fn run(cli: Cli, out: &mut impl Write) -> Result<(), CliError> {
    match cli.command {
        Command::Serve(config) => serve(*config),
        Command::Compact(args) => compact(*args, out),
        Command::Migrate(config) => migrate(*config, out),
        Command::Healthcheck { url } => healthcheck(&url),
        Command::Keys(args) => keys::run(*args, out),
        Command::Handoff(args) => handoff::run(*args, out),
        Command::Plan(args) => {
            let session = load(&args.session)?;
            let path = session
                .active_path(args.session.leaf.as_deref())
                .map_err(|e| CliError(e.to_string()))?;
            let settings = args.budget.settings();
            let planner = match args.planner.as_str() {
                "pi-1.5" => Some(Planner::Pi15),
                "pi-0.x" => Some(Planner::Pi0),
                _ => None,
            };
            let written =
                PlanOutcome::write_json_for_path(&path, &settings, planner, |plan| plan, out)
                    .and_then(|()| writeln!(out))
                    .map_err(|e| CliError(format!("cannot write output: {e}")));
            // The process ends next: freeing tens of thousands of entries one by one is work
            // nobody waits for (4 % of planning a 20 MB session).
            drop(path);
            std::mem::forget(session);
            written
        }
        Command::Context(args) => {
            let session = load(&args.session)?;
            let path = session
                .active_path(args.session.leaf.as_deref())
                .map_err(|e| CliError(e.to_string()))?;
            write_json(
                out,
                &crate::app::compaction::plans::ContextView::of_path(&path).messages,
            )
        }
    }
}

fn load(args: &SessionArgs) -> Result<Session, CliError> {
    let bytes = input::read(&args.file).map_err(CliError)?;
    let options = ParseOptions {
        lenient: args.lenient,
        ..ParseOptions::default()
    };
    let session = Session::parse_shared(bytes, options)
        .map_err(|e| CliError(format!("{}: {e}", args.file.display())))?;
    if !session.skipped.is_empty() || !session.repairs.is_empty() {
        eprintln!(
            "{}: skipped {} malformed line(s), repaired {} link(s)",
            args.file.display(),
            session.skipped.len(),
            session.repairs.len()
        );
    }
    Ok(session)
}

fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<(), CliError> {
    serde_json::to_writer(&mut *out, value)
        .map_err(|e| CliError(format!("cannot write output: {e}")))?;
    writeln!(out).map_err(|e| CliError(format!("cannot write output: {e}")))
}

/// A configuration error, naming the setting.
fn invalid(error: String) -> CliError {
    CliError(format!("invalid configuration: {error}"))
}

/// Starts the service and runs it until SIGTERM or Ctrl-C.
fn serve(config: ServeConfig) -> Result<(), CliError> {
    config.validate().map_err(invalid)?;
    // Held to the end: dropping it writes out the log lines still queued.
    let _log_writer = init_tracing(&config.logging);
    for (name, instead) in crate::config::removed_settings_set() {
        tracing::warn!(
            setting = name,
            instead,
            "a removed setting is set: compactd ignores it"
        );
    }
    let open_files = crate::http::server::raise_open_file_limit();
    tracing::debug!(open_files, "open-file limit");
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = config.http.worker_threads {
        builder.worker_threads(threads.get());
    }
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let state = crate::http::AppState::from_config(&config)
            .await
            .map_err(|e| CliError(format!("{e:#}")))?;
        let first_key = state
            .app
            .check_exposure(&config)
            .await
            .map_err(|e| CliError(format!("{e:#}")))?;
        if let Some(key) = first_key {
            // Shown once, on standard output (not in the log): the only copy besides its hash.
            println!(
                "compactd: no API key existed, so one was created for tenant \"default\"; it is \
                 shown only now: {key}\n\
                 compactd: agents use it in the URL (http://HOST:PORT/k/{key}/v1/compact) or as \
                 `Authorization: Bearer {key}`; `compactd keys create` makes more"
            );
        }
        let listen = config.http.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| CliError(format!("cannot listen on {listen}: {e}")))?;
        // The bound address (the real port when asked for port 0): scripts and tests read it.
        tracing::info!(
            listen = %listener.local_addr().map_or(listen, |a| a),
            chain = ?state.app.chain_names(),
            storage = state.app.storage_backend(),
            "compactd serving"
        );
        let app = state.app.clone();
        let served = crate::http::serve(
            listener,
            state,
            shutdown_signal(),
            config.http.shutdown_grace,
        )
        .await
        .map_err(|e| CliError(format!("server error: {e}")));
        app.flush_writes().await;
        tracing::info!("compactd stopped");
        served
    })
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received: finishing requests in flight");
}

/// The log, on standard error. Lines are written by a thread of their own, so that a request
/// never waits for the terminal or the pipe (every gateway turn logs its line): it queues the
/// line (at most 128,000 of them; past that it waits, and no line is lost).
fn init_tracing(config: &LoggingConfig) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .finish(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A second initialisation (tests) is not an error worth reporting.
    let _ = match config.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    guard
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("cannot start the async runtime: {e}")))
}

/// `compactd compact FILE`: the compaction the HTTP API would make, for a local file, through
/// the same pipeline (the call is logged in the configured database, under `cli`).
fn compact(args: CompactArgs, out: &mut impl Write) -> Result<(), CliError> {
    args.storage.validate().map_err(invalid)?;
    args.summarizers.validate().map_err(invalid)?;
    if args.write && args.session.file == Path::new("-") {
        return Err(CliError("--write needs a file, not standard input".into()));
    }
    for pin in &args.pins {
        crate::app::sessions::pins::check_pin(pin).map_err(|e| CliError(format!("--pin: {e}")))?;
    }
    if args.pins.len() > crate::app::sessions::pins::MAX_PINS {
        return Err(CliError(format!(
            "--pin: {} pins, over the limit of {}",
            args.pins.len(),
            crate::app::sessions::pins::MAX_PINS
        )));
    }
    let session = load(&args.session)?;
    let request = crate::app::compaction::compactor::CompactionRequest {
        leaf_id: args.session.leaf.clone(),
        settings: args.budget.settings(),
        custom_instructions: args.instructions.clone(),
        pins: args.pins.clone(),
        prepared: None,
    };
    let outcome = runtime()?.block_on(async {
        let store = compactd_store::connect(&crate::app::store_config(&args.storage))
            .await
            .map_err(|e| CliError(format!("{e:#}")))?;
        let app = crate::app::App::build(&args.summarizers, &args.storage, store)
            .map_err(|e| CliError(format!("{e:#}")))?;
        let outcome = app.compact_file(&session, &request).await;
        // The call log is written in the background: wait for it before the process ends.
        app.flush_writes().await;
        outcome.map_err(|e| CliError(e.to_string()))
    })?;
    eprintln!(
        "compacted by {} in {} ms: ~{} tokens before, ~{} after; fidelity: {}",
        outcome.model,
        outcome.latency_ms,
        outcome.entry.tokens_before,
        outcome.tokens_after,
        outcome.fidelity.header_value()
    );
    for missing in &outcome.fidelity.missing {
        eprintln!(
            "  not in the summary ({}): {}",
            missing.kind.label(),
            missing.text
        );
    }
    if args.write {
        write_entry(&args.session.file, &session, &outcome.line)?;
    }
    writeln!(out, "{}", outcome.line).map_err(|e| CliError(format!("cannot write output: {e}")))
}

/// Appends `line` to the session file. A file read from an older format is rewritten whole, as
/// v3, atomically (see [`crate::session_file::replace`]): a crash leaves the old file intact, and its
/// permissions are kept.
fn write_entry(file: &Path, session: &Session, line: &str) -> Result<(), CliError> {
    let failed = |e: std::io::Error| CliError(format!("cannot write {}: {e}", file.display()));
    if session.source_version >= compactd_core::session::CURRENT_VERSION {
        crate::session_file::append_line(file, line).map_err(failed)
    } else {
        let contents = session.to_jsonl() + line + "\n";
        crate::session_file::replace(file, contents.as_bytes()).map_err(failed)
    }
}

/// `compactd migrate`: connects to the configured database and applies its migrations.
fn migrate(config: StorageConfig, out: &mut impl Write) -> Result<(), CliError> {
    config.validate().map_err(invalid)?;
    let store = runtime()?
        .block_on(compactd_store::connect(&crate::app::store_config(&config)))
        .map_err(|e| CliError(format!("{e:#}")))?;
    writeln!(out, "migrations applied ({})", store.backend())
        .map_err(|e| CliError(format!("cannot write output: {e}")))
}

/// `GET {url}/healthz` over plain HTTP with std only, so the runtime image needs no curl.
fn healthcheck(url: &str) -> Result<(), CliError> {
    use std::net::ToSocketAddrs;
    let failed = |why: String| CliError(format!("unhealthy: {why}"));
    let authority = url
        .strip_prefix("http://")
        .ok_or_else(|| failed("the healthcheck URL must start with http://".into()))?
        .trim_end_matches('/');
    let address = authority
        .to_socket_addrs()
        .map_err(|e| failed(format!("{authority}: {e}")))?
        .next()
        .ok_or_else(|| failed(format!("{authority} resolves to nothing")))?;
    let timeout = std::time::Duration::from_secs(3);
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout)
        .map_err(|e| failed(e.to_string()))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| failed(e.to_string()))?;
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| failed(e.to_string()))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| failed(e.to_string()))?;
    match response.split(' ').nth(1) {
        Some("200") => Ok(()),
        status => Err(failed(format!("status {}", status.unwrap_or("none")))),
    }
}
