//! The durable record of notices owed (issue #29): which notices a status carries in
//! `pendingNotices`, and which of them an endpoint must no longer be sent. Pure: the settled log
//! is passed in as a predicate, so every rule is unit-tested.
//!
//! The record is written with the transition that produced its notices (no write of its own),
//! before anything is sent. A notice leaves it at a later status write once every endpoint
//! listening to it settled it (delivered, gave up, or dropped it as stale), and never before an
//! older notice of its stage that is still kept: an older state is recognised as stale only while
//! the newer one is in the record. A receiver down for long is owed more: past [`FOLD_ABOVE`]
//! notices, older states fold into newer ones of their subject (the receiver is told the latest),
//! so the record is bounded by subjects; past [`PENDING_LIMIT`] the oldest are given up.

use tollgate_engine::Notice;
use tollgate_model::policy::NotifyEndpoint;

use super::payload;

/// Past this many notices owed at once (a receiver down for a whole rollout), older states are
/// folded into newer ones of their subject: the receiver is told each subject's latest state
/// rather than every step to it. Below it, every notice is told.
pub const FOLD_ABOVE: usize = 32;

/// Past this many even after folding (more subjects owed than that: a commit status per commit
/// and stage, over many commits), the oldest are given up, visibly (`NotificationFailed`). The
/// record goes with every status write: it must stay a small part of the object.
pub const PENDING_LIMIT: usize = 256;

/// Whether `endpoint` is told `notice`: it lists the kind, and its type posts something for it.
pub fn listens(endpoint: &NotifyEndpoint, notice: &Notice) -> bool {
    endpoint.events.contains(&notice.kind) && payload::applies(endpoint.kind, notice)
}

/// What a receiver holds one state of: a commit status per (commit, stage context); a chat or a
/// webhook, the stage's latest message.
fn same_subject(endpoint: &NotifyEndpoint, a: &Notice, b: &Notice) -> bool {
    a.stage == b.stage
        && (!endpoint.kind.is_commit_status() || a.snapshot_commit == b.snapshot_commit)
}

/// The record after a transition, and the notices that left it still owed somewhere.
#[derive(Debug, Default, PartialEq)]
pub struct Owed {
    pub notices: Vec<Notice>,
    /// Folded into a newer state of their subject: (notice, the endpoints that owed it).
    pub folded: Vec<(Notice, Vec<String>)>,
    /// Given up at [`PENDING_LIMIT`] while some endpoint had not settled them: (notice, those
    /// endpoints).
    pub evicted: Vec<(Notice, Vec<String>)>,
}

/// The notices owed after a transition: those carried from the previous status that some
/// listening endpoint has not settled, then the transition's `new` ones that some endpoint
/// listens to and has not settled (a transition seen again has the same ids), oldest first;
/// past [`FOLD_ABOVE`] folded, past [`PENDING_LIMIT`] cut. `settled(endpoint, id)`.
pub fn owed(
    carried: &[Notice],
    new: Vec<Notice>,
    endpoints: &[NotifyEndpoint],
    settled: impl Fn(&str, &str) -> bool,
) -> Owed {
    let owing = |notice: &Notice| -> Vec<&NotifyEndpoint> {
        endpoints
            .iter()
            .filter(|e| listens(e, notice) && !settled(&e.name, &notice.id))
            .collect()
    };
    let mut kept: Vec<Notice> = Vec::new();
    for notice in carried {
        let older_of_stage_kept = kept.iter().any(|k| k.stage == notice.stage);
        if older_of_stage_kept || !owing(notice).is_empty() {
            kept.push(notice.clone());
        }
    }
    for notice in new {
        if !kept.iter().any(|k| k.id == notice.id) && !owing(&notice).is_empty() {
            kept.push(notice);
        }
    }
    let folded = fold(&mut kept, &owing);
    let excess = kept.len().saturating_sub(PENDING_LIMIT);
    let evicted = kept
        .drain(..excess)
        .filter_map(|notice| {
            let owed_to = names(&owing(&notice));
            (!owed_to.is_empty()).then_some((notice, owed_to))
        })
        .collect();
    Owed {
        notices: kept,
        folded,
        evicted,
    }
}

