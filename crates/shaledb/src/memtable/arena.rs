//! An append-only arena for the memtable's skiplist nodes.
//!
//! Memory comes in chunks that start at 4 KiB and double up to [`MAX_CHUNK`] (so a tiny memtable
//! does not pin a megabyte); a request larger than a quarter of a chunk gets a chunk of its own
//! so a big value does not waste the rest of the current one. Allocations are 8-byte aligned
//! and never move or get freed before the arena is dropped: the skiplist relies on that to hand
//! out raw pointers and slices into its nodes. They are *not* initialized: zeroing each chunk
//! cost a fill 4-5% of its foreground time (`calloc` on memory the heap had reused), and the
//! skiplist writes every byte it later reads.
//!
//! The arena itself is not synchronized; the skiplist keeps it behind its single-writer lock.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// The first chunk's size.
const MIN_CHUNK: usize = 4 << 10;
/// Chunks grow up to this size.
pub(crate) const MAX_CHUNK: usize = 1 << 20;
/// Alignment of every allocation (that of the skiplist's atomic pointers).
pub(crate) const ALIGN: usize = 8;

/// A bump allocator over chunks that live as long as the arena.
pub(crate) struct Arena {
    /// Next free byte of the current chunk.
    ptr: NonNull<u8>,
    /// Bytes left in the current chunk after `ptr`.
    remaining: usize,
    /// Every chunk (start and size), freed in `drop`.
    chunks: Vec<(NonNull<u8>, usize)>,
    /// Sum of the chunk sizes.
    reserved: usize,
    /// Size of the next regular chunk.
    next_chunk: usize,
}

// SAFETY: the arena exclusively owns its chunks (plain memory, no thread affinity); moving it
// to another thread moves that ownership. Shared access is not offered (`Arena` is not `Sync`;
// the skiplist wraps it in a mutex).
unsafe impl Send for Arena {}

impl Arena {
    /// An arena that has not reserved any memory yet.
    pub(crate) fn new() -> Self {
        Arena {
            ptr: NonNull::dangling(),
            remaining: 0,
            chunks: Vec::new(),
            reserved: 0,
            next_chunk: MIN_CHUNK,
        }
    }

    /// Returns `size` bytes (`size > 0`), aligned to [`ALIGN`], uninitialized. The memory stays
    /// valid, at the same address, until the arena is dropped, and no other allocation overlaps
    /// it; the caller owns it exclusively until it shares it.
    pub(crate) fn allocate(&mut self, size: usize) -> NonNull<u8> {
        debug_assert!(size > 0);
        let size = size
            .checked_next_multiple_of(ALIGN)
            .expect("allocation size overflows");
        if size > self.remaining {
            if size > self.next_chunk / 4 {
                // Big: its own chunk; keep filling the current one.
                return self.new_chunk(size);
            }
            let chunk = self.next_chunk;
            self.next_chunk = (chunk * 2).min(MAX_CHUNK);
            self.ptr = self.new_chunk(chunk);
            self.remaining = chunk;
        }
        let out = self.ptr;
        // The bump pointer stays inside (or one past the end of) the current chunk because
        // `size <= remaining`; `wrapping_add` keeps this free of `unsafe`, and the result is
        // non-null since it is derived from a live allocation.
        self.ptr = NonNull::new(self.ptr.as_ptr().wrapping_add(size)).expect("non-null");
        self.remaining -= size;
        out
    }

    /// Allocates an uninitialized chunk of `size` bytes (a positive multiple of [`ALIGN`]) and
    /// returns its start.
    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        let layout = chunk_layout(size);
        // SAFETY: `layout` has a non-zero size (every request is at least one `ALIGN`).
        let Some(raw) = NonNull::new(unsafe { alloc::alloc(layout) }) else {
            alloc::handle_alloc_error(layout)
        };
        self.chunks.push((raw, size));
        self.reserved += size;
        raw
    }

    /// Bytes of memory the arena holds, minus what is still free in the current chunk: the
    /// allocations made plus the tails of chunks skipped over.
    pub(crate) fn memory_usage(&self) -> usize {
        self.reserved - self.remaining
    }
}

/// The layout of a chunk of `size` bytes.
fn chunk_layout(size: usize) -> Layout {
    Layout::from_size_align(size, ALIGN).expect("chunk size fits a layout")
}

impl Drop for Arena {
    fn drop(&mut self) {
        for (chunk, size) in self.chunks.drain(..) {
            // SAFETY: `chunk` came from `alloc::alloc` with `chunk_layout(size)` in `new_chunk`
            // and is freed exactly once here (drained from the list). Nothing can use the
            // memory afterwards: the arena is only dropped with its skiplist, and every pointer
            // into it is tied to the list (a borrow of it or an `Arc` that keeps it alive).
            unsafe { alloc::dealloc(chunk.as_ptr(), chunk_layout(size)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_counted() {
        let mut a = Arena::new();
        assert_eq!(a.memory_usage(), 0);
        let mut spans = Vec::new();
        for size in [1, 7, 8, 13, 100, 1000, 3000, 5000, 2 * MAX_CHUNK, 17] {
            let p = a.allocate(size).as_ptr() as usize;
            assert_eq!(p % ALIGN, 0);
            spans.push((p, p + size));
        }
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        assert!(a.memory_usage() >= 2 * MAX_CHUNK + 1000 + 3000 + 5000);
        assert!(a.memory_usage() <= a.reserved);
    }
}
