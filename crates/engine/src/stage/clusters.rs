//! Per-cluster state inside a stage (Pending, Provisioning, Provisioned, Failed, TimedOut,
//! Paused), read from the ClusterSummaries of the stage's profile, and the stage's verdict under a
//! policy.
//!
//! A failure counts for tollgate's apply only once the summary carries the applied spec and, for
//! a feature that apply changed, reports a status written after it: a Failed left over from the
//! content before is not this content's failure.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tollgate_model::model::LabelSelector;
use tollgate_model::policy::PausedClusters;

use crate::messages;
use crate::observed::{Observed, ObservedSummary, cluster_key};
use crate::stage::completion::{
    AppliedExpectation, SummaryCriteria, profile_current, summary_problem,
};
use crate::status::paused_clusters::{self, PausedTime};
use crate::status::{CLUSTERS_LISTED, ClusterCondition, ClusterState, StageCounts};

/// Lists clusters whose `scope: Cluster` analysis failed as Failed (`AnalysisFailed: why`),
/// since their failing measurement, unless already listed. Returns how many it added.
pub(crate) fn list_failed_by_analysis(
    listed: &mut Vec<ClusterCondition>,
    failed: &[(String, String, DateTime<Utc>)],
) -> u32 {
    let mut newly = 0;
    for (cluster, reason, since) in failed {
        if listed.iter().any(|c| &c.cluster == cluster) {
            continue;
        }
        newly += 1;
        listed.push(ClusterCondition {
            cluster: cluster.clone(),
            state: ClusterState::Failed,
            message: Some(format!("AnalysisFailed: {reason}")),
            since: *since,
        });
    }
    listed.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    newly
}

/// What a stage's clusters show in one step.
#[derive(Debug, Default)]
pub(crate) struct ClusterReport {
    pub pending: u32,
    pub provisioning: u32,
    pub provisioned: u32,
    pub failed: u32,
    pub timed_out: u32,
    pub joined: u32,
    pub vanished: u32,
    /// Members Sveltos pauses now (not yet provisioned): waiting for a maintenance window.
    pub paused: u32,
    /// The first clusters not Provisioned, by `namespace/name`.
    pub listed: Vec<ClusterCondition>,
    pub unlisted: u32,
}

impl ClusterReport {
    /// Failed and timed-out clusters among those judged.
    pub fn failures(&self) -> u32 {
        self.failed + self.timed_out
    }

    /// Every judged cluster has an outcome: Provisioned, Failed or TimedOut; paused ones too
    /// unless the stage completes without them (`pausedClusters: Skip`).
    pub fn settled(&self, paused_clusters: PausedClusters) -> bool {
        let paused_done = paused_clusters == PausedClusters::Skip || self.paused == 0;
        self.pending == 0 && self.provisioning == 0 && paused_done
    }

    /// The failed and timed-out clusters among the listed ones.
    pub fn failing(&self) -> impl Iterator<Item = &ClusterCondition> {
        self.listed
            .iter()
            .filter(|c| matches!(c.state, ClusterState::Failed | ClusterState::TimedOut))
    }

    /// Provisioned clusters whose `scope: Cluster` analysis failed are Failed (`AnalysisFailed`,
    /// counted against the budget like any failure), since their failing measurement.
    /// Returns how many it failed.
    pub fn fail_by_analysis(&mut self, failed: &[(String, String, DateTime<Utc>)]) -> u32 {
        let newly = list_failed_by_analysis(&mut self.listed, failed);
        self.provisioned = self.provisioned.saturating_sub(newly);
        self.failed += newly;
        newly
    }

    /// The per-cluster counts; `failed` becomes the number of failed clusters judged (a Failed
    /// left over from earlier content is not counted).
    pub fn write_counts(&self, counts: &mut StageCounts) {
        counts.failed = self.failed;
        counts.pending = self.pending;
        counts.provisioning = self.provisioning;
        counts.timed_out = self.timed_out;
        counts.joined = self.joined;
        counts.vanished = self.vanished;
        counts.paused = self.paused;
    }
}

/// Who is judged and by when.
pub(crate) struct Judging<'a> {
    /// Members fixed at stage start (sorted `namespace/name`); `None`: the clusters matching now.
    pub members: Option<&'a [String]>,
    pub deadline: Option<DateTime<Utc>>,
    pub deadline_text: Option<String>,
    pub now: DateTime<Utc>,
    /// The conditions listed by the previous step: a state keeps its `since`.
    pub previous: &'a [ClusterCondition],
    /// Members Sveltos pauses now, with why (see `paused_clusters`).
    pub paused: &'a BTreeMap<String, String>,
    /// Time members spent paused: each one's deadline moves on by its own.
    pub paused_times: &'a [PausedTime],
}

/// The clusters matching the stage now (ready, unpaused, selected), sorted.
pub(crate) fn matching(expected: &AppliedExpectation<'_>, observed: &Observed) -> Vec<String> {
    let mut keys = targeted(expected.selector, observed);
    if let Some(targets) = expected.targets {
        keys.retain(|k| targets.binary_search(k).is_ok());
    }
    keys
}

