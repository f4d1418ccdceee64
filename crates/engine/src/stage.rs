//! One look at the current stage, as a named pipeline of steps (docs/architecture.md#a-step-stage-by-stage, #triggers):
//!
//! `keep_applied → provisioned → delay → preverification → post_delay_checks → healthy →
//! next_stage_free → gate`
//!
//! Each step either lets the stage go on or returns the [`Hold`] that stops it for this step. The
//! steps only touch the stage's own status and the step's effects; the caller turns the outcome
//! into the promotion's phase and message.
//!
//! Its folder holds what the steps ask: the clusters' states and verdict, completion, waves,
//! the analysis step, retries of a halted stage.

pub(crate) mod clusters;
pub mod completion;
pub mod retry;
pub(crate) mod stage_analysis;
pub(crate) mod waves;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::duration::format_go_duration;
use tollgate_model::model::Trigger;
use tollgate_model::policy::OnFailure;
use tollgate_render::profile::preverification_spec;
use tollgate_render::{render_preverification_profile, snapshot_digest, spec_hash};

use crate::features::{changed_features, fresh_after_apply, hashes_before_apply};
use crate::gates::gate;
pub(crate) use crate::gates::stage_run::{Exceeded, Hold, StageProfiles, StageRun};
use crate::messages;
use crate::output::EngineEvent;
use crate::output::EventReason;
use crate::status::activity::{StageActivity, WaveOf};
use crate::status::paused_clusters;
use crate::status::{
    AppliedProfile, ClusterCondition, ClusterState, ConsumedApproval, StageStatus, WaveProgress,
};
use clusters::{ClusterReport, Judging};
use completion::{AppliedExpectation, Completion};
use std::collections::BTreeMap;

impl StageRun<'_, '_> {
    /// Runs the steps in order; `Ok` when the stage's trigger held and the pipeline moves on.
    pub fn progress(&mut self) -> Result<Vec<ConsumedApproval>, Hold> {
        if self.profiles.foreign_main {
            return Err(Hold::Failed(messages::foreign_profile(&self.profiles.main)));
        }
        self.keep_applied();
        self.readd_retried()?;
        self.provisioned()?;
        if self.st.fast_rollback {
            // Content that completed here: no soak, checks, window, approval or analyses.
            self.next_stage_free()?;
            return Ok(Vec::new());
        }
        let analyzed = self.analyze()?;
        let bound = gate::bound_trigger(self.stage, self.policy.as_ref());
        let Some(trigger) = self.stage.trigger.as_ref().or(bound.as_ref()) else {
            analyzed.done()?;
            self.next_stage_free()?;
            return Ok(analyzed.consumes.into_iter().collect());
        };
        self.delay(trigger)?;
        self.preverification(trigger)?;
        self.post_delay_checks(trigger);
        self.healthy()?;
        analyzed.done()?;
        // Never consume an approval for an advance whose apply is refused.
        self.next_stage_free()?;
        let mut consumes = gate::pass(self, trigger)?.consumes;
        if consumes.is_empty() {
            consumes.extend(analyzed.consumes);
        }
        Ok(consumes)
    }

    fn render_spec(&self) -> Value {
        if let Some(retry) = self.st.retry.as_deref().filter(|r| r.withdrawing()) {
            return retry::withdrawing_spec(self.snapshot, self.stage, retry);
        }
        waves::main_spec(
            self.snapshot,
            self.stage,
            self.checks,
            self.st.waves.as_deref(),
        )
    }

    fn render_object(&self, checks: &[Value]) -> Value {
        if let Some(retry) = self.st.retry.as_deref().filter(|r| r.withdrawing()) {
            return retry::withdrawing_object(self.snapshot, self.stage, retry);
        }
        waves::main_object(self.snapshot, self.stage, checks, self.st.waves.as_deref())
    }

