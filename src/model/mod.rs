//! The pure core: what an outbox table and its rows are, how a batch is cut, encoded, hashed and
//! named, what a receipt records. No I/O, no clock of its own; unit-tested with fixed vectors.
//! Every layer above uses it; it uses none of them.

pub mod appcode;
pub mod batch;
pub mod chain;
pub mod codec;
pub mod command;
pub mod digest;
pub mod format;
pub mod human;
pub mod ident;
pub mod note;
pub mod profile;
pub mod protection;
pub mod record_schema;
pub mod redact;
pub mod shard;
pub mod table;
pub mod timespec;
pub mod tlog;
pub mod unarchived;
