//! The console, in a real browser and over HTTP.

pub mod errors;
pub mod guard;
pub mod handoff;
pub mod isolation;
pub mod pages;