    /// 1. Keep the stage's main profile applied with the run's spec and snapshot.
    fn keep_applied(&mut self) {
        if let Some(fresh) = self.profiles.re_recorded_fresh.take() {
            self.st.applied_at = self.now;
            self.st.applied_spec_hash = self.profiles.wanted_hash.clone();
            self.st.hashes_before_apply =
                hashes_before_apply(self.observed, &self.profiles.main, &fresh);
            self.st.fresh_features = fresh;
        }
        let hash = self.profiles.wanted_hash.as_str();
        // Applied when the profile lacks this spec or names another snapshot (a restart whose
        // stage spec did not change still moves the profile to the run's snapshot).
        self.main_applied_now = self
            .observed
            .profiles
            .get(&self.profiles.main)
            .is_none_or(|p| {
                p.applied_spec_hash() != Some(hash)
                    || p.snapshot_annotations != snapshot_digest(self.snapshot)
            });
        if self.main_applied_now {
            let object = self.render_object(self.checks);
            self.effects.apply(self.profiles.main.clone(), object);
        }
    }

    /// 1b. A retry (see `retry`): while the re-driven clusters' summaries are withdrawn, wait;
    ///     once they are gone, target them again with a fresh apply (and a fresh deadline).
    fn readd_retried(&mut self) -> Result<(), Hold> {
        let Some(retry) = self.st.retry.as_deref().filter(|r| r.withdrawing()) else {
            return Ok(());
        };
        let profile_shows_it = !self.main_applied_now
            && self
                .observed
                .profiles
                .get(&self.profiles.main)
                .and_then(|p| p.applied_spec_hash())
                == Some(self.profiles.wanted_hash.as_str());
        if !profile_shows_it || !retry::withdrawn(retry, &self.profiles.main, self.observed) {
            let text = format!(
                "retry {}: withdrawing the ClusterSummaries of {} to deploy to them again",
                retry.n,
                retry.clusters.join(", ")
            );
            return Err(Hold::Wait(StageActivity::Provisioning { wave: None }, text));
        }
        if let Some(retry) = self.st.retry.as_deref_mut() {
            retry.readded_at = Some(self.now);
        }
        let spec = self.render_spec();
        let hash = spec_hash(&spec);
        self.st.applied_at = self.now;
        self.st.applied_spec_hash = hash.clone();
        self.st.fresh_features = Vec::new();
        self.st.hashes_before_apply = None;
        self.profiles.wanted_hash = hash;
        self.main_applied_now = true;
        let object = self.render_object(self.checks);
        self.effects.apply(self.profiles.main.clone(), object);
        self.spec = Some(spec);
        Ok(())
    }

    /// 2. Completion, once per run (§4.6 made strict, D4).
    fn provisioned(&mut self) -> Result<(), Hold> {
        if self.st.provisioned_at.is_some() {
            return Ok(());
        }
        let spec = match self.spec.take() {
            Some(spec) => spec,
            None => self.render_spec(),
        };
        let completion = self.check_main(&spec);
        let complete = self.judge(&spec, &completion)?;
        self.spec = Some(spec);
        let now = self.now;
        if !complete {
            self.st.set_failure(Some(completion.message.clone()), now);
            let wave = self.wave_reached();
            let message = match wave {
                Some(w) => format!("wave {}/{}: {}", w.wave, w.of, completion.message),
                None => completion.message,
            };
            return Err(Hold::Wait(StageActivity::Provisioning { wave }, message));
        }
        if self
            .st
            .waves
            .as_deref()
            .is_some_and(WaveProgress::in_progress)
        {
            let done_at = self.wave_done();
            self.analyze_wave(done_at)?;
            return Err(self.next_wave());
        }
        self.st.provisioned_at = Some(now);
        self.st.last_successful_applied_time = Some(now);
        self.st.last_status_check_time = Some(now);
        self.st.failure_message = None;
        self.st.describe(&completion.message, now);
        let empty = self.st.counts.matching_clusters == 0 && self.st.counts.summaries == 0;
        // Told by `run/transition_events` from `provisioned_at` and `skipped`.
        if empty && self.st.members.as_ref().is_none_or(Vec::is_empty) {
            self.st.skipped = true;
        }
        self.st.provisioned_message = Some(completion.message);
        Ok(())
    }

    /// The wave reached, for a stage of more than one wave (the last one too: its clusters are
    /// provisioned as a wave like the others).
    fn wave_reached(&self) -> Option<WaveOf> {
        let waves = self.st.waves.as_deref().filter(|w| w.total() > 1)?;
        Some(WaveOf {
            wave: waves.reached,
            of: waves.total(),
        })
    }

