//! The Sveltos features a profile deploys with, below the fleet file and its failure rules,
//! which both name them.

use serde::Deserialize;

/// A Sveltos feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub enum Feature {
    Helm,
    Resources,
    Kustomize,
}

impl Feature {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Helm => "Helm",
            Self::Resources => "Resources",
            Self::Kustomize => "Kustomize",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Helm, Self::Resources, Self::Kustomize]
            .into_iter()
            .find(|f| f.as_str() == text)
    }
}
