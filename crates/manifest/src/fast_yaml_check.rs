//! The fast reader's contract, checkable at run time: wherever it reads a file, it reads exactly
//! what the serde-saphyr path reads (values, every node's location, document lines). Used by the
//! unit tests and by the `spec_file` fuzz target, which feeds it arbitrary input.

use serde_json::Value;
use serde_saphyr::Spanned;

use crate::fast_yaml::read;
use crate::located::{self, Loc, Locations, Node};
use crate::parse::Limits;

type Read = Vec<(Value, Locations, u32)>;

fn reference(text: &str) -> Result<Read, String> {
    let documents: Vec<Spanned<Node>> =
        serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(documents
        .iter()
        .map(|document| {
            let mut locations = Locations::default();
            let mut problems = Vec::new();
            let value = located::to_json(document, &mut locations, &mut problems);
            (value, locations, Loc::of(document).line)
        })
        .collect())
}

fn fast(text: &str) -> Option<Read> {
    let documents = read(text, &Limits::default()).ok()?;
    Some(
        documents
            .into_iter()
            .map(|d| (d.value, d.tree.locations(text), d.tree.root().line))
            .collect(),
    )
}

/// `Ok(true)` when the fast path read `text` exactly as serde-saphyr does, `Ok(false)` when it
/// declined (the slow path reads it), `Err` describing the first difference otherwise.
pub fn agrees_with_reference(text: &str) -> Result<bool, String> {
    let Some(fast) = fast(text) else {
        return Ok(false);
    };
    let slow =
        reference(text).map_err(|e| format!("fast path accepted invalid YAML ({e}):\n{text}"))?;
    if fast.len() != slow.len() {
        return Err(format!(
            "document count: fast {} reference {}:\n{text}",
            fast.len(),
            slow.len()
        ));
    }
    for ((fv, fl, fline), (sv, sl, sline)) in fast.iter().zip(&slow) {
        if fv != sv {
            return Err(format!("value: fast {fv} reference {sv}:\n{text}"));
        }
        if fline != sline {
            return Err(format!(
                "root line: fast {fline} reference {sline}:\n{text}"
            ));
        }
        if fl != sl {
            let mut lines = Vec::new();
            for (path, loc) in sl.entries() {
                if fl.get(path) != Some(*loc) {
                    lines.push(format!("{path}: fast {:?} reference {loc:?}", fl.get(path)));
                }
            }
            return Err(format!("locations differ:\n{}\n{text}", lines.join("\n")));
        }
    }
    Ok(true)
}
