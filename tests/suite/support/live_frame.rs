//! The live view's stage lines read back by column (name, counts, failures, snapshot, what the
//! stage does), for the tests that compare every view with the engine's projection.

use std::collections::BTreeMap;

/// One stage line of a live frame.
#[derive(Debug)]
pub struct LiveStage {
    /// Provisioned, members, failures; `None` when the line shows no counts.
    pub counts: Option<(u32, u32, u32)>,
    /// `#N`, or `–`.
    pub snapshot: String,
    /// What the stage does, in words.
    pub activity: String,
}

/// The lines of `frame` that are stage lines of the stages `names`, by stage.
pub fn stages(frame: &[String], names: &[String]) -> BTreeMap<String, LiveStage> {
    let mut stated = BTreeMap::new();
    for line in frame {
        let chars: Vec<char> = line.chars().collect();
        let field = |from: usize, to: usize| -> String {
            chars
                .get(from..to.min(chars.len()))
                .map(|c| c.iter().collect::<String>().trim().to_string())
                .unwrap_or_default()
        };
        let name = field(2, 16);
        if !line.starts_with("  ") || !names.contains(&name) {
            continue;
        }
        let counts = field(30, 37);
        let counts = counts.split_once('/').and_then(|(p, m)| {
            let failures = field(38, 42);
            let failures = failures.trim_start_matches('✗');
            let failures = match failures.is_empty() {
                true => 0,
                false => failures.parse().ok()?,
            };
            Some((p.parse().ok()?, m.parse().ok()?, failures))
        });
        let stage = LiveStage {
            counts,
            snapshot: field(43, 47),
            activity: field(48, chars.len()),
        };
        stated.insert(name, stage);
    }
    stated
}
