//! Remote-write decoding of arbitrary bytes, both as a snappy body and as raw protobuf, both versions.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tessera_protocol::remote_write::{decode, decode_ref, decompress, Limits, ProtoVersion};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    for v in [ProtoVersion::V1, ProtoVersion::V2] {
        let _ = decode_ref(v, data, &limits);
        let _ = decode(v, data, &limits);
        if let Ok(buf) = decompress(data, 1 << 20) {
            let _ = decode_ref(v, &buf, &limits);
        }
    }
});
