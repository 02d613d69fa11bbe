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

/// Returns the free pages of every arena to the OS, the middle of the heap included: after a
/// burst of large requests, `gyre record` holds what its peak took otherwise (glibc only
/// trims the top of a heap by itself).
#[cfg(all(feature = "record", target_os = "linux", target_env = "gnu"))]
pub(crate) const RELEASE_MEMORY: Option<fn()> = Some(release_memory);

/// Other allocators return memory by themselves, or gyre does not know how to ask.
#[cfg(all(feature = "record", not(all(target_os = "linux", target_env = "gnu"))))]
pub(crate) const RELEASE_MEMORY: Option<fn()> = None;

#[cfg(all(feature = "record", target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn release_memory() {
    // SAFETY: malloc_trim only returns free memory to the OS; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
