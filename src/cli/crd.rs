//! `tollgate crd`: prints tollgate's own CustomResourceDefinition, for `kubectl apply -f -`.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let crd = crate::cluster::crd::git_promotion_crd();
    super::write_stdout(&serde_saphyr::to_string(&crd)?)?;
    Ok(ExitCode::SUCCESS)
}
