//! Plans and rebuilt contexts of stored sessions and of session files: what a compaction would
//! cut, and what the LLM sees at a leaf. Nothing here writes.

use crate::access::Identity;
use crate::app::compaction::stored_path::StoredPath;
use crate::app::sessions::parse;
use crate::app::{App, AppError};
use compactd_core::compaction::pi15::Planner;
use compactd_core::compaction::{
    CompactionSettings, PlanOutcome, SessionContext, build_session_context,
};
use compactd_core::ids::Id;
use compactd_core::session::{Entry, Session};

/// Largest token setting accepted: far above any model's window, small enough to stay exact.
const MAX_TOKEN_SETTING: u64 = 100_000_000;

/// Planning settings from a request, checked; absent ones take pi's defaults.
pub fn settings(
    keep_recent_tokens: Option<i64>,
    reserve_tokens: Option<i64>,
) -> Result<CompactionSettings, AppError> {
    let defaults = CompactionSettings::default();
    let check = |name: &str, value: Option<i64>, min: u64, default: u64| match value {
        None => Ok(default),
        Some(v) if v >= min as i64 && (v as u64) <= MAX_TOKEN_SETTING => Ok(v as u64),
        Some(v) => Err(AppError::invalid(
            name,
            format!("{name} must be between {min} and {MAX_TOKEN_SETTING}, not {v}"),
        )),
    };
    Ok(CompactionSettings {
        enabled: true,
        keep_recent_tokens: check(
            "keepRecentTokens",
            keep_recent_tokens,
            0,
            defaults.keep_recent_tokens,
        )?,
        reserve_tokens: check("reserveTokens", reserve_tokens, 1, defaults.reserve_tokens)?,
    })
}

impl App {
    /// The plan of a stored session.
    pub async fn plan(
        &self,
        who: &Identity,
        id: &Id,
        settings: &CompactionSettings,
        leaf_id: Option<&str>,
        planner: Option<Planner>,
    ) -> Result<PlanOutcome, AppError> {
        let settings = *settings;
        self.on_stored_path(who, id, leaf_id, move |stored| {
            let plan = plan_of(&stored.session, &settings, None, planner)?;
            Ok(stored.rebase(plan))
        })
        .await
    }

    /// The plan of a stored session as its JSON, written as `compactd plan` writes it: pi 0.x's
    /// conversations serialized straight into the JSON, never held whole beside it.
    pub async fn plan_json(
        &self,
        who: &Identity,
        id: &Id,
        settings: &CompactionSettings,
        leaf_id: Option<&str>,
        planner: Option<Planner>,
    ) -> Result<Vec<u8>, AppError> {
        let settings = *settings;
        self.on_stored_path(who, id, leaf_id, move |stored| {
            plan_json_of(&stored.session, &settings, None, planner, |plan| {
                stored.rebase(plan)
            })
        })
        .await
    }

    /// The plan of a session file as its JSON (as [`App::plan_json`]); nothing is stored.
    pub async fn plan_file_json(
        &self,
        bytes: impl Into<bytes::Bytes> + Send + 'static,
        lenient: bool,
        settings: &CompactionSettings,
        leaf_id: Option<&str>,
        planner: Option<Planner>,
    ) -> Result<Vec<u8>, AppError> {
        let session = parse(bytes, self.parse_options(lenient)).await?;
        let (settings, leaf_id) = (*settings, leaf_id.map(str::to_owned));
        crate::cpu::off_runtime(move || {
            plan_json_of(
                &session,
                &settings,
                leaf_id.as_deref(),
                planner,
                std::convert::identity,
            )
        })
        .await?
    }

    /// What the LLM sees at `leaf_id` (the leaf by default), as JSON messages.
    pub async fn context(
        &self,
        who: &Identity,
        id: &Id,
        leaf_id: Option<&str>,
    ) -> Result<ContextView, AppError> {
        self.on_stored_path(who, id, leaf_id, |stored| {
            Ok(ContextView::of_path(&path_at(&stored.session, None)?))
        })
        .await
    }

    /// `work` on `who`'s session read along its active path to `leaf_id`, off the runtime's
    /// threads: planning and rebuilding a context walk the whole path read.
    async fn on_stored_path<T: Send + 'static>(
        &self,
        who: &Identity,
        id: &Id,
        leaf_id: Option<&str>,
        work: impl FnOnce(StoredPath) -> Result<T, AppError> + Send + 'static,
    ) -> Result<T, AppError> {
        let stored = self.load_path(who, id, leaf_id).await?;
        crate::cpu::off_runtime(move || work(stored)).await?
    }
}

/// The LLM-facing context of a path.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextView {
    /// User, assistant and tool-result messages exactly as stored; the others converted to user
    /// messages (spec §2.4, §8.4).
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<serde_json::Value>,
    pub thinking_level: Option<String>,
    #[schema(value_type = Option<crate::openapi::ModelRef>)]
    pub model: Option<compactd_core::compaction::ModelRef>,
}

impl ContextView {
    /// What the model sees at the end of `path`, by the rules of the pi that wrote it.
    pub fn of_path(path: &[&compactd_core::session::Entry]) -> ContextView {
        if Planner::of_entries(path.iter().copied()) == Planner::Pi15 {
            let (messages, thinking_level, model) = compactd_core::compaction::pi15::context(path);
            return ContextView {
                messages,
                thinking_level: Some(thinking_level),
                model: model.map(|(provider, model_id)| compactd_core::compaction::ModelRef {
                    provider: provider.as_str().map(str::to_owned),
                    model_id: model_id.as_str().map(str::to_owned),
                }),
            };
        }
        ContextView::of(&build_session_context(path))
    }

    pub fn of(context: &SessionContext<'_>) -> ContextView {
        ContextView {
            messages: context.llm_json(),
            thinking_level: context.thinking_level.clone(),
            model: context.model.clone(),
        }
    }
}

fn plan_of(
    session: &Session,
    settings: &CompactionSettings,
    leaf_id: Option<&str>,
    planner: Option<Planner>,
) -> Result<PlanOutcome, AppError> {
    Ok(PlanOutcome::for_path_choosing(
        &path_at(session, leaf_id)?,
        settings,
        planner,
    ))
}

fn plan_json_of(
    session: &Session,
    settings: &CompactionSettings,
    leaf_id: Option<&str>,
    planner: Option<Planner>,
    adjust: impl FnOnce(PlanOutcome) -> PlanOutcome,
) -> Result<Vec<u8>, AppError> {
    let path = path_at(session, leaf_id)?;
    let mut json = Vec::new();
    PlanOutcome::write_json_for_path(&path, settings, planner, adjust, &mut json)
        // Writing to memory fails only by a bug.
        .map_err(|e| AppError::Internal(e.into()))?;
    Ok(json)
}

/// The active path to `leaf_id` (the leaf by default); an unknown entry is the `leafId`'s fault.
fn path_at<'s>(session: &'s Session, leaf_id: Option<&str>) -> Result<Vec<&'s Entry>, AppError> {
    session
        .active_path(leaf_id)
        .map_err(|e| AppError::invalid("leafId", e.to_string()))
}
