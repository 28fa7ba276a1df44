//! What the console and the fleet's API show, read from the store and shaped for them: a
//! session's tree ([`tree`]), the fleet's calls and savings ([`fleet`]), an entry's one-line
//! preview ([`preview`]), the call log's pages ([`calls`]). Read models: none of them changes
//! anything.

pub(crate) mod calls;
pub(crate) mod fleet;
pub(crate) mod preview;
pub(crate) mod tree;
