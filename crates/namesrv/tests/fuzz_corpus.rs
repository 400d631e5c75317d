//! Replays every committed fuzz input (`fuzz/corpus/<target>/*`) through the checks its fuzz
//! target runs, and bounds what any single input may make the decoders allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "../../../fuzz/src/checks.rs"]
mod checks;

/// Records the largest single allocation, so that a decoder sizing a buffer from a length
/// field instead of the bytes actually present is caught.
struct LargestAllocation;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Nothing may allocate more than a small multiple of its input, beyond a fixed allowance:
/// inflating may double its buffer once past the bound before noticing, and the properties
/// check also builds and lists the server's whole configuration.
fn allocation_limit(target: &str, input_len: usize) -> usize {
    let allowance = match target {
        "register_compressed" => 2 * checks::INFLATE_CAP,
        "properties" => 512 * 1024,
        _ => 64 * 1024,
    };
    allowance + 16 * input_len
}

#[test]
fn corpus_replays_within_bounds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut replayed = 0;
    for (target, check) in checks::TARGETS {
        let dir = root.join(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus of {target} at {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let input = std::fs::read(&path).unwrap();
            LARGEST.store(0, Ordering::Relaxed);
            check(&input);
            let largest = LARGEST.load(Ordering::Relaxed);
            assert!(
                largest <= allocation_limit(target, input.len()),
                "{}: one allocation of {largest} bytes for a {}-byte input",
                path.display(),
                input.len()
            );
            replayed += 1;
        }
    }
    // An empty or misplaced corpus would make this test vacuous.
    assert!(
        replayed >= checks::TARGETS.len() * 3,
        "only {replayed} inputs"
    );
}
