//! The service as operated: its wire contract, resilience, shutdown, operations, the call log, the documents and the layers.

pub mod calllog;
pub mod calls;
pub mod cli;
pub mod conformance;
pub mod docs;
pub mod layers;
pub mod ops;
pub mod ops_documented;
pub mod races;
pub mod remote_endpoint;
pub mod resilience;
pub mod shutdown;
pub mod streaming;
