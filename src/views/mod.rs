//! What more than one front end renders (the CLI's tables and live view, the web view): the
//! words for a stage's activity, its progress bar, text fitted to a width, relative times, a
//! GitPromotion's status as the views read it, and the timeline picture. Below `cli` and `web`;
//! it imports neither.

pub mod bars;
pub mod fit;
pub mod relative;
pub mod shown;
pub mod spec_changes;
pub mod stage_words;
pub mod timeline;