    /// A stage that completed without its paused members (`pausedClusters: Skip`) keeps following
    /// them: once a window opens and Sveltos deploys there, the counts and the cluster list say
    /// so instead of "waiting for a maintenance window" forever (issue #45). Nothing is judged
    /// again: the stage stays completed.
    pub(crate) fn follow_paused_members(&mut self) {
        if !follows_members(self.st) {
            return;
        }
        let spec = self.spec.take().unwrap_or_else(|| self.render_spec());
        let completion = self.check_main(&spec);
        let observation = self.observe_clusters(&spec, &completion);
        self.st.not_provisioned = observation.report.listed;
        self.spec = Some(spec);
    }

    /// The per-cluster view of the stage now: counts, paused time, the judged members' states.
    fn observe_clusters(&mut self, spec: &Value, completion: &Completion) -> Observation {
        self.st.counts = completion.counts.clone();
        if self.policy.is_some() && self.st.members.is_none() {
            // Fixed at stage start; a policy that arrives mid-stage fixes them now.
            let members = clusters::members(&self.main_expectation(spec, None), self.observed);
            self.st.members = Some(members);
        }
        let policy = self.policy.clone();
        let policy = policy.as_ref();
        // While waves remain, the reached waves' clusters are judged (the budget is theirs).
        let reached = waves::reached(self.st.waves.as_deref());
        let deadline = policy
            .and_then(|p| p.progress_deadline)
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .and_then(|d| self.st.applied_at.checked_add_signed(d));
        let paused = self.account_paused(reached.as_deref());
        let (report, members) = {
            let judged = match &reached {
                Some(reached) => Some(reached.as_slice()),
                None => self.st.members.as_deref(),
            };
            let report = clusters::report(
                &self.main_expectation(spec, reached.as_deref()),
                self.observed,
                &Judging {
                    members: policy.and(judged),
                    deadline,
                    deadline_text: policy.and_then(|p| p.progress_deadline).map(|d| {
                        format!(
                            "not Provisioned within the progressDeadline {}",
                            format_go_duration(d)
                        )
                    }),
                    now: self.now,
                    previous: &self.st.not_provisioned,
                    paused: &paused,
                    paused_times: self
                        .st
                        .paused_clusters
                        .as_deref()
                        .map_or(&[], Vec::as_slice),
                },
            );
            (report, judged.map_or(0, <[String]>::len))
        };
        let mut report = report;
        let failed_by_analysis = match self.st.analyses.as_deref() {
            Some(runs) => report.fail_by_analysis(&crate::gates::analysis::failed_clusters(runs)),
            None => 0,
        };
        report.write_counts(&mut self.st.counts);
        let counts = &mut self.st.counts;
        counts.provisioned = counts.provisioned.saturating_sub(failed_by_analysis);
        self.count_members(reached.as_deref());
        self.st.not_provisioned_unlisted = report.unlisted;
        Observation {
            report,
            members,
            deadline,
        }
    }

    /// The per-cluster view of the stage, and whether it is complete: without a policy every
    /// matching cluster must be provisioned (upstream); with one, every member must have an
    /// outcome within the failure budget, and a spent budget fails the stage.
    fn judge(&mut self, spec: &Value, completion: &Completion) -> Result<bool, Hold> {
        let Observation {
            report,
            members,
            deadline,
        } = self.observe_clusters(spec, completion);
        self.tell_timed_out(&report);
        self.st.deadline = deadline;
        let policy = self.policy.clone();
        let Some(policy) = policy.as_ref() else {
            self.st.allowed_failures = None;
            self.st.not_provisioned = report.listed;
            return Ok(completion.complete);
        };
        let canary = self
            .st
            .waves
            .as_ref()
            .is_some_and(|w| w.canary && w.reached == 1 && w.in_progress());
        let allowed = match canary {
            true => 0,
            false => policy
                .max_failures
                .allowed(u32::try_from(members).unwrap_or(u32::MAX)),
        };
        self.st.allowed_failures = Some(allowed);
        if report.failures() > allowed {
            let budget = match canary {
                true => "the canary's budget 0 (a canary tolerates no failure)".to_string(),
                false => format!("maxFailures {allowed}"),
            };
            let exceeded = self.exceeded(&report, &budget, members, policy.on_failure);
            self.st.not_provisioned = report.listed;
            return Err(Hold::Exceeded(exceeded));
        }
        let settled = report.settled(policy.paused_clusters);
        if !settled {
            self.wake_for_clusters(&report, deadline);
        }
        self.st.not_provisioned = report.listed;
        Ok(settled)
    }

