//! The Events that announce a stage transition (`EventReason::TRANSITIONS`) are made in one
//! place, `run/transition_events.rs`, from `transitions(before, after)` over the status a step
//! persists: no rule makes one where it decides, so none is told before (or without) the status
//! that carries it.

use std::path::Path;

use tollgate_fixtures::module_layers::{library_code, rust_files_under};

use tollgate_engine::EventReason;

/// The only file that makes an event with a transition reason.
const TELLER: &str = "run/transition_events.rs";

/// The text of each event construction in `code` (`EngineEvent::normal(…)`,
/// `EngineEvent::warning(…)`, `EngineEvent { … }`), up to its closing bracket.
fn constructions(code: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (index, _) in code.match_indices("EngineEvent") {
        let rest = &code[index + "EngineEvent".len()..];
        let open = rest.trim_start();
        let call = ["::normal(", "::warning(", "{"]
            .iter()
            .find(|start| open.starts_with(**start));
        let before = code[..index].trim_end();
        let declared = before.ends_with("struct") || before.ends_with("impl");
        let Some(start) = call.filter(|_| !declared) else {
            continue;
        };
        let body = &open[start.len()..];
        let mut depth = 1usize;
        let end = body
            .char_indices()
            .find(|(_, c)| {
                match c {
                    '(' | '{' | '[' => depth += 1,
                    ')' | '}' | ']' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(body.len(), |(at, _)| at);
        found.push(&body[..end]);
    }
    found
}

/// A transition reason named in `text` (`EventReason::Provisioned`), if any.
fn transition_reason(text: &str) -> Option<EventReason> {
    EventReason::TRANSITIONS.into_iter().find(|reason| {
        let name = format!("EventReason::{}", reason.as_str());
        text.match_indices(&name).any(|(at, _)| {
            // `Provisioning` is no `ProvisioningX`.
            !text[at + name.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        })
    })
}

#[test]
fn only_transition_events_makes_an_event_with_a_transition_reason() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for file in rust_files_under(&src) {
        let relative = file.strip_prefix(&src).expect("under src/").display();
        let relative = relative.to_string().replace('\\', "/");
        if relative == TELLER {
            continue;
        }
        let code = library_code(&std::fs::read_to_string(&file).expect("a source file"));
        for made in constructions(&code) {
            if let Some(reason) = transition_reason(made) {
                found.push(format!("{relative}: {reason}"));
            }
        }
        // A transition reason kept aside (`const X: EventReason = EventReason::Provisioned`)
        // would make one through a name.
        for line in code.lines().filter(|l| l.contains(": EventReason =")) {
            if let Some(reason) = transition_reason(line) {
                found.push(format!("{relative}: {reason} (as a constant)"));
            }
        }
    }
    assert_eq!(
        found,
        Vec::<String>::new(),
        "an Event announcing a stage transition made by a rule: record the transition in status and let {TELLER} tell it"
    );
    let teller = std::fs::read_to_string(src.join(TELLER)).expect("the teller");
    let teller = library_code(&teller);
    for reason in EventReason::TRANSITIONS {
        assert!(
            constructions(&teller)
                .iter()
                .any(|made| transition_reason(made) == Some(reason)),
            "{TELLER} makes no {reason} event"
        );
    }
}

#[test]
fn the_scan_finds_a_construction_and_skips_what_only_reads_a_reason() {
    let text = "fn f(events: &mut Vec<EngineEvent>) {\n    events.push(EngineEvent::normal(\n        EventReason::Provisioned,\n        format!(\"x {}\", y),\n    ));\n    events.retain(|e| e.reason != EventReason::WaveStarted);\n    let x = EngineEvent::warning(EventReason::Blackout, s(EventReason::ProvisionedX));\n}\n";
    let made = constructions(text);
    assert_eq!(made.len(), 2, "{made:?}");
    assert_eq!(transition_reason(made[0]), Some(EventReason::Provisioned));
    assert_eq!(transition_reason(made[1]), None);
}
