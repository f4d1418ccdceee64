//! A leaf for talking out, used by several front ends (notify, analysis, the web view's git
//! hosts, the webhook server): the HTTPS client, endpoint secret files and HMAC signatures. It
//! imports none of the binary's other modules.

pub mod endpoint_secret;
pub mod https;
pub mod signature;
