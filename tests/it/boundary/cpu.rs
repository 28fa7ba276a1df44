//! Hostile sizes bound the CPU a request takes (issue 52): a prompt built to be slow to screen
//! (megabytes of one line with a would-be secret every few bytes) answers by the deadline — its
//! summary, or a 503 with Retry-After — and `/healthz` answers meanwhile.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::support::{TestApp, compact_body, config, secs};

#[tokio::test]
async fn a_prompt_slow_to_screen_answers_by_the_deadline_and_the_service_stays_up() {
    let mut config = config();
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    config.summarizers.deadline = secs(2.0);
    let app = TestApp::spawn(config).await;
    let line = "password=abcd1234efgh api_key = 'a1b2c3d4e5f6g7h8' ".repeat(5_000_000 / 52);
    let prompt =
        format!("<conversation>\n[User]: {line}\n\n[User]: fix it\n</conversation>\n\n## Goal");
    let body = compact_body(&prompt);
    let started = Instant::now();
    let request = app.compact(&body);
    let health = async {
        // While it is screened (admitted, its screening under way), the runtime serves others.
        app.wait_for_metric("compactd_summarizer_in_flight", 1.0)
            .await;
        let asked = Instant::now();
        let response = reqwest::get(format!("{}/healthz", app.url)).await.unwrap();
        (response.status(), asked.elapsed())
    };
    let (response, (health, health_took)) = tokio::join!(request, health);
    let took = started.elapsed();
    assert_eq!(health, StatusCode::OK);
    assert!(health_took < Duration::from_secs(1), "{health_took:?}");
    match response.status() {
        StatusCode::OK => {}
        StatusCode::SERVICE_UNAVAILABLE => {
            assert!(response.headers().contains_key("retry-after"));
        }
        other => panic!("{other}: {}", response.text().await.unwrap()),
    }
    // The deadline, and the moments it takes to answer after it.
    assert!(took < Duration::from_secs(6), "answered after {took:?}");
}