    /// Which judged members Sveltos pauses now, and the record of the time they spent paused
    /// (written to the stage's status). Only while a policy governs: without one nothing times
    /// out and paused clusters simply do not match (upstream).
    fn account_paused(&mut self, reached: Option<&[String]>) -> BTreeMap<String, String> {
        if self.policy.is_none() {
            return BTreeMap::new();
        }
        let judged = reached.or(self.st.members.as_deref()).unwrap_or_default();
        let paused = paused_clusters::paused_members(judged, self.observed, self.now);
        let previous = self
            .st
            .paused_clusters
            .as_deref()
            .map_or(&[][..], Vec::as_slice);
        let times = paused_clusters::account(previous, &paused, judged, self.now);
        self.st.paused_clusters = (!times.is_empty()).then(|| Box::new(times));
        paused
    }

    /// Wake at the earliest deadline of a cluster still going (each moved on by the time it was
    /// paused) and when a cluster's `activeWindow` opens or closes.
    fn wake_for_clusters(&mut self, report: &ClusterReport, deadline: Option<DateTime<Utc>>) {
        let going = report.listed.iter().filter(|c| {
            matches!(
                c.state,
                ClusterState::Pending | ClusterState::Provisioning | ClusterState::Paused
            )
        });
        if let Some(deadline) = deadline {
            // Only instants to come: past the stage's deadline a paused cluster still waits.
            if deadline > self.now {
                self.effects.wake(deadline);
            }
            for cluster in going.clone() {
                let times = self
                    .st
                    .paused_clusters
                    .as_deref()
                    .map_or(&[][..], Vec::as_slice);
                let credit = paused_clusters::credit(times, &cluster.cluster);
                if let Some(at) = deadline.checked_add_signed(credit)
                    && at > self.now
                {
                    self.effects.wake(at);
                }
            }
        }
        let keys = going.map(|c| c.cluster.as_str());
        if let Some(at) = paused_clusters::next_window_change(keys, self.observed, self.now) {
            self.effects.wake(at);
        }
    }

    /// Counts against the stage's members, every wave included: the members fixed at its start
    /// while a policy governs, else the clusters matching now.
    fn count_members(&mut self, reached: Option<&[String]>) {
        let counts = &mut self.st.counts;
        let members = match &self.st.members {
            Some(members) => u32::try_from(members.len()).unwrap_or(u32::MAX),
            None => counts.matching_clusters,
        };
        counts.members = members;
        counts.later_waves = match reached {
            Some(reached) => members.saturating_sub(u32::try_from(reached.len()).unwrap_or(0)),
            None => 0,
        };
    }

    /// The reached waves are provisioned. After the pause, and outside a blackout, the next wave
    /// starts: the profile is re-applied naming its clusters too (the last wave: the selector).
    /// Always a hold: the stage is provisioned when its last wave is.
    /// When the wave reached was provisioned (now, the first time: `run/transition_events` tells
    /// it from `wave_done_at`).
    fn wave_done(&mut self) -> DateTime<Utc> {
        let now = self.now;
        let Some(waves) = self.st.waves.as_mut() else {
            return now;
        };
        if let Some(done_at) = waves.wave_done_at {
            return done_at;
        }
        waves.wave_done_at = Some(now);
        now
    }

