//! Made-up secrets, one per family the redaction stage must catch, shaped as the real ones are
//! (prefixes, lengths, alphabets, entropy), for the tests and the benchmark. The random parts
//! come from a seeded generator, so a family's sample is the same in every run.

/// `(family, the rule expected to find it, the secret, the text around it)`.
#[derive(Debug, Clone)]
pub struct Sample {
    pub family: &'static str,
    pub rule: &'static str,
    pub secret: String,
    /// A line of text carrying the secret as real sessions do.
    pub line: String,
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const URLSAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const DIGITS: &[u8] = b"0123456789";

struct Gen(fastrand::Rng);

impl Gen {
    fn of(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| alphabet[self.0.usize(..alphabet.len())] as char)
            .collect()
    }
}

/// How a family's sample is made: its secret, and a line carrying it as real sessions do.
type Make = fn(&mut Gen) -> (String, String);

/// Every family the redaction stage must catch, with the rule expected to find it, in the order
/// [`all`] draws them (the same seed, the same secrets).
const FAMILIES: [(&str, &str, Make); 13] = [
    ("aws", "aws-access-token", |g| {
        let aws = format!("AKIA{}", g.of(UPPER32, 16));
        (aws.clone(), format!("aws_access_key_id = {aws}"))
    }),
    ("gcp", "gcp-api-key", |g| {
        let gcp = format!("AIza{}", g.of(URLSAFE, 35));
        let line = format!("curl 'https://maps.googleapis.com/maps/api/geocode/json?key={gcp}'");
        (gcp, line)
    }),
    ("azure", "azure-ad-client-secret", |g| {
        let azure = format!("{}8Q~{}", g.of(ALNUM, 3), g.of(ALNUM, 34));
        (azure.clone(), format!("client_secret: \"{azure}\""))
    }),
    ("openai", "openai-api-key", |g| {
        let openai = format!("sk-proj-{}T3BlbkFJ{}", g.of(URLSAFE, 74), g.of(URLSAFE, 74));
        (openai.clone(), format!("export OPENAI_API_KEY={openai}"))
    }),
    ("anthropic", "anthropic-api-key", |g| {
        let anthropic = format!("sk-ant-api03-{}AA", g.of(URLSAFE, 93));
        (
            anthropic.clone(),
            format!("Use this key: {anthropic} for the tests."),
        )
    }),
    ("github", "github-pat", |g| {
        let github = format!("ghp_{}", g.of(ALNUM, 36));
        let line = format!("git clone https://x-access-token@github.com/acme/app # token {github}");
        (github, line)
    }),
    ("gitlab", "gitlab-pat", |g| {
        let gitlab = format!("glpat-{}", g.of(URLSAFE, 20));
        (gitlab.clone(), format!("GITLAB token is {gitlab}"))
    }),
    ("slack", "slack-bot-token", |g| {
        let slack = format!(
            "xoxb-{}-{}-{}",
            g.of(DIGITS, 12),
            g.of(DIGITS, 13),
            g.of(ALNUM, 24)
        );
        (slack.clone(), format!("SLACK_BOT={slack}"))
    }),
    ("stripe", "stripe-access-token", |g| {
        let stripe = format!("sk_live_{}", g.of(ALNUM, 24));
        (stripe.clone(), format!("Stripe.api_key = '{stripe}'"))
    }),
    ("private-key", "private-key", |g| {
        let body: Vec<String> = (0..6).map(|_| g.of(ALNUM, 64)).collect();
        let pem = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
            body.join("\n")
        );
        (pem.clone(), pem)
    }),
    ("jwt", "jwt", |g| {
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{}.{}",
            g.of(ALNUM, 40),
            g.of(URLSAFE, 43)
        );
        let line = format!("Authorization header was {jwt} before it expired");
        (jwt, line)
    }),
    ("url-credentials", "url-credentials", |g| {
        let password = g.of(ALNUM, 18);
        let line = format!("DATABASE=postgres://app:{password}@db.internal:5432/app");
        (password, line)
    }),
    ("env", "env-assignment", |g| {
        let env = format!("{}-{}", g.of(ALNUM, 8), g.of(ALNUM, 8));
        (env.clone(), format!("DB_PASSWORD={env}"))
    }),
];

