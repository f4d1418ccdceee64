//! The Host allow-list (issue #44 item 9). A page on another site can make a browser talk to the
//! web view by pointing a name it controls at the server's address (DNS rebinding): the browser
//! then treats the web view as that page's own origin, sends the attacker's name as `Host` and
//! lets the page read every answer and post any form. Only a name the attacker does not control
//! defeats that, so every request under `/ui` must name the server by the address it was reached
//! on (loopback names for a loopback connection) or by a name the operator allowed with
//! `--ui-allowed-host`; anything else is refused before it is read.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use tokio::net::TcpListener;

use super::WebState;

/// The local address a connection was accepted on: with a listener on `0.0.0.0`, the interface
/// the client actually reached. Serve the web view with
/// `router.into_make_service_with_connect_info::<ServedOn>()`; without it only the names given
/// with `--ui-allowed-host` are let in.
#[derive(Clone, Copy, Debug)]
pub struct ServedOn(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for ServedOn {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        // An accepted socket knows its local address; the unspecified address matches nothing.
        let local = stream.io().local_addr();
        ServedOn(local.unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))))
    }
}

/// One `--ui-allowed-host NAME[:PORT]`: a name (or IP literal, IPv6 in brackets), lowercased,
/// and its port; without a port the name is allowed on any port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedHost {
    host: String,
    port: Option<u16>,
}

impl FromStr for AllowedHost {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (host, port) = authority(text).ok_or_else(|| {
            format!(
                "{text:?} is not NAME or NAME:PORT (a host name or IP address, no scheme or path)"
            )
        })?;
        Ok(AllowedHost { host, port })
    }
}

impl std::fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

impl AllowedHost {
    /// Whether `host` (lowercased) with `port` (`None`: the Host header named none) is this one.
    /// A Host without a port is the browser's default port: 80 or 443 behind a proxy.
    fn admits(&self, host: &str, port: Option<u16>) -> bool {
        self.host == host
            && match (self.port, port) {
                (None, _) => true,
                (Some(allowed), Some(port)) => allowed == port,
                (Some(allowed), None) => allowed == 80 || allowed == 443,
            }
    }
}

/// `host[:port]` as a Host header or a flag writes it: the host lowercased (IPv6 kept in
/// brackets), and the port. `None` for anything else (a scheme, a path, user info, spaces).
pub(super) fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let valid =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']');
    if text.is_empty() || !text.chars().all(valid) {
        return None;
    }
    let text = text.to_ascii_lowercase();
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            inside.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                after => Some(after.strip_prefix(':')?),
            };
            (format!("[{inside}]"), port)
        }
        None if text.contains(['[', ']']) => return None,
        None => match text.split_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (text.clone(), None),
        },
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    Some((host, port))
}

/// The names that reach a loopback listener from the same machine.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Whether `host_header` names this server: the address the connection reached (`served_on`), a
/// loopback name when that address is loopback, or an allowed host. The port must be the one
/// reached (a Host without one means 80).
pub fn admits(host_header: &str, served_on: Option<SocketAddr>, allowed: &[AllowedHost]) -> bool {
    let Some((host, port)) = authority(host_header) else {
        return false;
    };
    if allowed.iter().any(|a| a.admits(&host, port)) {
        return true;
    }
    let Some(local) = served_on else {
        return false;
    };
    let local_ip = local.ip().to_canonical();
    if port.unwrap_or(80) != local.port() || local_ip.is_unspecified() {
        return false;
    }
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let names_the_address = literal
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.to_canonical() == local_ip);
    names_the_address || (local_ip.is_loopback() && LOOPBACK_NAMES.contains(&host.as_str()))
}

