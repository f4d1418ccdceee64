//! End to end: `tollgate status --watch` and `tollgate status NAME`, the real binary, against the
//! emulator and the controller with a real git repository. On a pseudo terminal of 80×40 read back
//! through a terminal emulator: the live view fits, draws bars, shows the snapshot each stage runs
//! (a stage on the older snapshot stays visible while a new run starts) and relative times that
//! tick; `status NAME` is a table that fits without breaking a word. Piped: plain frames without
//! escape sequences.

use crate::support;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};
use support::{KillOnDrop, PATIENCE, TestRepo, World, fleet_yaml, seed, tollgate_binary};

const NAME: &str = "kyverno-prog-rollout-man";
const MANIFEST: &str = "08-kyverno-rollout-manual.yaml";
const COLUMNS: u16 = 80;
const ROWS: u16 = 40;

/// `tollgate status --watch` running on a pseudo terminal, its output fed to a terminal emulator.
struct Terminal {
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
    _child: KillOnDrop,
}

impl Terminal {
    fn start(kubeconfig: &Path) -> Terminal {
        Terminal::start_with(kubeconfig, &[])
    }

    fn start_with(kubeconfig: &Path, extra: &[&str]) -> Terminal {
        let mut args = vec!["status", "--watch"];
        args.extend_from_slice(extra);
        Terminal::run(kubeconfig, &args)
    }

