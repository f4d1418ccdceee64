//! Resource limits for reading one file: a leaf, so the readers below `parse` and the rules below
//! `validate` can honour them without depending on either.

/// Resource limits for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_file_bytes: usize,
    pub max_documents: usize,
    pub max_depth: usize,
    pub max_nodes: usize,
    pub max_aliases: usize,
    /// Compile Lua health scripts (off in the throughput bench, where Lua dominates).
    pub compile_lua: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 1024 * 1024,
            max_documents: 500,
            max_depth: 64,
            max_nodes: 200_000,
            max_aliases: 1_000,
            compile_lua: true,
        }
    }
}
