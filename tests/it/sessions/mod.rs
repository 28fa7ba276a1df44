//! Stored pi sessions: the session API, compactions, rebuilds, forks, pi 1.5's planner, scale and crash safety.

pub mod api;
pub mod compactions;
pub mod crash;
pub mod fixtures;
pub mod fork;
pub mod javascript;
pub mod long_history;
pub mod pi15;
pub mod prepared;
pub mod rebuilds;
pub mod scale;
