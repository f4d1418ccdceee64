//! The manifest crate's integration tests, in one test binary: golden hashes, hash normalisation
//! and properties, CRD cross-checks, the seed and invalid fixtures, label selectors and the module
//! layers. One module per former `tests/<name>.rs`
//! (`cargo test -p tollgate-manifest --test manifest golden_hashes::`).

mod crd_cross_check;
mod golden_hashes;
mod hash_normalisation;
mod hash_properties;
mod invalid_fixtures;
mod label_selectors;
mod module_layers;
mod seeds;
