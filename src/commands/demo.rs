//! `demo` — the newcomer's tour ([`crate::demo`]): a throwaway database and archive location,
//! realistic rows, then archive, verify and status as an operator would run them.

pub use crate::demo::{run, DemoOptions, DEFAULT_SERVER_URL};
