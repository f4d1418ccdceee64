//! The trust facts every view shows the same way (issue #44): a gate's quorum (`1 of 2`, who
//! counted, who did not and why) and the commit verification refuses.

use crate::status::conditions::COMMIT_VERIFIED;
use crate::status::pipeline::StageView;
use crate::status::{ApprovalReview, PromotionStatus};

/// The quorum of a gate under an approval policy, from the reviews its stage recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumView<'s> {
    pub needed: u32,
    /// The approvals that count, oldest first.
    pub counted: Vec<&'s ApprovalReview>,
    /// The approvals that do not, each with why.
    pub refused: Vec<&'s ApprovalReview>,
}

impl QuorumView<'_> {
    /// `1 of 2`.
    pub fn tally(&self) -> String {
        format!("{} of {}", self.counted.len(), self.needed)
    }

    pub fn is_met(&self) -> bool {
        self.counted.len() >= self.needed as usize
    }

    /// `1 of 2 approvals (alice@example.com); not counted: 1a2b3c4 by mallory@example.com:
    /// unsigned`.
    pub fn summary(&self) -> String {
        let mut text = format!("{} approvals", self.tally());
        if !self.counted.is_empty() {
            let who: Vec<&str> = self.counted.iter().map(|r| r.approver.as_str()).collect();
            text.push_str(&format!(" ({})", who.join(", ")));
        }
        if !self.refused.is_empty() {
            let why: Vec<String> = self
                .refused
                .iter()
                .map(|r| {
                    format!(
                        "{} by {}: {}",
                        tollgate_model::snapshot::short_sha(&r.sha),
                        r.approver,
                        r.reason.as_deref().unwrap_or("does not count")
                    )
                })
                .collect();
            text.push_str(&format!("; not counted: {}", why.join("; ")));
        }
        text
    }
}

impl<'s> StageView<'s> {
    /// The stage's quorum, for a gate under an approval policy that looked at its approvals.
    pub fn quorum(&self) -> Option<QuorumView<'s>> {
        let status = self.status?;
        let reviews = status.approvals.as_deref()?;
        Some(QuorumView {
            needed: u32::from(status.approvals_needed.unwrap_or(1)),
            counted: reviews.iter().filter(|r| r.counts).collect(),
            refused: reviews.iter().filter(|r| !r.counts).collect(),
        })
    }
}

impl PromotionStatus {
    /// Why a commit of the branch does not roll out (`--verify-commits`), when one does not:
    /// which commit, why, and what keeps running.
    pub fn commit_refusal(&self) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.type_ == COMMIT_VERIFIED && c.status == "False")
            .map(|c| c.message.as_str())
    }
}
