//! Arbitrary bytes as a session file: reading (strict and lenient), planning, serializing, the
//! context rebuild and writing back must never panic, and what reads once reads again the same.
#![no_main]

use compactd::compaction::{CompactionSettings, PlanOutcome, build_session_context};
use compactd::session::{ParseOptions, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for lenient in [false, true] {
        let options = ParseOptions { lenient, ..ParseOptions::default() };
        let Ok(session) = Session::parse(data, options) else { continue };
        let path = session.active_path(None).unwrap();
        for keep in [0, 1, 20_000] {
            let settings = CompactionSettings { keep_recent_tokens: keep, ..CompactionSettings::default() };
            let outcome = PlanOutcome::for_path(&path, &settings);
            serde_json::to_string(&outcome).unwrap();
        }
        build_session_context(&path).llm_json();
        // Written back, the session reads again (leniently: repairs were made) to the same lines.
        let text = session.to_jsonl();
        let again = Session::parse(text.as_bytes(), ParseOptions { lenient: true, ..ParseOptions::default() })
            .expect("a session compactd wrote reads back");
        assert_eq!(again.to_jsonl(), text);
    }
});