/// The stage's members at its start: every ready cluster `expected` selects, paused or not
/// (a paused member waits for its window), sorted.
pub(crate) fn members(expected: &AppliedExpectation<'_>, observed: &Observed) -> Vec<String> {
    let mut keys = selected(expected.selector, observed);
    if let Some(targets) = expected.targets {
        keys.retain(|k| targets.binary_search(k).is_ok());
    }
    keys
}

/// `namespace/name` of every ready cluster `selector` selects, paused or not, sorted.
pub(crate) fn selected(selector: &LabelSelector, observed: &Observed) -> Vec<String> {
    let mut keys: Vec<String> = observed
        .clusters
        .labelled(selector)
        .filter(|c| c.ready)
        .map(|c| cluster_key(&c.namespace, &c.name))
        .collect();
    keys.sort();
    keys
}

/// `namespace/name` of every cluster `selector` targets now, sorted.
pub(crate) fn targeted(selector: &LabelSelector, observed: &Observed) -> Vec<String> {
    let mut keys: Vec<String> = observed
        .clusters
        .labelled(selector)
        .filter(|c| c.targetable())
        .map(|c| cluster_key(&c.namespace, &c.name))
        .collect();
    keys.sort();
    keys
}

pub(crate) fn report(
    expected: &AppliedExpectation<'_>,
    observed: &Observed,
    judging: &Judging<'_>,
) -> ClusterReport {
    let matching = matching(expected, observed);
    let summaries = SummariesByCluster::new(
        observed
            .summaries
            .iter()
            .filter(|s| &*s.profile_name == expected.profile)
            .filter(|s| expected.targets_cluster(&s.namespace, &s.cluster_name)),
    );
    let current = profile_current(expected, observed);
    let criteria = SummaryCriteria::new(expected);
    let mut report = ClusterReport::default();
    let state_of = |key: &str| -> (ClusterState, Option<String>) {
        let Some(summary) = summaries.get(key) else {
            return (ClusterState::Pending, None);
        };
        if !current {
            return (
                ClusterState::Provisioning,
                Some(messages::waiting_for_profile(expected.profile)),
            );
        }
        summary_state(summary, expected, &criteria)
    };
    match judging.members {
        None => {
            for key in &matching {
                let (state, message) = state_of(key);
                report.note(judging, key, state, message);
            }
        }
        Some(members) => {
            for key in members {
                let (state, message) = member_state(key, judging, &matching, &state_of);
                report.note(judging, key, state, message);
            }
            report_joined(&mut report, judging, members, &matching, &state_of);
        }
    }
    report
}

impl ClusterReport {
    /// Counts a judged cluster in its (possibly timed-out) state and lists it unless Provisioned.
    fn note(
        &mut self,
        judging: &Judging<'_>,
        key: &str,
        state: ClusterState,
        message: Option<String>,
    ) {
        let (state, message) = judging.timed(key, state, message);
        match state {
            ClusterState::Pending => self.pending += 1,
            ClusterState::Provisioning => self.provisioning += 1,
            ClusterState::Provisioned => self.provisioned += 1,
            ClusterState::Failed => self.failed += 1,
            ClusterState::TimedOut => self.timed_out += 1,
            ClusterState::Joined => self.joined += 1,
            ClusterState::Vanished => self.vanished += 1,
            ClusterState::Paused => self.paused += 1,
        }
        if state != ClusterState::Provisioned {
            judging.list(self, key, state, message);
        }
    }
}

/// The state of a member of the stage: paused, as its summary shows, or vanished.
fn member_state(
    key: &str,
    judging: &Judging<'_>,
    matching: &[String],
    state_of: &impl Fn(&str) -> (ClusterState, Option<String>),
) -> (ClusterState, Option<String>) {
    if let Some(why) = judging.paused.get(key) {
        // Provisioned before it paused: done. Else it waits for its window.
        match state_of(key) {
            (ClusterState::Provisioned, m) => (ClusterState::Provisioned, m),
            _ => (ClusterState::Paused, Some(why.clone())),
        }
    } else if matching.binary_search_by(|k| k.as_str().cmp(key)).is_ok() {
        state_of(key)
    } else {
        (
            ClusterState::Vanished,
            Some("no longer matches the stage or is not ready".into()),
        )
    }
}

/// Clusters matching now that were not members when the stage started: counted as Joined.
fn report_joined(
    report: &mut ClusterReport,
    judging: &Judging<'_>,
    members: &[String],
    matching: &[String],
    state_of: &impl Fn(&str) -> (ClusterState, Option<String>),
) {
    for key in matching
        .iter()
        .filter(|k| members.binary_search(k).is_err())
    {
        let (state, message) = state_of(key);
        // Reported, not judged: the budget and deadline are about the members.
        if state != ClusterState::Provisioned {
            let text = format!("joined after the stage started; {}", state.as_str());
            let message = Some(message.map_or(text.clone(), |m| format!("{text}: {m}")));
            judging.list(report, key, ClusterState::Joined, message);
        }
        report.joined += 1;
    }
}

