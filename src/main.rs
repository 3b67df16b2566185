//! The `outbox-archiver` binary: the library's command line ([`outbox_archiver::main`]) run as
//! this process, its exit status the process's.

/// mimalloc instead of glibc's malloc: a batch allocates per row (its line, its member key) and
/// per page; `cargo bench --bench archive` measured the difference (BENCHMARKS.md, "Archive, what changed").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(outbox_archiver::main());
}
