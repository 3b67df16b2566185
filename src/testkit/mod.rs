//! What the tests, the benchmarks and the demo need beside the archiver itself: realistic
//! outbox rows ([`seed`]) and, with the `local-s3` feature, a real S3 server in this process
//! ([`local_s3`]). The production binary uses neither (it is built without the feature).

pub(crate) mod history;
#[cfg(feature = "local-s3")]
pub(crate) mod local_s3;
pub mod seed;
