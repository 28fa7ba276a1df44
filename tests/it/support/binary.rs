//! The real `compactd` binary, run as a user runs it: a clean environment, the settings in
//! variables, and port 0 so that the system picks a free port (no bind-drop-rebind race); the
//! address it bound is read back from its "compactd serving" log line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// `compactd ARGS` with a clean environment and the given variables.
pub fn compactd(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_compactd"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// A running `compactd serve`.
pub struct Served {
    child: Child,
    /// `http://ADDRESS` as it bound it.
    pub base: String,
    logs: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Starts `compactd serve` with `env` (listening on `127.0.0.1:0` unless `COMPACTD_LISTEN` is
    /// given) and waits until it serves. The log filter always lets the serving line through.
    pub fn start(env: &[(&str, &str)]) -> Served {
        Served::start_with_open_files(env, None)
    }

    /// [`Served::start`] with the soft limit of open files set to `open_files` first (as a
    /// shell's `ulimit -Sn` leaves it for the programs it starts).
    pub fn start_with_open_files(env: &[(&str, &str)], open_files: Option<u64>) -> Served {
        let filter = env
            .iter()
            .find(|(name, _)| *name == "COMPACTD_LOG")
            .map_or("warn", |(_, value)| value);
        let filter = format!("{filter},compactd::cli=info");
        let mut env: Vec<(&str, &str)> = env
            .iter()
            .filter(|(name, _)| *name != "COMPACTD_LOG")
            .copied()
            .collect();
        if !env.iter().any(|(name, _)| *name == "COMPACTD_LISTEN") {
            env.push(("COMPACTD_LISTEN", "127.0.0.1:0"));
        }
        env.push(("COMPACTD_LOG", &filter));
        let mut command = match open_files {
            None => compactd(&["serve"], &env),
            Some(limit) => {
                let mut command = compactd(&[], &env);
                let mut shell = Command::new("sh");
                shell
                    .arg("-c")
                    .arg(format!("ulimit -Sn {limit} && exec \"$0\" serve",))
                    .arg(command.get_program())
                    .env_clear()
                    .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))));
                command = shell;
                command
            }
        };
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(String::new()));
        let (bound, address) = mpsc::channel();
        // Reads the log to its end (so the child never blocks on a full pipe), keeping it.
        let reader = std::thread::spawn({
            let logs = logs.clone();
            move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line.contains("compactd serving")
                        && let Some(at) = line
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix("listen="))
                    {
                        let _ = bound.send(at.to_owned());
                    }
                    let mut logs = logs.lock().unwrap();
                    logs.push_str(&line);
                    logs.push('\n');
                }
            }
        });
        let address = match address.recv_timeout(Duration::from_secs(30)) {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                panic!("compactd did not start:\n{}", logs.lock().unwrap());
            }
        };
        Served {
            child,
            base: format!("http://{address}"),
            logs,
            reader: Some(reader),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process (SIGKILL: no shutdown of any kind) and returns everything it logged.
    pub fn kill_9(mut self) -> String {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.logs.lock().unwrap().clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
