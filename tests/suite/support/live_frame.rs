//! The live view's stage lines read back by column (name, counts, failures, snapshot, what the
//! stage does), for the tests that compare every view with the engine's projection.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tollgate::cli::status::Shown;
use tollgate::cli::status::live::{self, Clock, Size};
use tollgate_engine::PromotionStatus;

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

/// The live frame of promotion `name` with `status` at `now`, `columns` wide, and its stage
/// lines by stage (every stage of the projection that has a line).
pub fn of(
    name: &str,
    status: &PromotionStatus,
    now: DateTime<Utc>,
    columns: usize,
) -> (Vec<String>, BTreeMap<String, LiveStage>) {
    let shown = Shown {
        name: name.to_string(),
        status: Ok(Some(status.clone())),
    };
    let clock = Clock {
        now,
        updated: Some(now),
        problem: None,
    };
    let size = Size {
        columns,
        rows: None,
    };
    let names: Vec<String> = status
        .pipeline()
        .iter()
        .map(|v| v.name.to_string())
        .collect();
    let frame = live::frame(std::slice::from_ref(&shown), &clock, size);
    let stages = stages(&frame, &names);
    (frame, stages)
}
