//! Graceful shutdown: a request in flight finishes and new ones are refused; requests that outlive
//! the grace period are given up on.

use std::time::{Duration, Instant};

use compactd::http::{AppState, serve};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{FakeProvider, PROMPT, Reply, answer, chain_config, compact_body};

/// compactd served by `serve` with a shutdown trigger, for shutdown tests.
async fn serve_with_shutdown(
    config: compactd::config::ServeConfig,
    grace: Duration,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let state = AppState::from_config(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (trigger, stop) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        listener,
        state,
        async move {
            let _ = stop.await;
        },
        grace,
    ));
    (url, trigger, server)
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish_and_refuses_new_ones() {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai(&answer("finished")).after(Duration::from_millis(1500)),
    )
    .await;
    let (url, trigger, server) = serve_with_shutdown(
        chain_config(&fake, "openai:gpt-test", false),
        Duration::from_secs(20),
    )
    .await;
    let client = reqwest::Client::new();
    let in_flight = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move {
            client
                .post(format!("{url}/v1/compact"))
                .json(&compact_body(PROMPT))
                .send()
                .await
                .unwrap()
        }
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    trigger.send(()).unwrap();
    let response = in_flight.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.json::<Value>().await.unwrap()["summary"],
        answer("finished")
    );
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returns")
        .unwrap()
        .unwrap();
    assert!(
        reqwest::Client::new()
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_err(),
        "no longer accepting"
    );
}

#[tokio::test]
async fn shutdown_gives_up_on_requests_after_the_grace_period() {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai(&answer("too late")).after(Duration::from_secs(10)),
    )
    .await;
    let (url, trigger, server) = serve_with_shutdown(
        chain_config(&fake, "openai:gpt-test", false),
        Duration::from_millis(500),
    )
    .await;
    let in_flight = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{url}/v1/compact"))
            .json(&compact_body(PROMPT))
            .send()
            .await
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    trigger.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(3), server)
        .await
        .expect("serve returns after the grace period")
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "{:?}",
        started.elapsed()
    );
    in_flight.abort();
}
