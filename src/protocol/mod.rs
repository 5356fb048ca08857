//! The wire protocol: request parsing (RESP multibulk and inline) and reply encoding
//! (RESP2 and RESP3).

pub mod parser;
mod reply;

pub use reply::{format_double, Reply};
