//! `compactd handoff FILE --goal "…"`: hands a session file off to a new one focused on the
//! goal (issue 57), as `POST /v1/sessions/{id}/handoff` does for a stored session, by the same
//! application layer and the configured summarizers: the draft is printed as JSON and the new
//! session is written next to FILE (or to `--out`), its header naming FILE as `parentSession`,
//! as pi's own forks name their parent's file.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{CliError, SessionArgs, invalid, load, runtime, write_json};
use crate::config::{StorageConfig, SummarizerConfig};

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
    /// Summarizer settings (the same as `compactd serve`'s): a model drafts the prompt.
    #[command(flatten)]
    pub summarizers: SummarizerConfig,
    /// Where the call is logged (the same database as `compactd serve`'s).
    #[command(flatten)]
    pub storage: StorageConfig,
}

pub(super) fn run(args: HandoffArgs, out: &mut impl Write) -> Result<(), CliError> {
    let goal = crate::app::threads::handoff::checked_goal(&args.goal)
        .map_err(|e| CliError::new(format!("--goal: {e}")))?;
    args.storage.validate().map_err(invalid)?;
    args.summarizers.validate().map_err(invalid)?;
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
    // The command line waits as long as the draft takes: no deadline.
    let draft = crate::app::threads::handoff::handoff_of(
        &session,
        &parent,
        &goal,
        args.session.leaf.as_deref(),
        compactd_core::deadline::Deadline::NONE,
    )
    .map_err(|e| CliError::new(e.to_string()))?
    .expect("no deadline to pass");
    let drafted = runtime()?.block_on(async {
        let store = compactd_store::connect(&crate::app::store_config(&args.storage))
            .await
            .map_err(|e| CliError::new(format!("{e:#}")))?;
        let app = crate::app::App::build(&args.summarizers, &args.storage, store)
            .map_err(|e| CliError::new(format!("{e:#}")))?;
        let context = crate::pipeline::Context::new(crate::pipeline::Endpoint::Handoff, "", None)
            .for_session(&session.header.id);
        let drafted = app.drafted(&context, &goal, draft).await;
        // The call log is written in the background: wait for it before the process ends.
        app.flush_writes().await;
        drafted.map_err(|e| CliError::new(e.to_string()))
    })?;
    let (prompt, draft) = drafted.draft.split(|draft| (draft.prompt.clone(), draft));
    let file = crate::app::threads::handoff::handoff_file(&session.header, &parent, &prompt);
    let draft = draft.into_inner();
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
            "draftedBy": drafted.drafted_by,
        }),
    )
}
