//! Test repositories built with the `git` CLI in temp dirs, and ClusterPromotion manifests.

use tollgate_source::{GitSource, SourceConfig};

/// The source tests' repositories commit as Alice (author) and Carl (committer):
/// `TestRepo::with_fixed_identity()`.
pub use tollgate_fixtures::TestRepo;

/// Runs git with a fixed identity and no user/system configuration.
pub use tollgate_fixtures::git::git as git_in;

/// A [`TestRepo`] as a local git source.
pub trait SourceRepo {
    fn config(&self, path: &str) -> SourceConfig;

    fn source(&self) -> GitSource {
        GitSource::open(self.config("")).expect("open source")
    }

    fn source_at(&self, path: &str) -> GitSource {
        GitSource::open(self.config(path)).expect("open source")
    }
}

impl SourceRepo for TestRepo {
    fn config(&self, path: &str) -> SourceConfig {
        SourceConfig::new(
            self.path().display().to_string(),
            "main",
            path,
            self.path().join("unused-cache"),
        )
    }
}

/// A ClusterPromotion with a staging (auto) and a production (manual) stage.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub name: String,
    pub chart_version: String,
    pub production_env: String,
    pub delay: String,
    pub approved: Option<bool>,
    pub annotations: Vec<(String, String)>,
}

impl Manifest {
    pub fn new(name: &str, chart_version: &str) -> Self {
        Manifest {
            name: name.to_string(),
            chart_version: chart_version.to_string(),
            production_env: "production".to_string(),
            delay: "5m".to_string(),
            approved: None,
            annotations: Vec::new(),
        }
    }

    pub fn version(mut self, version: &str) -> Self {
        self.chart_version = version.to_string();
        self
    }

    pub fn approved(mut self, approved: Option<bool>) -> Self {
        self.approved = approved;
        self
    }

    pub fn delay(mut self, delay: &str) -> Self {
        self.delay = delay.to_string();
        self
    }

    pub fn production_env(mut self, env: &str) -> Self {
        self.production_env = env.to_string();
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.retain(|(k, _)| k != key);
        self.annotations.push((key.to_string(), value.to_string()));
        self
    }

    pub fn yaml(&self) -> String {
        let production =
            tollgate_fixtures::stage("production").selector("env", &self.production_env);
        let production = match self.approved {
            Some(approved) => production.approved(approved),
            None => production.manual(),
        };
        let mut manifest = tollgate_fixtures::promotion(&self.name);
        for (key, value) in &self.annotations {
            manifest = manifest.annotation(key, value);
        }
        manifest
            .chart("app", &self.chart_version)
            .stage(
                tollgate_fixtures::stage("staging")
                    .selector("env", "staging")
                    .delay(&self.delay),
            )
            .stage(production)
            .to_yaml()
    }
}

/// A manifest whose `stages` has the wrong type: it parses as YAML, names itself, and is invalid.
pub fn invalid_manifest(name: &str) -> String {
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: {name}
spec:
  stages: not-a-list
"
    )
}
