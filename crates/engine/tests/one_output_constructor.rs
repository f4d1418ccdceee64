//! A step's output is made in one place, `Effects::into_output`, which says what of the effects
//! goes out (applies, deletions, the wake-up, the measurements due) for each kind of outcome:
//! no path decides it by omission in a `StepOutput { .. }` literal of its own.

use std::path::Path;

use tollgate_fixtures::module_layers::{library_code, rust_files_under};

/// The `StepOutput { .. }` literals of `text`'s library code (before its `#[cfg(test)]`, without
/// comments): the name followed by a brace, not as a return type or the struct's declaration.
/// Each as the name of the function it is in.
fn literals(text: &str) -> Vec<String> {
    let code = library_code(text);
    let mut found = Vec::new();
    for (index, _) in code.match_indices("StepOutput") {
        let after = code[index + "StepOutput".len()..].trim_start();
        let before = code[..index].trim_end();
        let declared =
            before.ends_with("->") || before.ends_with("struct") || before.ends_with("impl");
        if after.starts_with('{') && !declared {
            let function = code[..index]
                .rsplit("fn ")
                .next()
                .and_then(|rest| rest.split(['(', '<']).next())
                .unwrap_or_default();
            found.push(function.trim().to_string());
        }
    }
    found
}

#[test]
fn a_step_output_is_made_only_by_effects_into_output() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for file in rust_files_under(&src) {
        let text = std::fs::read_to_string(&file).expect("a source file");
        let relative = file
            .strip_prefix(&src)
            .expect("under src/")
            .display()
            .to_string();
        for function in literals(&text) {
            found.push(format!("{relative}: {function}"));
        }
    }
    assert_eq!(
        found,
        ["effects.rs: into_output"],
        "a StepOutput literal outside Effects::into_output: make the output with `into_output` and say what goes out (`Outgoing`)"
    );
}

#[test]
fn the_scan_finds_a_literal_and_skips_signatures() {
    let text = "pub struct StepOutput {\n}\nfn held() -> StepOutput {\n    StepOutput {\n        actions }\n}\n";
    assert_eq!(literals(text), ["held"]);
}
