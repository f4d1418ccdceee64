//! `tollgate schema`: prints the JSON Schema of a kind tollgate reads from git, for editors
//! (yaml-language-server's `# yaml-language-server: $schema=…`, VS Code's `yaml.schemas`).
//! The RolloutPolicy's is derived from the model `validate` reads policies into, and is the
//! schema `validate` checks their structure against; `deploy/rolloutpolicy.schema.json` is this
//! output (a test checks it).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The kind whose schema to print.
    pub kind: SchemaKind,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum SchemaKind {
    /// tollgate.dev/v1alpha1 RolloutPolicy.
    Rolloutpolicy,
}

/// The schema of `kind` as printed: pretty JSON and a final newline.
pub fn schema_text(kind: SchemaKind) -> String {
    let schema = match kind {
        SchemaKind::Rolloutpolicy => tollgate_model::policy_schema::rollout_policy_schema(),
    };
    let mut text = serde_json::to_string_pretty(&schema).expect("a JSON value prints");
    text.push('\n');
    text
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::write_stdout(&schema_text(args.kind))?;
    Ok(ExitCode::SUCCESS)
}
