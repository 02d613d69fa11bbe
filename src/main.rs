//! `gyre`: the command line and the inspector over the gyre crates (ARCHITECTURE.md). This is the
//! only crate with clap, indicatif and color-eyre; every decision is the engine's.

mod cli;
mod show;

fn main() -> std::process::ExitCode {
    tune_allocator();
    cli::main()
}

/// glibc raises its mmap threshold after the first large free, after which every token array of
/// a long request lands in the heap and fragments it; a fixed threshold returns them to the OS.
/// Two arenas (one per core) keep the parse workers from each holding a fragmented heap of its
/// own without serialising their allocations on one lock.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn tune_allocator() {
    // SAFETY: mallopt only adjusts allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}
