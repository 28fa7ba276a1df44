//! `TestApp`'s verbs, one per endpoint the tests call most: a test says what it asks of compactd
//! (`app.compact(&body)`, `app.entries(id)`) instead of spelling its route. Every verb goes
//! through [`TestApp::send`], so its answer is checked against `/openapi.json` like any other.

use serde_json::Value;

use super::TestApp;

impl TestApp {
    /// `POST /v1/compact`: the remote endpoint of pi-family agents.
    pub async fn compact(&self, body: &Value) -> reqwest::Response {
        self.post("/v1/compact", body).await
    }

    /// `POST /v1/chat/completions`: compactd's chat wire.
    pub async fn chat(&self, body: &Value) -> reqwest::Response {
        self.post("/v1/chat/completions", body).await
    }

    /// `POST /v1/sessions`: a pi session file uploaded (NDJSON).
    pub async fn upload(&self, file: impl Into<reqwest::Body>) -> reqwest::Response {
        self.post_raw("/v1/sessions", file).await
    }

    /// `GET /v1/sessions`: the stored sessions the caller's tenant can see.
    pub async fn sessions(&self) -> reqwest::Response {
        self.get("/v1/sessions").await
    }

    /// `GET /v1/sessions/{id}/plan?{query}`: a stored session's compaction planned as pi plans it
    /// (`query` may be empty).
    pub async fn plan(&self, id: &str, query: &str) -> reqwest::Response {
        self.get(&with_query(&format!("/v1/sessions/{id}/plan"), query))
            .await
    }

    /// `POST /v1/plan?{query}`: a session file planned without storing it.
    pub async fn plan_file(
        &self,
        query: &str,
        file: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.post_raw(&with_query("/v1/plan", query), file).await
    }

    /// `GET /v1/sessions/{id}`: a stored session's summary.
    pub async fn session(&self, id: &str) -> reqwest::Response {
        self.get(&format!("/v1/sessions/{id}")).await
    }

    /// `GET /v1/sessions/{id}/entries`: a stored session's file, as pi writes it.
    pub async fn entries(&self, id: &str) -> reqwest::Response {
        self.get(&format!("/v1/sessions/{id}/entries")).await
    }

    /// `POST /v1/sessions/{id}/entries`: lines appended to a stored session (NDJSON).
    pub async fn append(&self, id: &str, lines: impl Into<reqwest::Body>) -> reqwest::Response {
        self.post_raw(&format!("/v1/sessions/{id}/entries"), lines)
            .await
    }

    /// `GET /v1/sessions/{id}/compactions`: a stored session's compactions.
    pub async fn compactions(&self, id: &str) -> reqwest::Response {
        self.get(&format!("/v1/sessions/{id}/compactions")).await
    }

    /// `POST /v1/sessions/{id}/compactions`: a stored session compacted.
    pub async fn compact_session(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post(&format!("/v1/sessions/{id}/compactions"), body)
            .await
    }

    /// `GET /v1/sessions/{id}/context`: what the model reads of a stored session now.
    pub async fn context(&self, id: &str) -> reqwest::Response {
        self.get(&format!("/v1/sessions/{id}/context")).await
    }
}

fn with_query(path: &str, query: &str) -> String {
    match query {
        "" => path.to_owned(),
        query => format!("{path}?{query}"),
    }
}
