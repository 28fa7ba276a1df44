//! `compactd handoff FILE --goal "…"`: hands a session file off to a new one focused on the
//! goal (issue 57), as `POST /v1/sessions/{id}/handoff` does for a stored session: the draft is
//! printed as JSON and the new session is written next to FILE (or to `--out`), its header naming
//! FILE as `parentSession`, as pi's own forks name their parent's file.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{CliError, SessionArgs, load, write_json};

#[derive(Debug, Args)]
pub struct HandoffArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// What the new thread is for.
    #[arg(long)]
    pub goal: String,
    /// Where to write the new session (default: FILE's directory, `<stem>-handoff-<id>.jsonl`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub(super) fn run(args: HandoffArgs, out: &mut impl Write) -> Result<(), CliError> {
    let goal = crate::app::handoff::checked_goal(&args.goal)
        .map_err(|e| CliError::new(format!("--goal: {e}")))?;
    if args.session.file.as_os_str() == "-" && args.out.is_none() {
        return Err(CliError::new(
            "--out is needed when the session is read from standard input",
        ));
    }
    let session = load(&args.session)?;
    let parent = std::fs::canonicalize(&args.session.file)
        .unwrap_or_else(|_| args.session.file.clone())
        .display()
        .to_string();
    let (draft, file) =
        crate::app::handoff::handoff_of(&session, &parent, &goal, args.session.leaf.as_deref())
            .map_err(|e| CliError::new(e.to_string()))?;
    let target = args.out.unwrap_or_else(|| {
        let stem = args
            .session
            .file
            .file_stem()
            .map_or_else(|| "session".into(), |s| s.to_string_lossy().into_owned());
        let id = &uuid::Uuid::new_v4().to_string()[..8];
        args.session
            .file
            .with_file_name(format!("{stem}-handoff-{id}.jsonl"))
    });
    // A new file only: a handoff never overwrites a session.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)
        .and_then(|mut f| f.write_all(file.as_bytes()))
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", target.display())))?;
    write_json(
        out,
        &json!({
            "prompt": draft.prompt,
            "files": draft.files.iter().map(|f| json!({"path": f.path, "why": f.why, "changed": f.changed})).collect::<Vec<_>>(),
            "leftOut": {"files": draft.left_out_files, "requests": draft.left_out_requests},
            "session": target.display().to_string(),
            "parentSession": parent,
        }),
    )
}