/// One sample per family, from `seed` (different seeds give different secrets of the same shapes).
pub fn all(seed: u64) -> Vec<Sample> {
    let mut g = Gen(fastrand::Rng::with_seed(seed));
    FAMILIES
        .iter()
        .map(|(family, rule, make)| {
            let (secret, line) = make(&mut g);
            Sample {
                family,
                rule,
                secret,
                line,
            }
        })
        .collect()
}

/// Ordinary code and tool output that hold no secret but are full of what looks random —
/// checksums, digests, commit ids, UUIDs, base64 test data, lock files, integrity hashes,
/// identifiers named like secrets — for measuring false positives (the redaction stage should
/// find nothing here). Seeded: the same text for the same seed.
pub fn ordinary_code(seed: u64) -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut g = Gen(fastrand::Rng::with_seed(seed));
    let mut out = String::new();
    let mut push = |line: String| {
        out.push_str(&line);
        out.push('\n');
    };
    for n in 0..8 {
        let (a, b, c) = (g.of(HEX, 64), g.of(HEX, 40), g.of(HEX, 32));
        let uuid = format!(
            "{}-{}-4{}-a{}-{}",
            g.of(HEX, 8),
            g.of(HEX, 4),
            g.of(HEX, 3),
            g.of(HEX, 3),
            g.of(HEX, 12)
        );
        let b64 = g.of(B64, 88);
        let short = g.of(HEX, 7);
        let data = g.of(B64, 60);
        // Cargo.lock, package-lock.json, go.sum, pip hashes, Docker digests.
        push(format!(
            "[[package]]\nname = \"crate{n}\"\nversion = \"1.{n}.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{a}\""
        ));
        push(format!(
            "    \"node_modules/pkg{n}\": {{\n      \"version\": \"2.{n}.1\",\n      \"resolved\": \"https://registry.npmjs.org/pkg{n}/-/pkg{n}-2.{n}.1.tgz\",\n      \"integrity\": \"sha512-{b64}\"\n    }},"
        ));
        push(format!(
            "github.com/acme/mod{n} v0.{n}.0 h1:{}=",
            g.of(B64, 43)
        ));
        push(format!("requests==2.3{n}.0 --hash=sha256:{a}"));
        push(format!("FROM debian@sha256:{a}"));
        // Git, CI and build output.
        push(format!(
            "commit {b}\nMerge: {short} {}\nAuthor: Dev <dev@example.com>",
            g.of(HEX, 7)
        ));
        push(format!("[main {short}] fix the parser ({n} files changed)"));
        push(format!(
            "   Compiling crate{n} v1.{n}.0\n    Finished `release` profile in {n}.2{n}s"
        ));
        push(format!("etag: \"{c}\"\nx-request-id: {uuid}"));
        // Code with ids, test vectors and names that say key, token or secret.
        push(format!("let session_id = Uuid::parse_str(\"{uuid}\")?;"));
        push(format!("assert_eq!(sha256_hex(b\"hello {n}\"), \"{a}\");"));
        push(format!(
            "const SAMPLE_PNG: &str = \"data:image/png;base64,{data}\";"
        ));
        push(format!("expect(encode(input)).toBe(\"{data}==\");"));
        push(format!(
            "let cache_key = format!(\"{{}}-{{}}\", tenant, \"{c}\");"
        ));
        push(format!(
            "    token_count: {n}{n}{n},\n    max_tokens: 4096,\n    secret_len: SECRET_LEN,"
        ));
        push(
            "const API_KEY_HEADER: &str = \"x-api-key\";\nlet api_key = std::env::var(\"OPENAI_API_KEY\")?;"
                .to_owned(),
        );
        push(format!(
            "pub const PRIVATE_KEY_LEN: usize = {n}2;\nstatic NEXT_TOKEN: AtomicUsize = AtomicUsize::new({n});"
        ));
        push(format!(
            "if (password.length < {n}) {{ throw new Error(\"password too short\"); }}"
        ));
        push(
            "def verify_token(token: str) -> bool:\n    return hmac.compare_digest(token, expected_token)"
                .to_owned(),
        );
        push(format!(
            "src/lib.rs:{n}2:5: warning: unused variable: `secret_key`"
        ));
        push(format!(
            "<link rel=\"stylesheet\" href=\"/assets/app.{}.css\">",
            g.of(HEX, 20)
        ));
        push(format!(
            "color: #{}; border-color: #{};",
            g.of(HEX, 6),
            g.of(HEX, 6)
        ));
        push(format!(
            "OPENAI_API_KEY=your-key-here\nDATABASE_URL=postgres://localhost/dev_{n}"
        ));
        push(format!(
            "    ok {n} - parses {uuid}\nrunning 3 tests\ntest tokens::estimate ... ok"
        ));
    }
    out
}

