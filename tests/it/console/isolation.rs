//! The console scenario's last step ([`super::pages`]): another tenant's key sees none of what
//! the first tenant uploaded, compacted, pinned or searched, in the browser or through its forms.

use super::pages::{Made, Scene};

impl Scene {
    /// Another tenant's key sees none of it.
    pub(super) async fn another_tenant_sees_none(&self, id: &str, made: &Made) {
        let (app, console) = (&self.app, &self.console);
        let (bob, entry_id) = (&self.bob, &made.entry_id);
        // Another tenant's key sees none of it.
        console.click("#logout").await;
        console
            .wait_for_url("the login page", |p| p.starts_with("/ui/login"))
            .await;
        console.sign_in(bob).await;
        assert_eq!(console.text("#tenant").await, "bob");
        console.find("#no-sessions").await;
        assert_eq!(console.count("tr.session").await, 0);
        console.go("/ui/recall?q=wombat").await;
        console.find("#recall-none").await;
        for path in [
            format!("/ui/sessions/{id}"),
            format!("/ui/sessions/{id}/compactions/{entry_id}"),
            format!("/ui/sessions/{id}/download"),
        ] {
            console.go(&path).await;
            let message = console.text("#error-message").await;
            assert!(
                message.contains("no session") || message.contains("no compaction"),
                "{path}: {message}"
            );
        }
        console.go("/ui/fleet").await;
        assert!(!console.text("#series").await.contains(made.model.as_str()));
        assert!(!console.text("#recent-table").await.contains("claude-code"));
        // Bob's forms cannot reach it either.
        let refused = app
            .client
            .post(format!("{}/ui/sessions/{id}/pins", app.url))
            .header("cookie", format!("compactd_key={bob}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("text=bob+was+here")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 404);
    }
}