/// While more than [`FOLD_ABOVE`] are kept: removes, oldest first, each notice that every
/// endpoint owing it will be told a newer state of (a later notice of its subject that it
/// listens to is kept). Only the oldest kept notice of a stage is folded, so a notice that
/// shows an older one stale to some endpoint never leaves before that older one.
fn fold<'e>(
    kept: &mut Vec<Notice>,
    owing: &impl Fn(&Notice) -> Vec<&'e NotifyEndpoint>,
) -> Vec<(Notice, Vec<String>)> {
    let mut folded = Vec::new();
    let mut index = 0;
    while kept.len() > FOLD_ABOVE && index < kept.len() {
        let notice = &kept[index];
        let oldest_of_stage = !kept[..index].iter().any(|k| k.stage == notice.stage);
        let owed_to = owing(notice);
        let newer_told = |endpoint: &&NotifyEndpoint| {
            kept[index + 1..]
                .iter()
                .any(|later| same_subject(endpoint, notice, later) && listens(endpoint, later))
        };
        if oldest_of_stage && !owed_to.is_empty() && owed_to.iter().all(newer_told) {
            let names = names(&owed_to);
            folded.push((kept.remove(index), names));
        } else {
            index += 1;
        }
    }
    folded
}

fn names(endpoints: &[&NotifyEndpoint]) -> Vec<String> {
    endpoints.iter().map(|e| e.name.clone()).collect()
}

