//! A whole promotion file through parse, validate, hash, render and the reports.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tollgate::fuzzing::spec_file(data));
