//! Byte 0 picks a response decoder, byte 1 a version (one beyond each end included), and the
//! rest is decoded: it must fail with an error or give a value that survives a round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kafka_group_fuzz::dispatch(kafka_group_fuzz::RESPONSES, data);
});
