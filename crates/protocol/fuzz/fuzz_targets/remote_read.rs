//! Remote-read request decoding and frame reading of arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tessera_protocol::remote_read::{decode_request, decode_request_message, FrameReader};

fuzz_target!(|data: &[u8]| {
    let _ = decode_request(data, 1 << 20);
    let _ = decode_request_message(data);
    let mut r = FrameReader::new(data, 1 << 20);
    while let Some(Ok(_)) = r.next_response() {}
});