/// Refuses, with 403 and a body that says what to do, a request whose Host is not this server's.
pub(super) async fn require(
    State(web): State<WebState>,
    mut request: Request,
    next: Next,
) -> Response {
    // HTTP/2 carries the name in the request's authority, HTTP/1.1 in the Host header; the
    // authority is copied into Host so that the Origin check compares with the same name.
    if !request.headers().contains_key(header::HOST)
        && let Some(authority) = request.uri().authority()
        && let Ok(value) = authority.as_str().parse()
    {
        request.headers_mut().insert(header::HOST, value);
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let served_on = request
        .extensions()
        .get::<ConnectInfo<ServedOn>>()
        .map(|info| info.0.0);
    if admits(&host, served_on, &web.allowed_hosts) {
        return next.run(request).await;
    }
    let body = format!(
        "misdirected request: the Host {host:?} is not this web view's address. Open it by the \
         address it listens on, or start it with --ui-allowed-host NAME[:PORT] for the name a \
         proxy or ingress serves it under.\n"
    );
    (StatusCode::FORBIDDEN, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(addr: &str) -> Option<SocketAddr> {
        Some(addr.parse().expect("an address"))
    }

    fn allowed(names: &[&str]) -> Vec<AllowedHost> {
        names.iter().map(|n| n.parse().expect("a name")).collect()
    }

    #[test]
    fn a_loopback_connection_admits_its_address_and_the_loopback_names_on_its_port() {
        let local = on("127.0.0.1:8080");
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost:8080",
            "[::1]:8080",
        ] {
            assert!(admits(host, local, &[]), "{host}");
        }
        for host in [
            "evil.example:8080",
            "localhost:8081",
            "127.0.0.1",
            "localhost.:8080",
            "127.0.0.2:8080",
            "",
            "user@127.0.0.1:8080",
            "127.0.0.1:8080/ui",
        ] {
            assert!(!admits(host, local, &[]), "{host}");
        }
        assert!(admits("[::1]:8080", on("[::1]:8080"), &[]));
        assert!(admits("localhost:8080", on("[::ffff:127.0.0.1]:8080"), &[]));
    }

    #[test]
    fn on_every_interface_only_the_address_reached_and_the_allowed_names_are_admitted() {
        let local = on("10.1.2.3:8080");
        assert!(admits("10.1.2.3:8080", local, &[]));
        assert!(
            !admits("localhost:8080", local, &[]),
            "not a loopback connection"
        );
        assert!(!admits("0.0.0.0:8080", local, &[]));
        assert!(!admits("tollgate.example.com", local, &[]));
        let names = allowed(&["Tollgate.Example.com", "ops.example:9443"]);
        assert!(admits("tollgate.example.com", local, &names));
        assert!(
            admits("tollgate.example.com:31000", local, &names),
            "any port"
        );
        assert!(admits("ops.example:9443", local, &names));
        assert!(!admits("ops.example:9444", local, &names));
        assert!(!admits("ops.example", local, &names), "443 is not 9443");
        assert!(!admits("evil.tollgate.example.com", local, &names));
        // Without the connection's address (a router served without it), names only.
        assert!(!admits("127.0.0.1:8080", None, &[]));
        assert!(admits("tollgate.example.com", None, &names));
        assert!(
            admits("ui.example", None, &allowed(&["ui.example:443"])),
            "default port"
        );
    }

    #[test]
    fn a_flag_is_a_name_with_an_optional_port_and_nothing_else() {
        for good in ["tollgate.example.com", "ui:8080", "[::1]:8080", "10.0.0.1"] {
            assert!(good.parse::<AllowedHost>().is_ok(), "{good}");
        }
        for bad in [
            "",
            "http://tollgate.example.com",
            "tollgate.example.com/ui",
            "ui:",
            "ui:http",
            "ui:99999",
            "::1",
            "[::1]x",
            "[not-v6]",
            "a[b",
            "*.example.com",
            "user@host",
        ] {
            assert!(bad.parse::<AllowedHost>().is_err(), "{bad}");
        }
        assert_eq!(
            "UI.Example:8080"
                .parse::<AllowedHost>()
                .map(|a| a.to_string()),
            Ok("ui.example:8080".to_string())
        );
    }
}
