//! One Generic webhook request (headers and body) through authentication and payload parsing.
#![no_main]

use tollgate::server::Provider;

libfuzzer_sys::fuzz_target!(|data: &[u8]| tollgate::fuzzing::webhook(Provider::Generic, data));
