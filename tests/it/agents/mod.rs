//! The real agents and SDKs, run as users run them, against compactd.

pub mod mcp;
pub mod oh_my_pi;
pub mod pi_extension;
pub mod real;
pub mod recall_clients;
pub mod sdks;
