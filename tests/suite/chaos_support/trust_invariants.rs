//! The trust invariants (issue #44), checked on the emulator's write log against what the test
//! knows of git: no applied profile carries content from a commit that would not verify, and no
//! gate opens without a quorum of fresh, attributable, signed approvals.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use tollgate_emulator::WriteRecord;

const PROFILES: &str = "clusterprofiles.config.projectsveltos.io";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustViolation {
    /// A profile was applied with content no verified commit ever had.
    UnverifiedContent {
        profile: String,
        version: String,
        at: DateTime<Utc>,
    },
    /// The gate's next stage got content for which fewer than the quorum of approvers made a
    /// signed, fresh approval of their own.
    GateWithoutQuorum {
        profile: String,
        version: String,
        approvers: BTreeSet<String>,
        at: DateTime<Utc>,
    },
}

/// The chart version a written profile carries (`None`: not a profile of `promotion`).
fn applied_version<'r>(record: &'r WriteRecord, promotion: &str) -> Option<&'r str> {
    if record.resource != PROFILES
        || record.verb == "delete"
        || !record.name.starts_with(&format!("{promotion}-"))
    {
        return None;
    }
    record
        .object
        .pointer("/spec/helmCharts/0/chartVersion")
        .and_then(|v| v.as_str())
}

/// Every profile of `promotion` written with content outside `verified` (the chart versions of
/// the trees of commits signed by a trusted key).
pub fn check_verified_content(
    log: &[WriteRecord],
    promotion: &str,
    verified: &BTreeSet<String>,
) -> Vec<TrustViolation> {
    log.iter()
        .filter_map(|record| {
            let version = applied_version(record, promotion)?;
            (!verified.contains(version)).then(|| TrustViolation::UnverifiedContent {
                profile: record.name.clone(),
                version: version.to_string(),
                at: record.time,
            })
        })
        .collect()
}

/// Every write of `gated_next` (the profile of the stage after the gate) with content that fewer
/// than `needed` distinct approvers approved honestly (`approved`: version → approvers).
pub fn check_quorum(
    log: &[WriteRecord],
    (promotion, gated_next): (&str, &str),
    approved: &BTreeMap<String, BTreeSet<String>>,
    needed: usize,
) -> Vec<TrustViolation> {
    let mut seen = BTreeSet::new();
    log.iter()
        .filter(|record| record.name == gated_next)
        .filter_map(|record| {
            let version = applied_version(record, promotion)?;
            let approvers = approved.get(version).cloned().unwrap_or_default();
            let fresh = seen.insert(version.to_string());
            (fresh && approvers.len() < needed).then(|| TrustViolation::GateWithoutQuorum {
                profile: record.name.clone(),
                version: version.to_string(),
                approvers,
                at: record.time,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn applied(name: &str, version: &str, at: i64) -> WriteRecord {
        WriteRecord {
            time: DateTime::<Utc>::from_timestamp(at, 0).expect("time"),
            verb: "apply".into(),
            resource: PROFILES.into(),
            status_subresource: false,
            namespace: String::new(),
            name: name.into(),
            field_manager: "tollgate".into(),
            user_agent: String::new(),
            resource_version: 1,
            object: json!({"spec": {"helmCharts": [{"chartVersion": version}]}}),
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_applied_profile_carries_content_from_a_commit_that_would_not_verify() {
        let log = [
            applied("web-staging", "1.0.0", 1),
            applied("web-staging", "6.6.6", 2),
            applied("other-staging", "6.6.6", 3),
        ];
        let got = check_verified_content(&log, "web", &set(&["1.0.0"]));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            matches!(&got[0], TrustViolation::UnverifiedContent { version, .. } if version == "6.6.6")
        );
    }

    #[test]
    fn no_gate_opens_without_the_quorum_of_signed_approvals() {
        let log = [
            applied("web-staging", "1.0.0", 1),
            applied("web-production", "1.0.0", 2),
            applied("web-production", "2.0.0", 3),
            applied("web-production", "2.0.0", 4),
        ];
        let approved = BTreeMap::from([
            ("1.0.0".to_string(), set(&["alice", "bob"])),
            ("2.0.0".to_string(), set(&["alice"])),
        ]);
        let got = check_quorum(&log, ("web", "web-production"), &approved, 2);
        assert_eq!(got.len(), 1, "one violation per version: {got:?}");
        assert!(
            matches!(&got[0], TrustViolation::GateWithoutQuorum { version, .. } if version == "2.0.0")
        );
    }
}