/// A stage's ClusterSummaries by cluster, found by `namespace/name` without formatting a key
/// per summary (this runs for every stage judged in every step).
struct SummariesByCluster<'a>(Vec<&'a ObservedSummary>);

impl<'a> SummariesByCluster<'a> {
    fn new(summaries: impl Iterator<Item = &'a ObservedSummary>) -> Self {
        let mut sorted: Vec<&ObservedSummary> = summaries.collect();
        // Stable: of two summaries for one cluster, the later one is found (as a map keeps it).
        sorted.sort_by(|a, b| Self::cluster(a).cmp(&Self::cluster(b)));
        SummariesByCluster(sorted)
    }

    fn cluster(summary: &ObservedSummary) -> (&str, &str) {
        (&summary.namespace, &summary.cluster_name)
    }

    fn get(&self, key: &str) -> Option<&'a ObservedSummary> {
        let (namespace, name) = key.split_once('/')?;
        let after = self
            .0
            .partition_point(|s| Self::cluster(s) <= (namespace, name));
        let last = *self.0.get(after.checked_sub(1)?)?;
        (Self::cluster(last) == (namespace, name)).then_some(last)
    }
}

impl Judging<'_> {
    /// The cluster's own deadline: the stage's, moved on by the time it spent paused.
    pub fn deadline_of(&self, key: &str) -> Option<DateTime<Utc>> {
        let deadline = self.deadline?;
        let credit = paused_clusters::credit(self.paused_times, key);
        Some(deadline.checked_add_signed(credit).unwrap_or(deadline))
    }

    /// Pending and Provisioning turn TimedOut at the cluster's deadline (a paused cluster never).
    fn timed(
        &self,
        key: &str,
        state: ClusterState,
        message: Option<String>,
    ) -> (ClusterState, Option<String>) {
        let late = self.deadline_of(key).is_some_and(|d| self.now >= d);
        match state {
            ClusterState::Pending | ClusterState::Provisioning if late => {
                let text = self.deadline_text.clone().unwrap_or_default();
                let message = match message {
                    Some(m) => format!("{text} ({}: {m})", state.as_str()),
                    None => format!("{text} ({})", state.as_str()),
                };
                (ClusterState::TimedOut, Some(message))
            }
            _ => (state, message),
        }
    }

    fn list(
        &self,
        report: &mut ClusterReport,
        key: &str,
        state: ClusterState,
        message: Option<String>,
    ) {
        if report.listed.len() >= CLUSTERS_LISTED {
            report.unlisted += 1;
            return;
        }
        let since = self
            .previous
            .iter()
            .find(|c| c.cluster == key && c.state == state)
            .map(|c| c.since)
            .unwrap_or(match (state, self.deadline_of(key)) {
                (ClusterState::TimedOut, Some(deadline)) => deadline,
                _ => self.now,
            });
        report.listed.push(ClusterCondition {
            cluster: key.to_string(),
            state,
            message,
            since,
        });
    }
}

/// One summary's state for the expected apply.
fn summary_state(
    summary: &ObservedSummary,
    expected: &AppliedExpectation<'_>,
    criteria: &SummaryCriteria<'_>,
) -> (ClusterState, Option<String>) {
    if let Some(field) = criteria.in_sync.first_field_out_of_sync(&summary.spec) {
        return (
            ClusterState::Provisioning,
            Some(messages::not_in_sync(field, &summary.name)),
        );
    }
    if let Some(message) = &summary.failure_message {
        return (ClusterState::Failed, Some(message.to_string()));
    }
    let failed = summary
        .features
        .iter()
        .find(|f| f.is_failed() && expected.reports_apply(f));
    if let Some(feature) = failed {
        let message = feature.failure_message.as_deref().map_or_else(
            || format!("{} {}", feature.feature_id, feature.status),
            str::to_string,
        );
        return (ClusterState::Failed, Some(message));
    }
    match summary_problem(summary, expected, criteria) {
        None => (ClusterState::Provisioned, None),
        Some(problem) => (ClusterState::Provisioning, Some(problem)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(namespace: &str, cluster: &str, name: &str) -> ObservedSummary {
        ObservedSummary {
            namespace: namespace.into(),
            name: name.into(),
            cluster_name: cluster.into(),
            ..ObservedSummary::default()
        }
    }

    #[test]
    fn summaries_are_found_by_cluster_key_and_the_later_of_two_wins() {
        let all = [
            summary("fleet", "b", "first"),
            summary("fleet-x", "a", "other-namespace"),
            summary("fleet", "a", "a"),
            summary("fleet", "b", "second"),
        ];
        let found = SummariesByCluster::new(all.iter());
        let name = |key: &str| found.get(key).map(|s| s.name.to_string());
        assert_eq!(name("fleet/a").as_deref(), Some("a"));
        assert_eq!(name("fleet-x/a").as_deref(), Some("other-namespace"));
        assert_eq!(name("fleet/b").as_deref(), Some("second"));
        assert_eq!(name("fleet/c"), None);
        assert_eq!(name("fleet"), None, "not a namespace/name key");
        assert_eq!(
            SummariesByCluster::new([].iter())
                .get("fleet/a")
                .map(|s| s.name.clone()),
            None
        );
    }
}
