//! A real browser for tests: Debian's headless `chromium` driven through `chromedriver`
//! (WebDriver, by fantoccini). `scripts/test.sh` installs both when they are missing.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};

/// `chromedriver` on a free port, stopped when dropped.
pub struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    pub fn start() -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let binary = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
        let child = Command::new(&binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {binary} ({e}): scripts/test.sh installs Debian's chromium-driver"
                )
            });
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        // Ready when it accepts connections.
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not start listening"
            );
            std::thread::yield_now();
        }
        driver
    }

    /// A headless browser session.
    pub async fn browser(&self) -> Client {
        self.browser_with(&[]).await
    }

    /// A headless browser session with more command-line switches (`--host-resolver-rules=…`).
    pub async fn browser_with(&self, extra: &[&str]) -> Client {
        let binary = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1300,1400",
            // This machine's network is closed: no background connections to Google's hosts.
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|a| a.to_string()));
        let capabilities = json!({
            "goog:chromeOptions": {"binary": binary, "args": args}
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        // chromedriver may accept connections a moment before it takes sessions.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&self.url)
                .await
            {
                Ok(client) => return client,
                Err(error) if Instant::now() > deadline => {
                    panic!("no browser session from chromedriver: {error}")
                }
                Err(_) => tokio::task::yield_now().await,
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
