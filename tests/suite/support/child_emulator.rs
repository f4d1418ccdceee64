//! The emulator as its own process (`tollgate emulator`), as a user starts it: for tests whose
//! controllers are real processes too (killed, restarted), or that test the command itself.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::{KillOnDrop, eventually, http, tollgate_binary};

/// A free loopback address (`127.0.0.1:<port>`).
pub fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    format!("127.0.0.1:{port}")
}

/// A running `tollgate emulator`, killed when dropped.
pub struct ChildEmulator {
    /// Held for its drop: the process is killed with it.
    _process: KillOnDrop,
    pub kubeconfig: PathBuf,
}

impl ChildEmulator {
    /// Serves `fleet` (written to `<dir>/fleet.yaml`) with the command's `extra` flags, its
    /// kubeconfig at `<dir>/kubeconfig`; returns once the kubeconfig is written.
    pub fn start(dir: &Path, fleet: &str, extra: &[&str]) -> ChildEmulator {
        let fleet_file = dir.join("fleet.yaml");
        std::fs::write(&fleet_file, fleet).expect("fleet");
        let kubeconfig = dir.join("kubeconfig");
        let child = tollgate_binary()
            .args(["emulator", "--fleet"])
            .arg(&fleet_file)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("emulator starts");
        let process = KillOnDrop(child);
        eventually("the emulator's kubeconfig", || {
            kubeconfig.exists().then_some(())
        });
        ChildEmulator {
            _process: process,
            kubeconfig,
        }
    }

    /// Plain HTTP on a free loopback address (read with plain requests), once it answers there;
    /// with that address.
    pub fn start_plain(dir: &Path, fleet: &str) -> (ChildEmulator, String) {
        let addr = free_addr();
        let emulator = Self::start(dir, fleet, &["--listen", &addr, "--insecure-http"]);
        eventually("the emulator answers", || {
            http(&addr, "GET", "/version", &[], b"").map(|_| ())
        });
        (emulator, addr)
    }
}