/// Secrets written the way tools and code write them, which gitleaks' rules alone miss:
/// `(the secret, a text holding it)`. Inside
/// JSON-escaped strings (tool arguments, tool output that printed JSON), in code, in URLs with an
/// empty user, and provider keys one character too short or too long or wrapped in punctuation.
pub fn tool_shapes(seed: u64) -> Vec<(String, String)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut of = |alphabet: &[u8], n: usize| -> String {
        (0..n)
            .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
            .collect()
    };
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const URLSAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const HEX: &[u8] = b"0123456789abcdef";
    const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let openai = format!("sk-proj-{}", of(URLSAFE, 48));
    let hf = format!("hf_{}", of(ALNUM, 34));
    let npm = format!("npm_{}", of(ALNUM, 36));
    let mailgun = format!("key-{}", of(HEX, 32));
    let discord = format!("M{}.{}.{}", of(ALNUM, 25), of(URLSAFE, 6), of(URLSAFE, 38));
    let heroku = format!("HRKU-AA{}", of(URLSAFE, 58));
    let redis = of(ALNUM, 18);
    let pg = of(ALNUM, 12);
    let mut cases = vec![
        (openai.clone(), format!(r#"{{\"api_key\": \"{openai}\"}}"#)),
        (
            openai.clone(),
            format!(
                r#"[Tool result]: {{"config": "{{\"api_key\":\"{openai}\",\"model\":\"gpt\"}}"}}"#
            ),
        ),
        (hf.clone(), format!(r#"{{\"HF_TOKEN\":\"{hf}\"}}"#)),
        (
            npm.clone(),
            format!(r#"{{\"//registry.npmjs.org/:_authToken\":\"{npm}\"}}"#),
        ),
        (
            mailgun.clone(),
            format!(r#"requests.post(url, auth=("api", "{mailgun}"), data=msg)"#),
        ),
        (discord.clone(), format!("client.run('{discord}')")),
        (heroku.clone(), format!("heroku auth:token\n{heroku}\n")),
        (heroku.clone(), format!("export HEROKU_API_KEY={heroku}")),
        (
            redis.clone(),
            format!("REDIS_URL=redis://:{redis}@cache:6379/0"),
        ),
        (
            pg.clone(),
            format!("connect(\"postgres://:{pg}@db.internal/app\")"),
        ),
        (
            pg.clone(),
            format!(r#"{{\"url\": \"postgresql://app:{pg}@db/app\"}}"#),
        ),
    ];
    // Near misses of unmistakable prefixes: one short, one long, wrapped in punctuation.
    for (prefix, alphabet, n) in [
        ("sk-ant-api03-", URLSAFE, 93),
        ("ghp_", ALNUM, 36),
        ("github_pat_", ALNUM, 82),
        ("xoxb-", ALNUM, 40),
        ("AKIA", UPPER, 16),
        ("glpat-", ALNUM, 20),
        ("hf_", ALNUM, 34),
    ] {
        for len in [n - 1, n + 1] {
            let key = format!("{prefix}{}", of(alphabet, len));
            cases.push((key.clone(), format!("token = \"{key}\";")));
            cases.push((key.clone(), format!("(see '{key}'), then")));
            cases.push((key.clone(), format!("<{key}>.")));
        }
    }
    cases
}
