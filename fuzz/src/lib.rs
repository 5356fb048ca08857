//! What the fuzz targets run, kept in a library so that a finding can be replayed in a
//! plain test: `resp` checks the request parser, `lua` generates and evaluates Lua
//! programs.

pub mod lua;
pub mod resp;
