//! A kubeconfig pointing at the emulator, for kubectl, `tollgate status` and kube clients.

/// Name used for the cluster, user and context entries.
pub const CONTEXT_NAME: &str = "tollgate-emulator";

/// Kubeconfig YAML for a plain-HTTP server at `url`. No credentials: the emulator has no auth.
pub fn render(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT_NAME}\n  cluster:\n    server: {url}\n\
         contexts:\n- name: {CONTEXT_NAME}\n  context:\n    cluster: {CONTEXT_NAME}\n    user: {CONTEXT_NAME}\n    namespace: default\n\
         current-context: {CONTEXT_NAME}\nusers:\n- name: {CONTEXT_NAME}\n  user: {{}}\npreferences: {{}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_is_yaml_with_the_server() {
        let text = render("http://127.0.0.1:1234");
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            parsed["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
        assert_eq!(parsed["current-context"], CONTEXT_NAME);
    }
}