    /// `tollgate ARGS --kubeconfig KUBECONFIG` on the pseudo terminal.
    fn run(kubeconfig: &Path, args: &[&str]) -> Terminal {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let size = Winsize {
            ws_row: ROWS,
            ws_col: COLUMNS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        tcsetwinsize(&master, size).expect("window size");
        let path = ptsname(&master, Vec::new()).expect("ptsname");
        let path = path.to_str().expect("a UTF-8 pty path").to_string();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open the pty's terminal side");
        let child = tollgate_binary()
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("tollgate starts");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLUMNS, 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (screen_writer, raw_writer) = (screen.clone(), raw.clone());
        let mut master = File::from(master);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Ends when the child is gone (the pty reports EIO then).
            while let Ok(n) = master.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                lock(&screen_writer).process(&buffer[..n]);
                lock(&raw_writer).extend_from_slice(&buffer[..n]);
            }
        });
        Terminal {
            screen,
            raw,
            _child: KillOnDrop(child),
        }
    }

    /// The screen's rows as text, trailing blanks dropped.
    fn rows(&self) -> Vec<String> {
        lock(&self.screen)
            .screen()
            .rows(0, COLUMNS)
            .map(|row| row.trim_end().to_string())
            .collect()
    }

    /// The row of `stage` in the promotion's block.
    fn stage_row(&self, stage: &str) -> Option<String> {
        let prefix = format!("  {stage} ");
        self.rows().into_iter().find(|row| row.starts_with(&prefix))
    }

    /// Waits until `check` holds for the screen, or fails with the screen as it is.
    async fn eventually<T>(&self, what: &str, check: impl Fn(&Terminal) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}\nscreen:\n{}",
                self.rows().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every frame written so far, as text lines between escape sequences: none is wider than
    /// the terminal, and no row wrapped.
    fn assert_fits(&self) {
        let raw = String::from_utf8_lossy(&lock(&self.raw)).to_string();
        // The pty turns each "\n" into "\r\n" (onlcr): split on the newline, drop the returns.
        for line in without_escapes(&raw).split('\n') {
            let line = line.trim_end_matches('\r');
            assert!(
                line.chars().count() <= usize::from(COLUMNS),
                "a line wider than {COLUMNS} columns: {line:?}"
            );
        }
        let parser = lock(&self.screen);
        for row in 0..ROWS {
            assert!(
                !parser.screen().row_wrapped(row),
                "row {row} wrapped:\n{}",
                self.rows().join("\n")
            );
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `text` without CSI escape sequences (`ESC [ … final byte`).
fn without_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// dev soaks for `dev_delay` after provisioning; staging waits for an approval.
fn manifest(chart: &str, dev_delay: &str) -> String {
    let text = seed(MANIFEST, "1s");
    let text = text.replacen("delay: 1s", &format!("delay: {dev_delay}"), 1);
    let text = text.replace(
        "chartVersion:     3.6.2",
        &format!("chartVersion:     {chart}"),
    );
    assert!(
        text.contains(chart),
        "the seed's chart version line changed shape"
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_fits_80_columns_with_bars_snapshots_per_stage_and_ticking_times() {
    let repo = TestRepo::new();
    repo.write("manual.yaml", &manifest("3.5.2", "1s"));
    repo.commit("Kyverno 3.5.2 with a manual gate before production");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    let terminal = Terminal::start(&world.kubeconfig());

    // Run #1: dev done, staging at its manual gate.
    terminal
        .eventually("staging waits for approval with snapshot #1", |t| {
            let staging = t.stage_row("staging")?;
            (staging.contains("awaiting approval for") && staging.contains("#1")).then_some(())
        })
        .await;
    let dev = terminal.stage_row("dev").expect("a dev row");
    assert!(dev.contains("████████████") && dev.contains("1/1"), "{dev}");
    assert!(dev.contains("completed") && dev.contains("ago"), "{dev}");
    let rows = terminal.rows();
    assert!(
        rows.iter()
            .any(|r| r.starts_with("tollgate status ·") && r.contains("updated")),
        "a clock line: {rows:#?}"
    );

    // Run #2 starts at dev and soaks there; staging keeps #1 and stays on screen.
    world.repo.write("manual.yaml", &manifest("3.6.2", "10m"));
    world.repo.commit("Kyverno 3.6.2");
    world.poke();
    let soak = terminal
        .eventually("dev soaks with #2 while staging keeps #1", |t| {
            let dev = t.stage_row("dev")?;
            let staging = t.stage_row("staging")?;
            let soaking = dev.contains("#2") && dev.contains("soaking, ends in");
            (soaking && staging.contains("#1") && staging.contains("pending")).then_some(dev)
        })
        .await;
    assert!(soak.contains("████████████"), "{soak}");
    let production = terminal.stage_row("production").expect("a production row");
    assert!(production.contains("pending"), "{production}");

    // Nothing changes in status now, yet the countdown ticks.
    terminal
        .eventually("the soak countdown ticks", |t| {
            t.stage_row("dev")
                .filter(|dev| dev.contains("soaking, ends in") && *dev != soak)
        })
        .await;
    terminal.assert_fits();
    let header = terminal
        .rows()
        .into_iter()
        .find(|r| r.starts_with(NAME))
        .expect("the promotion's header");
    assert!(
        header.contains("Waiting") && header.contains("#2 "),
        "{header}"
    );

    // `status NAME` on the same 80 columns: a table that fits, no word broken at the edge.
    let detail = Terminal::run(&world.kubeconfig(), &["status", NAME]);
    let rows = detail
        .eventually("status NAME printed its table", |t| {
            let rows = t.rows();
            rows.iter().any(|r| r.starts_with('└')).then_some(rows)
        })
        .await;
    detail.assert_fits();
    let cells = |stage: &str| -> Vec<String> {
        let row = rows
            .iter()
            .find(|r| r.starts_with(&format!("│ {stage} ")))
            .unwrap_or_else(|| panic!("no row for {stage}:\n{}", rows.join("\n")));
        row.trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // Each stage whole on its row, the snapshot it runs, its counts and what it does.
    let dev = cells("dev");
    assert_eq!(&dev[..3], ["dev", "#2", "1/1 provisioned"], "{dev:?}");
    assert!(dev[3].starts_with("soaking, ends"), "{dev:?}");
    assert_eq!(cells("staging"), ["staging", "#1", "", "pending"]);
    // Run #1 stopped at staging's gate: production has no snapshot yet.
    assert_eq!(cells("production"), ["production", "", "", "pending"]);
    for row in &rows {
        assert!(!row.contains("productio "), "a word cut at the edge: {row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_watch_output_is_plain_text_without_escape_sequences() {
    let repo = TestRepo::new();
    repo.write("manual.yaml", &manifest("3.5.2", "1s"));
    repo.commit("Kyverno 3.5.2 with a manual gate before production");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    let mut child = KillOnDrop(
        tollgate_binary()
            .args(["status", "--watch", "--kubeconfig"])
            .arg(world.kubeconfig())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("tollgate status --watch starts"),
    );
    let mut stdout = child.0.stdout.take().expect("stdout");
    let output = Arc::new(Mutex::new(Vec::new()));
    let writer = output.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 {
                break;
            }
            lock(&writer).extend_from_slice(&buffer[..n]);
        }
    });
    let text = world
        .eventually("a frame showing the manual gate", || async {
            let text = String::from_utf8_lossy(&lock(&output)).to_string();
            (text.contains(NAME) && text.contains("Waiting") && text.contains("\n---\n"))
                .then_some(text)
        })
        .await;
    assert!(
        !text.contains('\x1b'),
        "escape sequences in piped output: {text:?}"
    );
    assert!(!text.contains("████"), "no live view when piped: {text}");
}

/// Watching a name that is not there says which and where to look; SIGTERM (what `kill` and a
/// pod's shutdown send) ends the view with the cursor shown again, as Ctrl-C does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_is_named_and_sigterm_restores_the_cursor() {
    let repo = TestRepo::new();
    repo.write("manual.yaml", &manifest("3.5.2", "1s"));
    repo.commit("Kyverno");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    let terminal = Terminal::start_with(&world.kubeconfig(), &["no-such-promotion"]);
    terminal
        .eventually("the unknown name is named", |t| {
            t.rows()
                .iter()
                .any(|r| r.contains("no promotion named \"no-such-promotion\""))
                .then_some(())
        })
        .await;
    let pid = terminal._child.0.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    terminal
        .eventually("the cursor is shown again after the last hide", |t| {
            let raw = String::from_utf8_lossy(&lock(&t.raw)).to_string();
            let hidden = raw.rfind("\x1b[?25l")?;
            raw[hidden..].contains("\x1b[?25h").then_some(())
        })
        .await;
}

/// dev then prod, both automatic unless `gate`: prod waits for a person.
fn web(chart: &str, gate: bool) -> String {
    promotion_named("web", chart, gate)
}

/// [`web`] under another name.
fn promotion_named(name: &str, chart: &str, gate: bool) -> String {
    let prod = tollgate_fixtures::stage("prod").selector("env", "prod");
    tollgate_fixtures::promotion(name)
        .chart("web", chart)
        .stage(
            tollgate_fixtures::stage("dev")
                .selector("env", "dev")
                .auto(),
        )
        .stage(if gate { prod.manual() } else { prod.auto() })
        .to_yaml()
}

fn dev_and_prod() -> String {
    use tollgate_fixtures::{cluster, fleet};
    fleet()
        .default_latency("50ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
        .cluster(cluster("prod-1").ns("fleet").label("env", "prod"))
        .to_yaml()
}

const GATEWAY: &str = "core-payments-gateway-eu";

const TWO_APPROVERS: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    prod:\n      approvers: [alice@example.com, bob@example.com]\n      minApprovals: 2\n";

/// Issue #47: under `minApprovals: 2` the gate's line says how many of how many approvals it
/// has, and the header counts the time in the phase the controller recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_shows_a_gates_quorum_and_the_time_in_the_phase() {
    let repo = TestRepo::new();
    // A name as long as real ones get: beside the gate's message it does not fit 80 columns.
    repo.write("web.yaml", &promotion_named(GATEWAY, "1.0.0", true));
    repo.write("policy.yaml", TWO_APPROVERS);
    repo.commit("web, its prod gate wanting two approvers");
    let world = World::start(repo, &dev_and_prod()).await;
    let terminal = Terminal::start(&world.kubeconfig());
    let prod = terminal
        .eventually("prod awaits its quorum", |t| {
            t.stage_row("prod")
                .filter(|row| row.contains("awaiting approval"))
        })
        .await;
    assert!(prod.contains("awaiting approval, 0 of 2 for"), "{prod}");
    let status = world.status(GATEWAY).await.expect("a status");
    assert_eq!(status["phase"], "Waiting");
    assert!(status["phaseSince"].is_string(), "{status}");
    let header = terminal
        .rows()
        .into_iter()
        .find(|r| r.starts_with(&format!("{GATEWAY} ")))
        .expect("the promotion's header");
    assert!(
        header.contains("Waiting") && header.contains(" for "),
        "{header}"
    );
    terminal.assert_fits();

    // `status` and `status NAME` at 80 and 120 columns: the snapshot id the message tells the
    // approvers to name is printed whole, and nothing is cut.
    let id12 = status["snapshotId"].as_str().expect("an id")[..12].to_string();
    for columns in [80usize, 120] {
        for args in [vec!["status"], vec!["status", GATEWAY]] {
            let output = tollgate_binary()
                .args(&args)
                .arg("--kubeconfig")
                .arg(world.kubeconfig())
                .env("COLUMNS", columns.to_string())
                .output()
                .expect("tollgate status runs");
            let text = String::from_utf8_lossy(&output.stdout).to_string();
            assert!(output.status.success(), "{text}");
            for line in text.lines() {
                assert!(
                    line.chars().count() <= columns,
                    "wider than {columns}: {line:?}\n{text}"
                );
            }
            assert!(!text.contains('…'), "{text}");
            let words: Vec<&str> = text
                .split(|c: char| c.is_whitespace() || "│┆`".contains(c))
                .collect();
            assert!(
                words.contains(&id12.as_str()),
                "{id12} not whole in\n{text}"
            );
        }
    }
}

/// Issue #47: after a revert rolled back on the fast path, the live view says so whole, as
/// `status NAME` does ("rollback to #1, fast"), on 80 columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_says_a_rollback_was_fast_at_80_columns() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", false));
    // A RolloutPolicy: its rollback (Fast by default) is what a revert follows.
    repo.write(
        "policy.yaml",
        &tollgate_fixtures::policy("fleet-defaults")
            .max_failures("0")
            .to_yaml(),
    );
    repo.commit("web 1.0.0");
    let world = World::start(repo, &dev_and_prod()).await;
    world.wait_phase("web", "Completed").await;
    world.repo.write("web.yaml", &web("2.0.0", false));
    let release = world.repo.commit("web 2.0.0");
    world.poke();
    world
        .eventually("snapshot #2 completes", || async {
            world
                .status("web")
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    world.repo.git(&["revert", "--no-edit", &release]);
    world.poke();
    let restored = world
        .eventually("the revert completes", || async {
            world
                .status("web")
                .await
                .filter(|s| s["snapshotIndex"] == 3 && s["phase"] == "Completed")
        })
        .await;
    assert_eq!(restored["rollback"], "Fast", "{restored}");
    let terminal = Terminal::start(&world.kubeconfig());
    let header = terminal
        .eventually("the header of the rolled-back promotion", |t| {
            t.rows().into_iter().find(|r| r.starts_with("web "))
        })
        .await;
    assert!(header.contains("↶#1 fast"), "{header}");
    assert!(!header.contains('…'), "{header}");
    terminal.assert_fits();
}
