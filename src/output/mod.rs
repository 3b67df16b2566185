//! What a run shows the world, read from its report ([`crate::pipeline::report`]): the short
//! summary for a terminal ([`text`]), the progress lines and log writer ([`progress`]), and the
//! Prometheus metrics ([`metrics`]). Nothing here decides anything about the archive.

pub(crate) mod metrics;
pub(crate) mod progress;
pub(crate) mod text;
