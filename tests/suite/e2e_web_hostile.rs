//! The web view against a hostile page (issue #44 item 9), through the real `tollgate run --ui`
//! binary and raw HTTP: a page whose name was rebound to the server's address (`Host` and
//! `Origin` the attacker's) is refused before anything is read, committed, pushed or opened; a
//! POST that does not prove it came from the web view's own page is refused; and an address the
//! git host answers that is not https never becomes a link.

use crate::support;

use std::path::PathBuf;

use support::TestRepo;
use support::web_attack::{FORM, GitHostStub, UiRun, branches, hrefs, request};
use tollgate_fixtures::{promotion, stage};

fn one_stage(name: &str) -> String {
    promotion(name)
        .chart(name, "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml()
}

/// A repository with `web` and `api`, whose `origin` is a bare repository (returned).
fn repo_with_remote() -> (TestRepo, tempfile::TempDir, PathBuf) {
    let repo = TestRepo::new();
    repo.write("web.yaml", &one_stage("web"));
    repo.write("api.yaml", &one_stage("api"));
    repo.commit("web and api");
    let remote = tempfile::tempdir().expect("remote dir");
    let bare = remote.path().join("fleet.git");
    repo.git(&["init", "-q", "--bare", &bare.to_string_lossy()]);
    repo.git(&["remote", "add", "origin", &bare.to_string_lossy()]);
    (repo, remote, bare)
}

fn token_file(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("git-host-token");
    std::fs::write(&path, "ghp-hostile-page-test-token\n").expect("token file");
    path
}

fn port_of(addr: &str) -> &str {
    addr.rsplit(':').next().expect("a port")
}

#[test]
fn a_rebound_host_is_refused_and_nothing_is_committed_pushed_or_opened() {
    let (repo, remote, bare) = repo_with_remote();
    let stub = GitHostStub::start(&["https://git.example/acme/fleet/pull/7"]);
    let flags = stub.flags(&token_file(remote.path()));
    // The operator's public names for it, as an ingress would forward them.
    let env = [(
        "TOLLGATE_UI_ALLOWED_HOSTS".to_string(),
        PathBuf::from("tollgate.example.com,ops.example:9443"),
    )];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let ui = UiRun::spawn_with_env(repo.path(), &flags, &env);
    let addr = ui.addr();
    ui.wait_for_action(&addr, "web", "pause");
    for allowed in ["tollgate.example.com", "ops.example:9443"] {
        let page = request(&addr, allowed, "GET", "/ui/promotions/web", &[], b"").expect("answer");
        assert_eq!(
            page.status, 200,
            "{allowed}, an allowed name: {}",
            page.body
        );
    }

    // evil.example now resolves to the server: the browser sends the attacker's name as Host,
    // and the attacker's page as Origin, which then looks "same-origin" to a naive check.
    let evil = format!("evil.example:{}", port_of(&addr));
    let evil_origin = format!("http://{evil}");
    let headers = [("Origin", evil_origin.as_str()), FORM];
    let path = "/ui/promotions/web/actions";
    let attack = request(&addr, &evil, "POST", path, &headers, b"action=pause").expect("answer");
    assert_eq!(attack.status, 403, "the rebound POST: {}", attack.body);
    assert!(
        attack.body.contains("evil.example"),
        "the refusal names the host: {}",
        attack.body
    );
    for page in ["/ui", "/ui/promotions/web", "/ui/static/live.js"] {
        let read = request(&addr, &evil, "GET", page, &[], b"").expect("answer");
        assert_eq!(read.status, 403, "{page} read through the rebound name");
        assert!(!read.body.contains("Pipeline"), "{page}: {}", read.body);
    }
    assert_eq!(
        branches(&repo.path().join(".git")),
        ["main"],
        "a branch was committed"
    );
    assert!(branches(&bare).is_empty(), "a branch was pushed");
    assert!(stub.seen().is_empty(), "a pull request was opened");

    // The same press from the web view's own page: committed, pushed, opened.
    let own = format!("http://{addr}");
    let headers = [("Origin", own.as_str()), FORM];
    let pressed = request(&addr, &addr, "POST", path, &headers, b"action=pause").expect("answer");
    assert_eq!(pressed.status, 200, "{}", pressed.body);
    assert_eq!(branches(&bare), ["tollgate/pause-web"]);
    let opened = stub.seen();
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(opened[0].path, "/repos/acme/fleet/pulls");
    assert_eq!(opened[0].auth, "Bearer ghp-hostile-page-test-token");
    assert_eq!(opened[0].body["head"], "tollgate/pause-web");
}

#[test]
fn a_post_without_proof_of_its_origin_is_refused_and_commits_nothing() {
    let (repo, _remote, _bare) = repo_with_remote();
    let ui = UiRun::spawn(repo.path(), &[]);
    let addr = ui.addr();
    ui.wait_for_action(&addr, "web", "pause");
    let path = "/ui/promotions/web/actions";
    let other_port = format!(
        "http://127.0.0.1:{}",
        port_of(&addr).parse::<u16>().expect("port") ^ 1
    );
    let refused: [(&str, Vec<(&str, &str)>); 5] = [
        // Neither header: a script, or a browser that strips them; nothing proves the origin.
        ("no Origin, no Sec-Fetch-Site", vec![FORM]),
        // "none" is a navigation the user typed: no page of ours posts it.
        (
            "Sec-Fetch-Site: none",
            vec![FORM, ("Sec-Fetch-Site", "none")],
        ),
        (
            "Sec-Fetch-Site: cross-site",
            vec![FORM, ("Sec-Fetch-Site", "cross-site")],
        ),
        ("Origin: null", vec![FORM, ("Origin", "null")]),
        (
            "another port's Origin",
            vec![FORM, ("Origin", other_port.as_str())],
        ),
    ];
    for (what, headers) in &refused {
        let answer = request(&addr, &addr, "POST", path, headers, b"action=pause").expect("answer");
        assert_eq!(answer.status, 403, "{what}: {}", answer.body);
    }
    let login = request(&addr, &addr, "POST", "/ui/login", &[FORM], b"token=x").expect("answer");
    assert_eq!(login.status, 403, "the login form follows the same rule");
    assert_eq!(
        branches(&repo.path().join(".git")),
        ["main"],
        "something was committed"
    );

    // Fetch metadata alone (no Origin) saying same-origin is the web view's own page.
    let headers = [FORM, ("Sec-Fetch-Site", "same-origin")];
    let own = request(&addr, &addr, "POST", path, &headers, b"action=pause").expect("answer");
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(
        branches(&repo.path().join(".git")),
        ["main", "tollgate/pause-web"]
    );
}

#[test]
fn a_pull_request_address_that_is_not_https_is_never_a_link() {
    let (repo, remote, _bare) = repo_with_remote();
    let answers = [
        "javascript:fetch('/ui').then(r=>r.text()).then(alert)",
        "http://git.example/acme/fleet/pull/8",
    ];
    let stub = GitHostStub::start(&answers);
    let flags = stub.flags(&token_file(remote.path()));
    let ui = UiRun::spawn(
        repo.path(),
        &flags.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let addr = ui.addr();
    ui.wait_for_action(&addr, "web", "pause");
    ui.wait_for_action(&addr, "api", "pause");
    let own = format!("http://{addr}");
    let headers = [("Origin", own.as_str()), FORM];
    for (name, answered) in [("web", answers[0]), ("api", answers[1])] {
        let path = format!("/ui/promotions/{name}/actions");
        let page = request(&addr, &addr, "POST", &path, &headers, b"action=pause").expect("answer");
        assert_eq!(page.status, 200, "{}", page.body);
        let links = hrefs(&page.body);
        assert!(
            links
                .iter()
                .all(|l| l.starts_with('/') || l.starts_with("https://")),
            "{name}: a link that is not https: {links:?}"
        );
        assert!(
            page.body.contains("not https"),
            "{name}: the page says why {answered} is not linked: {}",
            page.body
        );
    }
    assert_eq!(stub.seen().len(), 2);
}

/// A kubeconfig whose API server does not answer: `tollgate ui` serves its pages regardless.
fn dead_kubeconfig(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    let yaml = "apiVersion: v1\nkind: Config\ncurrent-context: t\n\
                clusters:\n- name: t\n  cluster: {server: \"http://127.0.0.1:1\"}\n\
                users:\n- name: t\n  user: {}\n\
                contexts:\n- name: t\n  context: {cluster: t, user: t}\n";
    std::fs::write(&path, yaml).expect("kubeconfig");
    path
}

#[test]
fn tollgate_ui_on_every_interface_admits_the_address_reached_and_the_names_given() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = support::tollgate_binary()
        .args(["ui", "--listen", &format!("0.0.0.0:{port}"), "--kubeconfig"])
        .arg(dead_kubeconfig(dir.path()))
        .args(["--ui-allowed-host", &format!("ui.example:{port}")])
        .args(["--ui-allowed-host", "ops.example"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tollgate ui starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its first line");
    let _ui = support::KillOnDrop(child);
    // It prints an address the allow-list admits, not 0.0.0.0.
    let addr = format!("127.0.0.1:{port}");
    assert_eq!(
        line.trim(),
        format!("Serving the web view on http://{addr}/ui")
    );
    let status = |host: &str| {
        request(&addr, host, "GET", "/ui", &[], b"")
            .expect("answer")
            .status
    };
    for admitted in [
        addr.clone(),
        format!("localhost:{port}"),
        format!("ui.example:{port}"),
        "ops.example".to_string(),
        format!("ops.example:{}", port ^ 1),
    ] {
        assert_eq!(status(&admitted), 200, "{admitted}");
    }
    for refused in [
        format!("evil.example:{port}"),
        format!("ui.example:{}", port ^ 1),
        format!("0.0.0.0:{port}"),
        format!("127.0.0.1:{}", port ^ 1),
    ] {
        assert_eq!(status(&refused), 403, "{refused}");
    }
}
