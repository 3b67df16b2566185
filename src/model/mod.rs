//! The pure core: what an outbox table and its rows are, how a batch is cut, encoded, hashed and
//! named, what a receipt records. No I/O, no clock of its own; unit-tested with fixed vectors.
//! Every layer above uses it; it uses none of them.

pub(crate) mod appcode;
pub(crate) mod batch;
pub(crate) mod batch_columns;
pub mod chain;
pub(crate) mod codec;
pub(crate) mod command;
pub(crate) mod digest;
pub(crate) mod ending;
pub mod format;
pub(crate) mod human;
pub(crate) mod ident;
pub(crate) mod key;
pub(crate) mod note;
pub(crate) mod profile;
pub(crate) mod protection;
pub(crate) mod receipt;
pub(crate) mod record_schema;
pub(crate) mod redact;
pub(crate) mod shard;
pub(crate) mod table;
pub(crate) mod timespec;
pub mod tlog;
pub(crate) mod unarchived;
