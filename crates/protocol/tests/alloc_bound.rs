//! Decoding a small hostile body must not allocate without bound: a counting global allocator records
//! the largest single allocation made while decoding.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use tessera_protocol::remote_write::*;

struct Counting;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One test only in this binary, so no other thread allocates while we measure.
#[test]
fn small_hostile_bodies_allocate_little() {
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    // Length prefixes claiming gigabytes: timeseries (field 1), symbols (field 4), series (field 5).
    for key in [0x0a_u8, 0x22, 0x2a, 0x1a] {
        let mut b = vec![key];
        put_uvarint(&mut b, 4 << 30);
        b.extend(std::iter::repeat_n(0u8, 1000));
        bodies.push(b);
    }
    // A packed labels_refs claiming 1 GiB inside a v2 series.
    let mut b = vec![0x2a];
    let mut inner = vec![0x0a];
    put_uvarint(&mut inner, 1 << 30);
    inner.extend(std::iter::repeat_n(0x01u8, 900));
    put_uvarint(&mut b, inner.len() as u64);
    b.extend(inner);
    bodies.push(b);
    // 1 KiB of tiny empty series: many elements, each really present.
    bodies.push([0x0a, 0x00].repeat(512));

    for body in &bodies {
        assert!(body.len() <= 1100);
        LARGEST.store(0, Ordering::Relaxed);
        let _ = decode(ProtoVersion::V1, body, &Limits::default());
        let _ = decode(ProtoVersion::V2, body, &Limits::default());
        let _ = decompress(body, 64 << 20);
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(largest < 256 * 1024, "a {}-byte body made a {largest}-byte allocation", body.len());
    }
    // The snappy bomb, the same way.
    LARGEST.store(0, Ordering::Relaxed);
    let _ = decompress(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0], 64 << 20);
    let _ = decompress(&[0xff, 0xff, 0xff, 0x1f, 0, 0, 0], 64 << 20);
    assert!(LARGEST.load(Ordering::Relaxed) < 64 * 1024);
}