    fn next_wave(&mut self) -> Hold {
        let Some(waves) = self.st.waves.as_ref() else {
            return Hold::Wait(
                StageActivity::Provisioning { wave: None },
                "no waves".into(),
            );
        };
        let (reached, total) = (waves.reached, waves.total());
        let done_at = waves.wave_done_at.unwrap_or(self.now);
        let done = WaveOf {
            wave: reached,
            of: total,
        };
        let next = WaveOf {
            wave: reached + 1,
            of: total,
        };
        if let Some(hold) = self.pause_between_waves(done_at, done) {
            return hold;
        }
        if let Some(hold) = self.blackout_before_wave(next) {
            return hold;
        }
        // Told by `run/transition_events` from the waves reached.
        let started = self.open_wave(reached);
        self.apply_wave_spec();
        Hold::Wait(
            StageActivity::Provisioning { wave: Some(next) },
            format!(
                "wave {}/{}: provisioning {} cluster(s)",
                next.wave,
                next.of,
                started.len()
            ),
        )
    }

    /// The policy's pause after `done` was provisioned, while it still runs.
    fn pause_between_waves(&mut self, done_at: DateTime<Utc>, done: WaveOf) -> Option<Hold> {
        let pause = self
            .policy
            .as_ref()
            .and_then(|p| p.waves.as_ref())
            .and_then(|w| w.pause.as_ref())
            .map(|p| p.value);
        let now = self.now;
        let ends = pause
            .and_then(|p| chrono::Duration::from_std(p).ok())
            .and_then(|p| done_at.checked_add_signed(p))
            .filter(|ends| now < *ends)?;
        self.effects.wake(ends);
        let text = format!(
            "wave {}/{} provisioned; wave {} starts at {}",
            done.wave,
            done.of,
            done.wave + 1,
            ends.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        Some(Hold::Wait(
            StageActivity::WavePause {
                wave: done,
                until: ends,
            },
            text,
        ))
    }

    /// A blackout holds the `next` wave; the event is told once, when the hold begins.
    fn blackout_before_wave(&mut self, next: WaveOf) -> Option<Hold> {
        let blackout = self.blackout.as_ref()?;
        self.effects.wake(blackout.until);
        if !matches!(self.st.activity, StageActivity::Blackout { .. }) {
            self.effects.events.push(EngineEvent::normal(
                EventReason::Blackout,
                format!(
                    "Stage {}: wave {}/{} held: {}",
                    self.stage.name,
                    next.wave,
                    next.of,
                    blackout.describe()
                ),
            ));
        }
        let text = format!(
            "wave {}/{} waits: {}",
            next.wave,
            next.of,
            blackout.describe()
        );
        let held = StageActivity::Blackout {
            until: blackout.until,
            reason: blackout.reason.clone(),
            wave: Some(next),
        };
        Some(Hold::Wait(held, text))
    }

    /// Moves the waves past `reached` and returns the clusters of the wave that starts.
    fn open_wave(&mut self, reached: u32) -> Vec<String> {
        let now = self.now;
        let Some(waves) = self.st.waves.as_mut() else {
            return Vec::new();
        };
        waves.reached += 1;
        waves.wave_done_at = None;
        waves.wave_started_at = now;
        waves
            .clusters
            .get(usize::try_from(reached).unwrap_or(usize::MAX))
            .cloned()
            .unwrap_or_default()
    }

    /// Applies the main profile with the spec that now targets the opened wave too.
    fn apply_wave_spec(&mut self) {
        let spec = self.render_spec();
        let hash = spec_hash(&spec);
        let previous = self
            .observed
            .profiles
            .get(&self.profiles.main)
            .filter(|p| !p.deleting);
        self.st.fresh_features = fresh_after_apply(previous, &spec, &hash);
        self.st.hashes_before_apply =
            hashes_before_apply(self.observed, &self.profiles.main, &self.st.fresh_features);
        self.st.applied_at = self.now;
        self.st.applied_spec_hash = hash.clone();
        self.profiles.wanted_hash = hash;
        self.main_applied_now = true;
        let object = self.render_object(self.checks);
        self.effects.apply(self.profiles.main.clone(), object);
        self.spec = None;
    }

    /// One Warning per step naming the clusters that timed out since the last step.
    fn tell_timed_out(&mut self, report: &ClusterReport) {
        let new: Vec<&str> = report
            .listed
            .iter()
            .filter(|c| c.state == ClusterState::TimedOut)
            .filter(|c| {
                !self
                    .st
                    .not_provisioned
                    .iter()
                    .any(|p| p.cluster == c.cluster && p.state == ClusterState::TimedOut)
            })
            .map(|c| c.cluster.as_str())
            .collect();
        if new.is_empty() {
            return;
        }
        let shown = new.iter().take(5).copied().collect::<Vec<_>>().join(", ");
        let more = new.len().saturating_sub(5);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        self.effects.events.push(EngineEvent::warning(
            EventReason::ClusterTimedOut,
            format!(
                "Stage {}: {} cluster(s) not Provisioned by the deadline: {shown}{more}",
                self.stage.name,
                new.len()
            ),
        ));
    }

    fn exceeded(
        &self,
        report: &ClusterReport,
        budget: &str,
        members: usize,
        on_failure: OnFailure,
    ) -> Exceeded {
        let failing: Vec<ClusterCondition> = report.failing().take(10).cloned().collect();
        let first = failing
            .iter()
            .map(|c| match &c.message {
                Some(m) => format!("{} {}: {m}", c.cluster, c.state.as_str()),
                None => format!("{} {}", c.cluster, c.state.as_str()),
            })
            .take(3)
            .collect::<Vec<_>>()
            .join("; ");
        Exceeded {
            reason: format!(
                "{} of {members} clusters failed or timed out ({} failed, {} timed out), over {budget}: {first}",
                report.failures(),
                report.failed,
                report.timed_out,
            ),
            clusters: failing,
            on_failure,
        }
    }

    /// 3. The delay, measured from the completion time (D6: wake exactly at its end).
    fn delay(&mut self, trigger: &Trigger) -> Result<(), Hold> {
        let Some(delay) = trigger.delay() else {
            return Ok(());
        };
        let provisioned_at = self.st.provisioned_at.unwrap_or(self.now);
        let ends_at = chrono::Duration::from_std(delay.value)
            .ok()
            .and_then(|d| provisioned_at.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        if ends_at != DateTime::<Utc>::MAX_UTC {
            self.st.delay_ends_at = Some(ends_at);
        }
        if self.now >= ends_at {
            return Ok(());
        }
        let text = messages::delayed(delay.value, ends_at);
        self.st.describe(&text, self.now);
        self.effects.wake(ends_at);
        let soaking = StageActivity::Soaking { until: ends_at };
        Err(Hold::Wait(soaking, lowercase_first(&text)))
    }

    /// 4. The pre-verification profile, from the end of the delay until the stage is left.
    fn preverification(&mut self, trigger: &Trigger) -> Result<(), Hold> {
        if trigger.pre_health_check_deployment().is_empty() {
            return Ok(());
        }
        let profile = &self.profiles.preverification;
        if self.profiles.foreign_preverification {
            return Err(Hold::Failed(messages::foreign_profile(profile)));
        }
        let spec = preverification_spec(self.snapshot, self.stage);
        let hash = spec_hash(&spec);
        if self
            .st
            .preverification
            .as_ref()
            .is_none_or(|p| p.spec_hash != hash)
        {
            self.st.preverification = Some(Box::new(AppliedProfile {
                applied_at: self.now,
                spec_hash: hash.clone(),
            }));
        }
        let applied_now = self
            .observed
            .profiles
            .get(profile)
            .and_then(|p| p.applied_spec_hash())
            != Some(hash.as_str());
        if applied_now {
            let object = render_preverification_profile(self.snapshot, self.stage);
            self.effects.apply(profile.clone(), object);
        }
        self.preverification = Some((spec, applied_now));
        Ok(())
    }

    /// 5. Post-delay health checks: re-apply the profile with them appended, then require
    ///    completion again, with statuses written after that apply.
    fn post_delay_checks(&mut self, trigger: &Trigger) {
        let post_checks = trigger.post_delay_health_checks();
        if self.spec.is_none() {
            self.spec = Some(self.render_spec());
        }
        if post_checks.is_empty() || self.st.post_delay_checks_applied {
            return;
        }
        self.st.post_delay_checks_applied = true;
        let with_checks = waves::main_spec(
            self.snapshot,
            self.stage,
            post_checks,
            self.st.waves.as_deref(),
        );
        let with_checks_hash = spec_hash(&with_checks);
        if with_checks_hash != self.st.applied_spec_hash {
            self.st.fresh_features = changed_features(self.spec.as_ref(), &with_checks);
            self.st.hashes_before_apply =
                hashes_before_apply(self.observed, &self.profiles.main, &self.st.fresh_features);
            self.st.applied_at = self.now;
            self.st.applied_spec_hash = with_checks_hash;
            let object = self.render_object(post_checks);
            self.effects.apply(self.profiles.main.clone(), object);
            self.main_applied_now = true;
        }
        self.spec = Some(with_checks);
    }

    /// 6. Health re-check, for manual gates too (D3), and the pre-verification deployment.
    fn healthy(&mut self) -> Result<(), Hold> {
        let spec = self.spec.take().unwrap_or_else(|| self.render_spec());
        let recheck = self.check_main(&spec);
        let complete = self.judge(&spec, &recheck)?;
        self.spec = Some(spec);
        let problem = if !complete {
            Some(recheck.message)
        } else {
            self.preverification_problem()
        };
        let now = self.now;
        let Some(problem) = problem else {
            self.st.set_failure(None, now);
            return Ok(());
        };
        // Upstream's two texts: checks still running (nothing failed yet) or checks failing.
        let waiting_text = if self.st.post_delay_checks_applied && self.st.counts.failed == 0 {
            messages::RUNNING_POST_PROMOTION_CHECKS
        } else {
            messages::AWAITING_HEALTH_CHECKS
        };
        self.st.set_failure(Some(problem.clone()), now);
        self.st.describe(waiting_text, now);
        Err(Hold::Wait(
            StageActivity::HealthChecks,
            format!("waiting for health checks to pass: {problem}"),
        ))
    }

    fn preverification_problem(&self) -> Option<String> {
        let (spec, applied_now) = self.preverification.as_ref()?;
        let applied = self.st.preverification.as_deref()?;
        let pre = completion::check(
            &AppliedExpectation {
                profile: &self.profiles.preverification,
                selector: &self.stage.cluster_selector,
                spec,
                spec_hash: &applied.spec_hash,
                applied_at: applied.applied_at,
                fresh_features: &changed_features(None, spec),
                hashes_before_apply: &[],
                being_applied: *applied_now,
                targets: None,
            },
            self.observed,
        );
        (!pre.complete).then(|| format!("pre-verification: {}", pre.message))
    }

    /// 7. The next stage's profile must be free to take before this stage is passed.
    fn next_stage_free(&self) -> Result<(), Hold> {
        match &self.profiles.foreign_next {
            Some(next) => Err(Hold::Failed(messages::foreign_profile(next))),
            None => Ok(()),
        }
    }

    /// The completion check of the main profile against its latest recorded apply.
    fn check_main(&self, spec: &Value) -> Completion {
        let reached = waves::reached(self.st.waves.as_deref());
        completion::check(
            &self.main_expectation(spec, reached.as_deref()),
            self.observed,
        )
    }

    fn main_expectation<'e>(
        &'e self,
        spec: &'e Value,
        targets: Option<&'e [String]>,
    ) -> AppliedExpectation<'e> {
        AppliedExpectation {
            targets,
            profile: &self.profiles.main,
            selector: &self.stage.cluster_selector,
            spec,
            spec_hash: &self.st.applied_spec_hash,
            applied_at: self.st.applied_at,
            fresh_features: &self.st.fresh_features,
            hashes_before_apply: self
                .st
                .hashes_before_apply
                .as_deref()
                .map_or(&[], Vec::as_slice),
            being_applied: self.main_applied_now,
        }
    }
}

pub(crate) fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A completed stage still has members on their way (paused by Sveltos when it completed under
/// `pausedClusters: Skip`, then deploying once their window opened): it follows them until they
/// settle. Failed, timed-out and joined clusters are settled or not judged: nothing to follow.
pub(crate) fn follows_members(st: &StageStatus) -> bool {
    !st.skipped
        && st.not_provisioned.iter().any(|c| {
            matches!(
                c.state,
                ClusterState::Paused | ClusterState::Pending | ClusterState::Provisioning
            )
        })
}

/// What [`StageRun::observe_clusters`] saw: the clusters' report, how many members are judged,
/// and the stage's deadline.
struct Observation {
    report: ClusterReport,
    members: usize,
    deadline: Option<DateTime<Utc>>,
}