/// Whether `pending[index]` is stale for `endpoint`: a later notice of the same subject that it
/// listens to is settled, so the receiver holds (or was meant to hold) a newer state. Sent now,
/// the older one would overwrite it (a commit status `pending` after `success`).
pub fn superseded(
    pending: &[Notice],
    index: usize,
    endpoint: &NotifyEndpoint,
    settled: impl Fn(&str, &str) -> bool,
) -> bool {
    let Some(notice) = pending.get(index) else {
        return false;
    };
    pending.iter().skip(index + 1).any(|later| {
        same_subject(endpoint, notice, later)
            && listens(endpoint, later)
            && settled(&endpoint.name, &later.id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use std::collections::BTreeSet;
    use tollgate_engine::Phase;
    use tollgate_model::policy::{NotifyEvent, NotifyType};

    fn notice(id: &str, kind: NotifyEvent, stage: &str) -> Notice {
        Notice {
            id: id.into(),
            kind,
            promotion: "web".into(),
            stage: stage.into(),
            snapshot_index: 1,
            snapshot_commit: Some("a".repeat(40)),
            author: None,
            phase: Phase::Progressing,
            reason: None,
            counts: Default::default(),
            time: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        }
    }

    fn endpoint(name: &str, kind: NotifyType, events: &[NotifyEvent]) -> NotifyEndpoint {
        NotifyEndpoint {
            name: name.into(),
            kind,
            address_secret_file: "/s".into(),
            events: events.to_vec(),
            target_url: None,
            timeout: None,
            retry_for: None,
        }
    }

    use NotifyEvent::*;

    fn settled_set(keys: &[(&str, &str)]) -> impl Fn(&str, &str) -> bool {
        let keys: BTreeSet<(String, String)> = keys
            .iter()
            .map(|(e, i)| (e.to_string(), i.to_string()))
            .collect();
        move |e: &str, i: &str| keys.contains(&(e.to_string(), i.to_string()))
    }

    fn ids(notices: &[Notice]) -> Vec<&str> {
        notices.iter().map(|n| n.id.as_str()).collect()
    }

    #[test]
    fn no_endpoint_no_record() {
        let new = vec![notice("a", StageStarted, "dev")];
        assert_eq!(owed(&[], new, &[], settled_set(&[])), Owed::default());
    }

    #[test]
    fn a_notice_stays_until_every_listening_endpoint_settled_it() {
        let all = [StageStarted, StageCompleted];
        let endpoints = [
            endpoint("chat", NotifyType::Slack, &all),
            endpoint("gh", NotifyType::Github, &all),
            endpoint("deaf", NotifyType::Slack, &[Completed]),
        ];
        let started = notice("a", StageStarted, "dev");
        let first = owed(&[], vec![started.clone()], &endpoints, settled_set(&[]));
        assert_eq!(ids(&first.notices), ["a"]);
        let half = settled_set(&[("chat", "a")]);
        assert_eq!(
            ids(&owed(&first.notices, vec![], &endpoints, half).notices),
            ["a"]
        );
        let both = settled_set(&[("chat", "a"), ("gh", "a")]);
        assert!(
            owed(&first.notices, vec![], &endpoints, both)
                .notices
                .is_empty()
        );
        // A transition seen again (a drift correction) is not owed again once settled.
        let both = settled_set(&[("chat", "a"), ("gh", "a")]);
        assert!(
            owed(&[], vec![started], &endpoints, both)
                .notices
                .is_empty()
        );
    }

    #[test]
    fn a_settled_notice_stays_while_an_older_one_of_its_stage_is_kept() {
        let endpoints = [endpoint(
            "gh",
            NotifyType::Github,
            &[StageStarted, StageCompleted],
        )];
        let carried = [
            notice("started-dev", StageStarted, "dev"),
            notice("done-dev", StageCompleted, "dev"),
            notice("started-prod", StageStarted, "prod"),
        ];
        let settled = settled_set(&[("gh", "done-dev"), ("gh", "started-prod")]);
        let after = owed(&carried, vec![], &endpoints, settled);
        assert_eq!(
            ids(&after.notices),
            ["started-dev", "done-dev"],
            "done-dev is what makes started-dev stale; prod's settled notice goes"
        );
    }

    #[test]
    fn past_the_fold_bound_older_states_fold_into_the_newest_of_their_subject() {
        let waves = [StageStarted, WaveStarted, WaveCompleted, StageCompleted];
        let down = endpoint("chat", NotifyType::Slack, &waves);
        let up = endpoint("gh", NotifyType::Github, &waves);
        let mut new = vec![notice("dev-started", StageStarted, "dev")];
        new.push(notice("dev-done", StageCompleted, "dev"));
        for i in 0..FOLD_ABOVE {
            new.push(notice(&format!("prod-wave-{i}"), WaveStarted, "prod"));
        }
        new.push(notice("prod-done", StageCompleted, "prod"));
        let all_ids: Vec<String> = new.iter().map(|n| n.id.clone()).collect();
        let endpoints = [down, up];
        let gh_settled_all = |e: &str, id: &str| e == "gh" && all_ids.iter().any(|a| a == id);
        let after = owed(&[], new, &endpoints, gh_settled_all);
        assert_eq!(after.notices.len(), FOLD_ABOVE);
        let folded: Vec<(&str, Vec<String>)> = after
            .folded
            .iter()
            .map(|(n, e)| (n.id.as_str(), e.clone()))
            .collect();
        assert_eq!(
            folded,
            [
                ("dev-started", vec!["chat".to_string()]),
                ("prod-wave-0", vec!["chat".to_string()]),
                ("prod-wave-1", vec!["chat".to_string()]),
            ],
            "the oldest states of subjects the endpoint will hear a newer state of"
        );
        assert_eq!(
            after.notices[0].id, "dev-done",
            "each stage's latest state stays"
        );
        assert_eq!(
            after.notices.last().map(|n| n.id.as_str()),
            Some("prod-done")
        );
        assert!(after.evicted.is_empty());
    }

    #[test]
    fn a_notice_with_no_newer_state_for_its_endpoint_is_not_folded_and_the_limit_cuts() {
        let endpoints = [endpoint("chat", NotifyType::Slack, &[StageStarted])];
        let new: Vec<Notice> = (0..PENDING_LIMIT + 2)
            .map(|i| notice(&format!("n{i}"), StageStarted, &format!("s{i}")))
            .collect();
        let after = owed(&[], new, &endpoints, settled_set(&[("chat", "n1")]));
        assert!(
            after.folded.is_empty(),
            "each stage once: nothing newer to tell"
        );
        assert_eq!(after.notices.len(), PENDING_LIMIT);
        assert_eq!(after.notices[0].id, "n2");
        let evicted: Vec<(&str, Vec<String>)> = after
            .evicted
            .iter()
            .map(|(n, e)| (n.id.as_str(), e.clone()))
            .collect();
        assert_eq!(
            evicted,
            [("n0", vec!["chat".to_string()])],
            "n1 was settled: nothing lost"
        );
    }

    #[test]
    fn a_pending_state_after_success_is_stale_and_another_commit_is_not() {
        let gh = endpoint("gh", NotifyType::Github, &[StageStarted, StageCompleted]);
        let mut next_run = notice("started-dev-2", StageStarted, "dev");
        next_run.snapshot_commit = Some("b".repeat(40));
        let pending = [
            notice("started-dev", StageStarted, "dev"),
            notice("done-dev", StageCompleted, "dev"),
            notice("started-prod", StageStarted, "prod"),
            next_run,
        ];
        let success_sent = settled_set(&[("gh", "done-dev")]);
        assert!(superseded(&pending, 0, &gh, &success_sent));
        assert!(!superseded(&pending, 1, &gh, &success_sent));
        assert!(
            !superseded(&pending, 2, &gh, &success_sent),
            "another stage"
        );
        let next_run_sent = settled_set(&[("gh", "started-dev-2")]);
        assert!(
            !superseded(&pending, 1, &gh, &next_run_sent),
            "a commit status of another commit is another state"
        );
        // A chat holds one state per stage: the next run's message supersedes the older one.
        let chat = endpoint("gh", NotifyType::Slack, &[StageStarted, StageCompleted]);
        assert!(superseded(&pending, 1, &chat, &next_run_sent));
        let deaf = endpoint("gh", NotifyType::Github, &[StageStarted]);
        assert!(
            !superseded(&pending, 0, &deaf, &success_sent),
            "a notice the endpoint does not hear does not supersede"
        );
    }
}
