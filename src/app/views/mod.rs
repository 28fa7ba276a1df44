//! What the console and the fleet's API show, read from the store and shaped for them: a
//! session's tree ([`tree`]), the fleet's calls and savings ([`fleet`]), an entry's one-line
//! preview ([`preview`]), the call log's pages ([`calls`]), a session's compactions and what each
//! kept ([`history`]). Read models: none of them changes
//! anything.

pub(crate) mod calls;
pub(crate) mod fleet;
pub(crate) mod history;
pub(crate) mod preview;
pub(crate) mod tree;
