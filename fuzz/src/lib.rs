//! What the fuzz targets run, kept in a library so that a finding can be replayed in a
//! plain test: `resp` checks the request parser, `lua` generates and evaluates Lua
//! programs, `commands` generates sequences of keyspace commands and checks that a
//! second state applying them answers and ends the same.

pub mod commands;
pub mod lua;
pub mod resp;
