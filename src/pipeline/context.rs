//! Who asked for a summarization, and what for: every run of the pipeline carries it, so that
//! admission counts it against the right key and the call log says whose call it was.

/// An agent whose compactions the gateway answers: a row of the agents' recognizers
/// (`crate::agents::recognize::RECOGNIZERS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    /// The name the logs use (`claude-code`).
    pub name: &'static str,
    /// The endpoint the call log and recall name its compactions by (`gateway:claude-code`).
    pub endpoint: &'static str,
    /// The wire it speaks.
    pub wire: compactd_core::wire::Wire,
}

/// The way in: which endpoint or command asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/compact`, the remote-endpoint wire.
    Compact,
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/sessions/{id}/compactions`.
    SessionCompaction,
    /// `POST /v1/sessions/{id}/branch-summaries`.
    BranchSummary,
    /// `compactd compact FILE`.
    Cli,
    /// A compaction the gateway answered for an agent at its model base URL.
    Gateway(Agent),
    /// A summary prepared ahead of an agent's compaction, in the background (issue 67): paid
    /// for like any other, and never itself a compaction served. It names the agent (`pi` for a
    /// stored session).
    Prepared(&'static str),
    /// A handoff's draft (`/v1/sessions/{id}/handoff`, the MCP tool, `compactd handoff`).
    Handoff,
    /// An answer about a thread (`/v1/threads/read`, the MCP tool `read_thread`).
    ThreadRead,
}

/// The call log's name for a summary prepared ahead of a compaction (issue 67): spend of its own,
/// not a compaction served.
pub const PREPARED: &str = "gateway:prepared";

impl Endpoint {
    /// The name the call log and the logs use.
    pub fn label(self) -> &'static str {
        match self {
            Endpoint::Compact => "/v1/compact",
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::SessionCompaction => "session_compaction",
            Endpoint::BranchSummary => "branch_summary",
            Endpoint::Cli => "cli",
            Endpoint::Gateway(agent) => agent.endpoint,
            Endpoint::Prepared(_) => PREPARED,
            Endpoint::Handoff => "handoff",
            Endpoint::ThreadRead => "read_thread",
        }
    }
}

impl Endpoint {
    /// The agent a summary through this way in is for, and the wire it came by, as the call log
    /// and the metrics name them. The remote endpoint is pi-family agents' (oh-my-pi's
    /// `remoteEndpoint`); the chat wire's caller is any OpenAI client.
    pub fn agent_and_wire(self) -> (&'static str, &'static str) {
        match self {
            Endpoint::Compact => ("pi-family", "remote-endpoint"),
            Endpoint::ChatCompletions => ("openai-client", "chat-completions"),
            Endpoint::SessionCompaction | Endpoint::BranchSummary => ("pi", "session"),
            Endpoint::Cli => ("pi", "cli"),
            Endpoint::Gateway(agent) => (agent.name, agent.wire.name()),
            Endpoint::Prepared(agent) => (agent, "prepared"),
            Endpoint::Handoff => ("any", "handoff"),
            Endpoint::ThreadRead => ("any", "read_thread"),
        }
    }

    /// Whether a summary through this way in is a compaction served as it is written (on an
    /// agent's wire). A stored session's compaction counts when its entry is appended instead.
    pub fn serves_on_the_wire(self) -> bool {
        matches!(
            self,
            Endpoint::Compact | Endpoint::ChatCompletions | Endpoint::Gateway(_)
        )
    }
}

/// What one summarization is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// An agent's prompt, summarized as it is (the two wires).
    Prompt,
    /// The history summary of a compaction.
    History,
    /// The prefix of a split turn.
    TurnPrefix,
    /// The summary of an abandoned branch.
    Branch,
    /// The first prompt of a new thread for a goal.
    Handoff,
    /// One step of answering a question about a thread.
    ThreadRead,
}

impl Purpose {
    pub fn label(self) -> &'static str {
        match self {
            Purpose::Prompt => "prompt",
            Purpose::History => "history",
            Purpose::TurnPrefix => "turn_prefix",
            Purpose::Branch => "branch",
            Purpose::Handoff => "handoff",
            Purpose::ThreadRead => "read_thread",
        }
    }
}

/// Who asked, through which way in, about which session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub endpoint: Endpoint,
    /// The caller's tenant (`""` for anonymous callers).
    pub tenant: String,
    /// The caller's API key id; `None` for anonymous callers and the CLI.
    pub key_id: Option<String>,
    /// The stored session, for session compactions and branch summaries.
    pub session_id: Option<String>,
}

impl Context {
    pub fn new(endpoint: Endpoint, tenant: &str, key_id: Option<&str>) -> Context {
        Context {
            endpoint,
            tenant: tenant.to_owned(),
            key_id: key_id.map(str::to_owned),
            session_id: None,
        }
    }

    /// The same context about `session_id`.
    pub fn for_session(mut self, session_id: &str) -> Context {
        self.session_id = Some(session_id.to_owned());
        self
    }

    /// The name per-key limits are counted under.
    pub fn bucket(&self) -> String {
        match &self.key_id {
            Some(id) => format!("key:{id}"),
            None => "anonymous".to_owned(),
        }
    }
}
