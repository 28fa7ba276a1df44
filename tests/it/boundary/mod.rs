//! The boundaries a fleet relies on: access, bad input, hostile callers and storage, tenants, CPU and connections.

pub mod access;
pub mod bad_input;
pub mod bad_input_requests;
pub mod browser_attacks;
pub mod connections;
pub mod cpu;
pub mod credentials;
pub mod hostile;
pub mod hostile_storage;
pub mod ids;
pub mod recall;
pub mod recognition;
pub mod redaction;
pub mod replicas;
pub mod threads;
pub mod work;
