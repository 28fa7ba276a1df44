//! A PostgreSQL server the test owns: its own cluster in a temporary directory, listening only on
//! a Unix socket in that directory (no TCP port to pick, so no race for one), that the test can
//! stop and start again (storage faults, readiness).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Tells apart the clusters of one test process.
static CLUSTERS: AtomicUsize = AtomicUsize::new(0);

pub struct OwnedPostgres {
    dir: PathBuf,
    bindir: PathBuf,
}

fn bindir() -> PathBuf {
    compactd_testkit::postgres_bindir()
        .expect("PostgreSQL server binaries (scripts/ensure-postgres.sh installs them)")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a server binary, as the `postgres` user when we are root (PostgreSQL refuses root).
fn run(bindir: &Path, tool: &str, args: &[&str]) {
    let program = bindir.join(tool);
    let status = if is_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&program)
            .args(args)
            .status()
    } else {
        Command::new(&program).args(args).status()
    }
    .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(status.success(), "{tool} {args:?} failed");
}

impl OwnedPostgres {
    /// A fresh cluster (trust authentication, user `postgres`), started.
    pub fn start() -> OwnedPostgres {
        let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("compactd-pg-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let bindir = bindir();
        let data = dir.join("data");
        run(
            &bindir,
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
            ],
        );
        let server = OwnedPostgres { dir, bindir };
        server.resume();
        server
    }

    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@localhost/postgres?host={}&sslmode=disable",
            self.dir.display()
        )
    }

    /// Stops the server (fast shutdown: open connections are cut).
    pub fn stop(&self) {
        run(
            &self.bindir,
            "pg_ctl",
            &["-D", self.data().as_str(), "-m", "fast", "-w", "stop"],
        );
    }

    /// Starts the stopped server again, on the same socket.
    pub fn resume(&self) {
        let options = format!(
            "-c listen_addresses='' -k {} -c fsync=off",
            self.dir.display()
        );
        let log = self.dir.join("server.log");
        run(
            &self.bindir,
            "pg_ctl",
            &[
                "-D",
                self.data().as_str(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }
}

impl Drop for OwnedPostgres {
    fn drop(&mut self) {
        let pg_ctl = self.bindir.join("pg_ctl");
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "stop"];
        let _ = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&pg_ctl)
                .args(args)
                .output()
        } else {
            Command::new(&pg_ctl).args(args).output()
        };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
