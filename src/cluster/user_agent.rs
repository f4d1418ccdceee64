//! The `User-Agent` every request to the management cluster carries: `tollgate/<version>
//! (<replica>)`. The API server writes it to its audit log, and names the field manager of a
//! write that names none (status and Lease updates) after it, up to the first `/`: `tollgate`,
//! the manager server-side apply names too. Without it those writes were `unknown`'s, and
//! nothing told which replica made a write.

use hyper::header::{HeaderValue, USER_AGENT};
use kube::Config;

/// `tollgate/0.1.0 (replica)`; characters a header cannot carry become `?`.
pub fn user_agent(replica: &str) -> HeaderValue {
    let replica: String = replica
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect();
    let text = format!("tollgate/{} ({replica})", env!("CARGO_PKG_VERSION"));
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("tollgate"))
}

/// Makes every request of clients built from `config` carry [`user_agent`] of `replica`,
/// replacing the one it carried.
pub fn identify(config: &mut Config, replica: &str) {
    config.headers.retain(|(name, _)| *name != USER_AGENT);
    config.headers.push((USER_AGENT, user_agent(replica)));
}

/// [`identify`] with [`this_host`], unless `config` already names its replica.
pub fn identify_if_anonymous(config: &mut Config) {
    if !config.headers.iter().any(|(name, _)| *name == USER_AGENT) {
        identify(config, &this_host());
    }
}

/// This process's replica name: the pod's (`POD_NAME`, set by the Deployment), else the host's.
pub fn this_host() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|host| host.trim().to_string())
                .filter(|host| !host.is_empty())
        })
        .unwrap_or_else(|| "unknown-host".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_agent_names_the_version_and_the_replica() {
        let value = user_agent("tollgate-7d9f-x2");
        assert_eq!(
            value.to_str().unwrap(),
            format!("tollgate/{} (tollgate-7d9f-x2)", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(
            user_agent("h\u{e9}te\n").to_str().unwrap(),
            format!("tollgate/{} (h?te?)", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn identifying_replaces_the_user_agent_and_anonymous_configs_get_the_hosts() {
        let mut config = Config::new("http://127.0.0.1:1".parse().unwrap());
        identify_if_anonymous(&mut config);
        identify(&mut config, "replica-b");
        identify_if_anonymous(&mut config);
        let agents: Vec<&HeaderValue> = config
            .headers
            .iter()
            .filter(|(name, _)| *name == USER_AGENT)
            .map(|(_, value)| value)
            .collect();
        assert_eq!(agents, [&user_agent("replica-b")]);
    }
}
