//! Arbitrary bytes through every chunk decoder: none may panic, hang, or leave partial output on error;
//! a chunk that reopens must accept an append and still decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_encoding::{XorEncoder, XorIter, decode_decimal_into, decode_decimal_open_into, decode_dense_into, decode_xor_into};

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let bulk = decode_xor_into(data, &mut out);
    if bulk.is_err() {
        assert!(out.is_empty());
    }
    // The bulk fast path and the iterator are separate code: they must agree on every input.
    let iter: Result<Vec<(i64, u64)>, _> = XorIter::new(data).map(|r| r.map(|(t, v)| (t, v.to_bits()))).collect();
    match (&bulk, &iter) {
        (Ok(()), Ok(v)) => assert_eq!(&out.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>(), v),
        (Err(a), Err(b)) => assert_eq!(std::mem::discriminant(a), std::mem::discriminant(b)),
        _ => panic!("bulk decode {bulk:?} disagrees with the iterator {iter:?}"),
    }
    if let Ok(mut enc) = XorEncoder::from_bytes(data) {
        if !enc.is_full() {
            let t = enc.last_t().map_or(0, |t| t.saturating_add(1));
            enc.append(t, 0.5);
            out.clear();
            decode_xor_into(enc.bytes(), &mut out).expect("a reopened chunk with one more sample decodes");
        }
    }
    out.clear();
    if decode_dense_into(data, &mut out).is_err() {
        assert!(out.is_empty());
    }
    out.clear();
    if decode_decimal_into(data, &mut out).is_err() {
        assert!(out.is_empty());
    }
    out.clear();
    if decode_decimal_open_into(data, &mut out).is_err() {
        assert!(out.is_empty());
    }
});
