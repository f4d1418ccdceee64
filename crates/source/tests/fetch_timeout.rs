//! A remote that accepts the connection and then never answers makes a sync fail with a timeout
//! instead of hanging the controller. One test per binary on purpose: libgit2's timeouts are
//! process-wide and the first fetch installs them.

use std::io::Read;
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use tollgate_source::timeouts::NetworkTimeouts;
use tollgate_source::{GitSource, SourceConfig, SourceError};

#[test]
fn a_silent_remote_times_out_instead_of_hanging() {
    // Accepts every connection, reads the request, never writes a byte.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let url = format!("http://{}/silent.git", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = stream.try_clone().expect("clone stream");
            std::thread::spawn(move || {
                let mut sink = [0u8; 4096];
                while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
            });
            held.push(stream);
        }
    });

    let cache = tempfile::tempdir().expect("cache");
    let mut config = SourceConfig::new(&url, "main", "", cache.path());
    config.timeouts = NetworkTimeouts {
        connect: Duration::from_secs(1),
        io: Duration::from_secs(1),
    };
    let (done, outcome) = mpsc::channel();
    std::thread::spawn(move || {
        let mut source = GitSource::open(config).expect("open");
        let _ = done.send(source.sync());
    });
    // A correctness bound, not a speed check: without timeouts this would wait forever.
    let result = outcome
        .recv_timeout(Duration::from_secs(120))
        .expect("the sync returned instead of hanging");
    let error = result.expect_err("a silent remote cannot be synced");
    assert!(matches!(error, SourceError::Fetch { .. }), "{error:?}");
    let shown = format!("{error:#}").to_lowercase();
    assert!(
        shown.contains("timed out") || shown.contains("timeout"),
        "{shown}"
    );
}
