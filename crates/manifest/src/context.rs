//! What rules may consult besides the document. Below both `validate`, which builds it, and
//! `rules`, which read it.

use crate::limits::Limits;
use crate::loc_tree::DocumentLocations;

/// What rules may consult besides the document: the source text (to map Lua lines), field
/// locations and limits.
pub struct ValidationContext<'a> {
    pub source: &'a str,
    pub locations: &'a DocumentLocations<'a>,
    pub limits: &'a Limits,
}
