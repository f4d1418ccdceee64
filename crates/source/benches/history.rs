//! Index performance on a generated repository: 10,000 first-parent commits, 1,000 promotions in
//! 20 team directories of 50 files. Targets: full index < 10 s, one new commit < 20 ms, idle
//! sync < 5 ms.
//!
//! Run: `cargo bench -p tollgate-source --bench history`

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use git2::{Oid, Repository, Signature, Time};
use tollgate_source::{GitSource, SourceConfig};

const TEAMS: usize = 20;
const PER_TEAM: usize = 50;
const COMMITS: usize = 10_000;

fn manifest(team: usize, app: usize, version: usize) -> String {
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: team{team}-app{app}
spec:
  profileSpec:
    helmCharts:
    - repositoryURL: https://charts.example.com
      repositoryName: example
      chartName: example/app{app}
      chartVersion: 1.0.{version}
      releaseName: app{app}
      releaseNamespace: team{team}
      helmChartAction: Install
  stages:
  - name: staging
    clusterSelector:
      matchLabels:
        env: staging
    trigger:
      auto:
        delay: 5m
  - name: production
    clusterSelector:
      matchLabels:
        env: production
    trigger:
      manual: {{}}
"
    )
}

/// Builds the repository with git2 object writes (much faster than the CLI).
struct Generated {
    repo: Repository,
    teams: Vec<Oid>,
    head: Option<Oid>,
    commits: usize,
    _dir: tempfile::TempDir,
}

impl Generated {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path()).expect("init");
        let mut teams = Vec::with_capacity(TEAMS);
        for team in 0..TEAMS {
            let mut builder = repo.treebuilder(None).expect("treebuilder");
            for app in 0..PER_TEAM {
                let blob = repo.blob(manifest(team, app, 0).as_bytes()).expect("blob");
                builder
                    .insert(format!("app{app}.yaml"), blob, 0o100644)
                    .expect("insert");
            }
            teams.push(builder.write().expect("team tree"));
        }
        let mut generated = Generated {
            repo,
            teams,
            head: None,
            commits: 0,
            _dir: dir,
        };
        generated.commit_root("add 1000 promotions");
        for n in 1..COMMITS {
            generated.bump(n);
        }
        generated
    }

    fn path(&self) -> String {
        self.repo.path().display().to_string()
    }

    fn commit_root(&mut self, message: &str) {
        let mut teams = self.repo.treebuilder(None).expect("treebuilder");
        for (team, tree) in self.teams.iter().enumerate() {
            teams
                .insert(format!("team{team}"), *tree, 0o040000)
                .expect("insert");
        }
        let teams = teams.write().expect("teams tree");
        let mut root = self.repo.treebuilder(None).expect("treebuilder");
        root.insert("teams", teams, 0o040000).expect("insert");
        let root = self
            .repo
            .find_tree(root.write().expect("root"))
            .expect("tree");
        let when = Time::new(1_700_000_000 + self.commits as i64 * 60, 0);
        let signature = Signature::new("Bench", "bench@example.com", &when).expect("sig");
        let parent = self
            .head
            .map(|head| self.repo.find_commit(head).expect("parent"));
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let commit = self
            .repo
            .commit(
                Some("refs/heads/main"),
                &signature,
                &signature,
                message,
                &root,
                &parents,
            )
            .expect("commit");
        self.head = Some(commit);
        self.commits += 1;
    }

    /// One commit changing one promotion's chart version (a new snapshot).
    fn bump(&mut self, n: usize) {
        let team = n % TEAMS;
        let app = (n / TEAMS) % PER_TEAM;
        let blob = self
            .repo
            .blob(manifest(team, app, n).as_bytes())
            .expect("blob");
        let updated = {
            let current = self.repo.find_tree(self.teams[team]).expect("team tree");
            let mut builder = self.repo.treebuilder(Some(&current)).expect("treebuilder");
            builder
                .insert(format!("app{app}.yaml"), blob, 0o100644)
                .expect("insert");
            builder.write().expect("write")
        };
        self.teams[team] = updated;
        self.commit_root(&format!("bump team{team}/app{app} to 1.0.{n}"));
    }
}

fn synced_source(path: &str) -> GitSource {
    let cache = std::env::temp_dir().join("tollgate-bench-unused-cache");
    let mut source =
        GitSource::open(SourceConfig::new(path, "main", "teams", cache)).expect("open");
    source.sync().expect("sync");
    source
}

fn bench(c: &mut Criterion) {
    let started = Instant::now();
    // Generation only: skip libgit2's existence checks on every object write (reads keep all
    // verification).
    git2::opts::strict_object_creation(false);
    let mut generated = Generated::new();
    git2::opts::strict_object_creation(true);
    eprintln!(
        "generated {} commits, {} promotions in {:?}",
        generated.commits,
        TEAMS * PER_TEAM,
        started.elapsed()
    );
    let path = generated.path();
    let check = synced_source(&path);
    assert_eq!(check.promotions().count(), TEAMS * PER_TEAM);
    assert_eq!(check.head().map(|h| h.seq), Some(COMMITS as u64 - 1));

    let mut group = c.benchmark_group("git_source");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.bench_function("full_index_10k_commits_1k_promotions", |b| {
        b.iter(|| synced_source(&path))
    });
    group.finish();

    let mut group = c.benchmark_group("git_source");
    let mut source = synced_source(&path);
    group.bench_function("one_new_commit_touching_one_file", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let n = generated.commits;
                generated.bump(n);
                let started = Instant::now();
                let report = source.sync().expect("sync");
                total += started.elapsed();
                assert!(report.head_moved && !report.rebuilt);
            }
            total
        })
    });
    group.bench_function("idle_sync", |b| {
        b.iter(|| {
            let report = source.sync().expect("sync");
            assert!(!report.head_moved);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
