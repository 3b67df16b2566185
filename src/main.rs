//! The `outbox-archiver` binary: the library's command line ([`outbox_archiver::main`]) run as
//! this process, its exit status the process's.

/// mimalloc instead of glibc's malloc: a batch allocates per row (its line, its member key) and
/// per page; `cargo bench --bench archive` measured the difference (BENCHMARKS.md, "Archive, what changed").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    return_freed_memory_soon();
    std::process::exit(outbox_archiver::main());
}

/// mimalloc 3 hands memory freed by the program back to the system a second after it was freed
/// (`purge_delay`, 1000 ms). A batch's buffers are freed on one thread and allocated afresh on
/// another many times a second, so what waits to go back piles up: on a million rows (2 cores,
/// `cargo bench --bench archive`) `archive --all-apps` peaked at 112–114 MiB and `verify` at
/// 114–119 MiB; at 100 ms, 92–96 and 87 MiB with the same CPU per row within the runs' noise (at
/// 10 ms 86–88 and 77 MiB, the job's CPU 5 % higher). 100 ms, unless `MIMALLOC_PURGE_DELAY`
/// says otherwise.
fn return_freed_memory_soon() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set only stores the option; mimalloc reads it when it next purges.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
    }
}

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (`include/mimalloc.h`; the
/// `libmimalloc-sys` crate names the options around it but not this one).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
const PURGE_DELAY_MS: std::ffi::c_long = 100;

extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    #[cfg(test)]
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option set is mimalloc 3's purge delay: its default is 1000 ms, and setting it is
    /// read back (a mimalloc whose options were renumbered fails here, not in production).
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reading and storing an option.
        unsafe {
            assert_eq!(mi_option_get(MI_OPTION_PURGE_DELAY), 1000);
            return_freed_memory_soon();
            assert_eq!(mi_option_get(MI_OPTION_PURGE_DELAY), PURGE_DELAY_MS);
        }
    }
}
