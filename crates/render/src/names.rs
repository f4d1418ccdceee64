//! Names of generated ClusterProfiles (the same as upstream's, so users find them where they expect).

/// `<promotion>-<stage>`: the stage's main profile.
pub fn stage_profile_name(promotion: &str, stage: &str) -> String {
    format!("{promotion}-{stage}")
}

/// `preverification-<promotion>-<stage>`: deploys the stage's `preHealthCheckDeployment`.
pub fn preverification_profile_name(promotion: &str, stage: &str) -> String {
    format!("preverification-{promotion}-{stage}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_upstream() {
        assert_eq!(stage_profile_name("kyverno", "dev"), "kyverno-dev");
        assert_eq!(
            preverification_profile_name("kyverno", "dev"),
            "preverification-kyverno-dev"
        );
    }
}
