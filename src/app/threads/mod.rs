//! Threads (issue 57, Amp's way): handing a thread off to a new one focused on a goal
//! ([`handoff`]), answering a question from another thread ([`read`]), forking one at an entry
//! ([`fork`]), the map of threads handed off and forked ([`map`]), and the latest request of
//! each agent session the gateway saw, which an agent hands off as its own thread ([`seen`]).

pub(crate) mod fork;
pub(crate) mod handoff;
pub(crate) mod map;
pub(crate) mod read;
pub(crate) mod seen;
