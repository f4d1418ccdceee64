//! A status built by a step, trimmed to its contents before it is kept.
//!
//! A step builds its status with pushes and `format!`, which leave spare capacity (a vector of
//! ten not-provisioned clusters has room for sixteen; a formatted message up to twice its
//! length). The controller keeps every promotion's last status, so the spare room is trimmed
//! once per write instead of being held between steps.

use crate::status::{ClusterCondition, Condition, PromotionStatus, StageStatus};

fn text(s: &mut String) {
    s.shrink_to_fit();
}

fn optional(s: &mut Option<String>) {
    if let Some(s) = s {
        s.shrink_to_fit();
    }
}

fn list<T>(items: &mut Vec<T>, each: impl FnMut(&mut T)) {
    items.iter_mut().for_each(each);
    items.shrink_to_fit();
}

fn condition(c: &mut Condition) {
    text(&mut c.type_);
    text(&mut c.status);
    text(&mut c.reason);
    text(&mut c.message);
}

fn cluster(c: &mut ClusterCondition) {
    text(&mut c.cluster);
    optional(&mut c.message);
}

fn stage(s: &mut StageStatus) {
    text(&mut s.name);
    optional(&mut s.failure_message);
    optional(&mut s.current_status_description);
    text(&mut s.applied_spec_hash);
    list(&mut s.fresh_features, text);
    optional(&mut s.provisioned_message);
    optional(&mut s.waiting_reason);
    if let Some(members) = &mut s.members {
        list(members, text);
    }
    list(&mut s.not_provisioned, cluster);
}

impl PromotionStatus {
    /// Drops spare capacity from every list and text the status holds (its run history and
    /// boxed parts excepted: those are built to size).
    pub fn shrink_to_fit(&mut self) {
        optional(&mut self.profile_spec_hash);
        optional(&mut self.stages_hash);
        optional(&mut self.snapshot_commit);
        optional(&mut self.snapshot_id);
        optional(&mut self.current_stage_name);
        list(&mut self.stages, stage);
        optional(&mut self.message);
        optional(&mut self.invalid_spec);
        self.consumed_approvals.shrink_to_fit();
        list(&mut self.conditions, condition);
        self.superseded_snapshots.shrink_to_fit();
        list(&mut self.stages_ahead, |s| text(&mut s.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_status_holds_no_spare_capacity_and_the_same_content() {
        let mut status: PromotionStatus = serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Progressing", "message": "m",
            "stages": [{"name": "dev", "snapshotIndex": 1, "appliedAt": "2025-10-07T10:00:00Z",
                        "appliedSpecHash": "h"}],
        }))
        .expect("a status");
        let mut message = String::with_capacity(64);
        message.push_str("grown");
        status.message = Some(message);
        status.stages.reserve(10);
        let stage = &mut status.stages[0];
        stage.not_provisioned = Vec::with_capacity(16);
        stage.not_provisioned.push(ClusterCondition {
            cluster: "fleet/c1".to_string(),
            state: crate::status::ClusterState::Provisioning,
            message: Some(String::with_capacity(100) + "waiting"),
            since: chrono::DateTime::UNIX_EPOCH,
        });
        let before = status.clone();
        status.shrink_to_fit();
        assert_eq!(status, before);
        assert_eq!(status.message.as_ref().map(String::capacity), Some(5));
        assert_eq!(status.stages.capacity(), 1);
        let listed = &status.stages[0].not_provisioned;
        assert_eq!(listed.capacity(), 1);
        assert_eq!(listed[0].message.as_ref().map(String::capacity), Some(7));
    }
}
