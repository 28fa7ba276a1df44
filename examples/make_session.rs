//! Writes a synthetic v3 session of at least N MB (the large fixture repeated in one chain), for
//! load tests and benchmarks: `cargo run --release --example make_session -- OUT.jsonl 20`

use compactd_core::session::{ParseOptions, Session};
use compactd_testkit::synth;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .expect("usage: make_session OUT.jsonl [MEGABYTES]");
    let megabytes: usize = args
        .next()
        .map_or(20, |m| m.parse().expect("MEGABYTES is a number"));
    let template = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/large-session.jsonl"
    ))
    .unwrap();
    let template = Session::parse(&template, ParseOptions::default()).unwrap();
    let text = synth::repeat_session(&template, megabytes * 1_000_000);
    std::fs::write(&out, &text).unwrap();
    eprintln!("{out}: {} bytes", text.len());
}
