//! Keys known by their provider's prefix, at any near length, and bearer tokens.

use super::{Placeholders, Redactor};
use compactd_testkit::samples;

fn redactor() -> Redactor {
    Redactor::new(None).unwrap()
}

/// A key of a provider whose prefix nothing else begins with is redacted when it is one
/// character short or long (cut when copied, or of a newer format): the prefix decides, not the
/// exact length gitleaks' rule expects. Nothing of it reaches a model.
#[test]
fn near_misses_of_unmistakable_prefixes_are_redacted() {
    let redactor = redactor();
    let prefixed = [
        "aws",
        "gcp",
        "openai",
        "anthropic",
        "github",
        "gitlab",
        "slack",
        "stripe",
    ];
    let mut leaked = Vec::new();
    for seed in [1, 2, 3] {
        for sample in samples::all(seed)
            .into_iter()
            .filter(|s| prefixed.contains(&s.family))
        {
            let last = sample.secret.chars().last().unwrap();
            let short = sample.secret[..sample.secret.len() - 1].to_owned();
            let long = format!("{}{last}", sample.secret);
            for near in [short, long] {
                let line = sample.line.replace(&sample.secret, &near);
                let mut names = Placeholders::default();
                let redacted = redactor.redact(&format!("before\n{line}\nafter"), &mut names);
                // Not even the prefix and the first characters of the rest survive.
                let head: String = near.chars().take(12).collect();
                if redacted.contains(&head) {
                    leaked.push(format!("{}: {redacted}", sample.family));
                }
            }
        }
    }
    assert!(leaked.is_empty(), "{leaked:#?}");
}

/// Keys of providers whose prefix nothing else begins with, at their documented length and one
/// character short or long: each is redacted whole (`provider-key`).
#[test]
fn prefixed_provider_keys_of_any_near_length_are_redacted() {
    let redactor = redactor();
    let alnum = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let hex = b"0123456789abcdef";
    let upper = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let shapes: [(&str, usize, &[u8]); 25] = [
        ("AIza", 35, alnum),
        ("ya29.", 60, alnum),
        ("xai-", 80, alnum),
        ("gsk_", 52, alnum),
        ("r8_", 37, alnum),
        ("pplx-", 48, alnum),
        ("lin_api_", 40, alnum),
        ("shpat_", 32, hex),
        ("dop_v1_", 64, hex),
        ("sk-or-v1-", 64, hex),
        ("dapi", 32, hex),
        ("glsa_", 32, alnum),
        ("PMAK-", 59, hex),
        ("NRAK-", 27, upper),
        ("figd_", 40, alnum),
        ("fo1_", 43, alnum),
        ("sbp_", 40, hex),
        ("tskey-api-", 40, alnum),
        ("dp.st.", 43, alnum),
        ("dckr_pat_", 27, alnum),
        ("pypi-AgEIcHlwaS5vcmc", 60, alnum),
        ("sq0atp-", 22, alnum),
        ("ntn_", 46, alnum),
        ("rubygems_", 48, hex),
        ("xapp-1-A0", 60, upper),
    ];
    let mut rng = fastrand::Rng::with_seed(55);
    let mut leaked = Vec::new();
    for (prefix, length, alphabet) in shapes {
        for length in [length - 1, length, length + 1] {
            let rest: String = (0..length)
                .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
                .collect();
            let key = format!("{prefix}{rest}");
            let text = format!("before\nthe key is {key} for the deploy\nafter");
            let mut names = Placeholders::default();
            let redacted = redactor.redact(&text, &mut names);
            if redacted.contains(&rest[..8]) {
                leaked.push(redacted);
            }
        }
    }
    assert!(leaked.is_empty(), "{leaked:#?}");
    // Their shapes in prose and documentation stay.
    let mut names = Placeholders::default();
    for text in [
        "the key looks like AIzaXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "set it to xai-your-key-here",
        "SKIPPED 32 tests in dapi-client",
    ] {
        assert_eq!(redactor.redact(text, &mut names), text);
    }
}

/// A bearer token is a credential whoever issued it: in a header, a curl command or a log line,
/// its value is redacted; a variable or a placeholder in its place stays.
#[test]
fn bearer_tokens_are_redacted_and_their_placeholders_kept() {
    let redactor = redactor();
    let token =
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let opaque = "Qm9vbGVhbkV4cHJlc3Npb24K7Zx3";
    for text in [
        format!("curl -H 'Authorization: Bearer {token}' https://api.example.com"),
        format!("authorization: bearer {opaque}"),
        format!("[http] sent headers {{\"Authorization\": \"Bearer {opaque}\"}}"),
    ] {
        let mut names = Placeholders::default();
        let redacted = redactor.redact(&text, &mut names);
        assert!(
            !redacted.contains(&opaque[..12]) && !redacted.contains(&token[..20]),
            "{redacted}"
        );
    }
    for text in [
        "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com",
        "Authorization: Bearer ${GITHUB_TOKEN}",
        "headers: { Authorization: `Bearer ${token}` }",
        "set Authorization: Bearer <your-token-here>",
        "the bearer authentication scheme sends a token",
        "Authorization: Bearer accessToken.value",
    ] {
        let mut names = Placeholders::default();
        assert_eq!(redactor.redact(text, &mut names), text);
    }
}
