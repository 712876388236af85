//! Proof that the child allocates nothing between clone and exec.
//!
//! A counting global allocator counts every allocation made by a process other than this one.
//! A `CLONE_VM` child shares this allocator and its counter, so an allocation in the child shows up
//! here; the parent's own allocations do not count. A control experiment first shows that the
//! counter does catch an allocating `CLONE_VM` child.
#![allow(unsafe_code)]

mod support;

use progeny::{Backend, Command, Stdio};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

struct CountForeign;

/// The pid of the test process; allocations made under any other pid are counted.
static PARENT: AtomicI32 = AtomicI32::new(0);
static FOREIGN_ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates to the system allocator; the bookkeeping is a raw getpid and an atomic add,
// both safe in any context.
unsafe impl GlobalAlloc for CountForeign {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let parent = PARENT.load(Ordering::Relaxed);
        if parent != 0 && progeny_sys::getpid() != parent {
            FOREIGN_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountForeign = CountForeign;

/// A child body that allocates, for the control experiment.
unsafe extern "C" fn allocating_child(_: *mut std::ffi::c_void) -> i32 {
    let boxed = Box::new([7u8; 64]);
    i32::from(boxed[0] != 7)
}

#[test]
fn zero_allocations_between_clone_and_exec() {
    PARENT.store(progeny_sys::getpid(), Ordering::Relaxed);

    // Control: a CLONE_VM child that allocates is seen by the counter.
    let stack = vec![0u8; 256 * 1024].leak();
    let top = stack.as_mut_ptr().wrapping_add(stack.len() & !15);
    let flags = progeny_sys::CLONE_VM | progeny_sys::CLONE_VFORK | libc::SIGCHLD as u64;
    // SAFETY: the stack is ours and leaked (never reused); CLONE_VFORK suspends us until the
    // child exits; the child body allocates (that is the point) in a process whose other threads
    // are idle test-harness threads.
    let pid = unsafe {
        progeny_sys::clone_run(
            flags,
            top,
            std::ptr::null_mut(),
            allocating_child,
            std::ptr::null_mut(),
        )
    };
    let pid = progeny_sys::clone_result(pid).unwrap();
    let mut status = 0;
    // SAFETY: reaping our own child; waitpid writes only `status`.
    let reaped = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
    assert_eq!(reaped, pid as i32);
    assert_eq!(status, 0);
    assert!(
        FOREIGN_ALLOCS.load(Ordering::Relaxed) >= 1,
        "the counter must see an allocating CLONE_VM child"
    );

    // The real thing: spawns that exercise every plan step allocate nothing in the child.
    let dir = support::TempDir::new("alloc");
    for backend in [Backend::Clone3, Backend::Clone] {
        FOREIGN_ALLOCS.store(0, Ordering::Relaxed);
        for i in 0..50 {
            let file = std::fs::File::create(dir.0.join(format!("f{i}"))).unwrap();
            let out = Command::new(support::INSPECT)
                .arg("argv")
                .arg(format!("arg {i}"))
                .env("PROGENY_I", i.to_string())
                .env_remove("HOME")
                .current_dir(&dir.0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .fd(5, file)
                .process_group(0)
                .signal_mask(&[libc::SIGUSR2])
                .backend(backend)
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        // A PATH search with failing candidates, and an exec failure, go through the child too.
        Command::new("true")
            .env("PATH", "/nonexistent:/usr/bin:/bin")
            .backend(backend)
            .status()
            .unwrap();
        Command::new("/nonexistent")
            .backend(backend)
            .spawn()
            .unwrap_err();
        assert_eq!(
            FOREIGN_ALLOCS.load(Ordering::Relaxed),
            0,
            "{backend:?}: the child allocated"
        );
    }
}
