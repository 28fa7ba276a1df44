//! The parts a test may need beyond the Rust toolchain, and what a test does without one.
//!
//! `cargo test` on a fresh clone runs everything that needs nothing else (the unit tests, the
//! SQLite half of every storage test, the HTTP service against fakes) and skips each test that
//! needs PostgreSQL, a browser, node or the real agents, with one line on the terminal naming
//! the test, what it needs and how to get it. `scripts/test.sh` installs and starts all of them
//! and sets `COMPACTD_TEST_FULL=1`, under which a missing part fails the test instead: the full
//! tier cannot pass by skipping.
//!
//! Public only for compactd's own tests; not an API.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A part some tests need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A PostgreSQL server to make test databases on (`DATABASE_URL`).
    Postgres,
    /// PostgreSQL's server programs (`initdb`, `pg_ctl`), for tests that run a cluster of their own.
    PostgresServer,
    /// Headless chromium and chromedriver.
    Browser,
    /// Node 22 with the reference MCP SDK (`scripts/agents.sh install`).
    Node,
    /// The real coding agents (`scripts/agents.sh install`).
    Agents,
    /// The providers' official Python SDKs, pinned (`scripts/sdks.sh install`).
    Sdks,
}

impl Part {
    fn what(self) -> &'static str {
        match self {
            Part::Postgres => "PostgreSQL (DATABASE_URL)",
            Part::PostgresServer => "PostgreSQL's server programs (initdb, pg_ctl)",
            Part::Browser => "headless chromium and chromedriver",
            Part::Node => "node 22 and the MCP SDK",
            Part::Agents => "the real agents (Claude Code, Codex, OpenCode, pi, oh-my-pi)",
            Part::Sdks => "the official OpenAI and Anthropic Python SDKs",
        }
    }

    fn how(self) -> &'static str {
        match self {
            Part::Postgres => {
                "set DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres (scripts/ensure-postgres.sh starts one)"
            }
            Part::PostgresServer => "apt-get install postgresql (scripts/ensure-postgres.sh does)",
            Part::Browser => "apt-get install chromium chromium-driver (scripts/test.sh does)",
            Part::Node | Part::Agents => "scripts/agents.sh install (scripts/test.sh does)",
            Part::Sdks => "scripts/sdks.sh install (scripts/test.sh does)",
        }
    }

    /// Whether this machine has the part.
    pub fn present(self) -> bool {
        match self {
            Part::Postgres => std::env::var_os("DATABASE_URL").is_some_and(|v| !v.is_empty()),
            Part::PostgresServer => postgres_bindir().is_some(),
            Part::Browser => {
                let driver =
                    std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
                let chromium =
                    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
                on_path(&driver) && Path::new(&chromium).exists()
            }
            Part::Node => {
                let bin = agents_bin();
                bin.join("node22").exists() && bin.join("mcp-node-modules").exists()
            }
            Part::Agents => {
                let bin = agents_bin();
                ["claude", "codex", "opencode", "pi", "omp"]
                    .iter()
                    .all(|b| bin.join(b).exists())
            }
            Part::Sdks => sdk_python().exists(),
        }
    }
}

/// Whether the full tier is running (`COMPACTD_TEST_FULL=1`): every part must be there.
pub fn full_tier() -> bool {
    std::env::var("COMPACTD_TEST_FULL").is_ok_and(|v| v == "1")
}

/// Whether `test` can run with `part`: `true` when the part is there; otherwise one line on the
/// terminal and `false` (the test returns, skipped), or in the full tier a failure.
pub fn have(part: Part, test: &str) -> bool {
    if part.present() {
        return true;
    }
    // The test harness names each test's thread after the test; `test` is the fallback (the
    // module, from `needs!`).
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name,
        _ => test,
    };
    assert!(
        !full_tier(),
        "{test} needs {}, which is missing: {}",
        part.what(),
        part.how()
    );
    // Straight to the terminal: the test harness captures only what `print!` writes.
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: needs {}; {}",
        part.what(),
        part.how()
    );
    false
}

/// The repository's root: the workspace, its `tests/fixtures/` and `target/`.
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The recorded sessions and requests every crate's tests read (`tests/fixtures/`).
pub fn fixtures() -> PathBuf {
    workspace_root().join("tests/fixtures")
}

/// Where `scripts/agents.sh install` puts the agents and node (`COMPACTD_AGENTS_BIN`, else
/// `target/agents/bin`).
pub fn agents_bin() -> PathBuf {
    std::env::var("COMPACTD_AGENTS_BIN").map_or_else(
        |_| workspace_root().join("target/agents/bin"),
        PathBuf::from,
    )
}

/// The python of the SDKs' virtualenv (`scripts/sdks.sh install`).
pub fn sdk_python() -> PathBuf {
    workspace_root().join("target/sdks/venv/bin/python")
}

/// The directory of PostgreSQL's server programs, if they are installed.
pub fn postgres_bindir() -> Option<PathBuf> {
    if let Ok(out) = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("pg_ctl").exists() {
            return Some(dir);
        }
    }
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    candidates.sort();
    candidates.pop()
}

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).exists()))
}

/// Returns from the test when `part` is missing (see [`have`]).
#[macro_export]
macro_rules! needs {
    ($($part:ident),+) => {
        $(
            if !$crate::have($crate::Part::$part, module_path!()) {
                return;
            }
        )+
    };
}

/// A test on a fresh PostgreSQL database of its own (as `#[sqlx::test]` makes one, from
/// `DATABASE_URL`), skipped without PostgreSQL (see [`have`]):
/// `postgres_test! { async fn name(pool: sqlx::PgPool) { … } }`.
#[macro_export]
macro_rules! postgres_test {
    ($(#[$meta:meta])* async fn $name:ident($pool:ident: $ty:ty) $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            let path = concat!(module_path!(), "::", stringify!($name));
            if !$crate::have($crate::Part::Postgres, path) {
                return;
            }
            async fn inner($pool: $ty) $body
            let mut args = ::sqlx::testing::TestArgs::new(path);
            args.fixtures(&[]);
            let run: fn($ty) -> _ = inner;
            ::sqlx::testing::TestFn::run_test(run, args)
        }
    };
}
