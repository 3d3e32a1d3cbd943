//! Byte 0 picks an API, byte 1 a version, and the rest is a response frame after its size
//! prefix: the response header version the API uses, then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kafka_group_fuzz::dispatch(kafka_group_fuzz::APIS, data);
});
