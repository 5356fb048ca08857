//! Persistence: the formats data is saved in and moved through. Today that is Redis's own
//! RDB format ([`rdb`]: DUMP/RESTORE payloads and whole `dump.rdb` files) and the
//! `tollgate import-rdb` tool that loads a Redis RDB file into a running server
//! ([`import`]).

pub mod import;
pub mod rdb;
