//! A run's OpenTelemetry identity, derived rather than drawn: a run lasts minutes to days and
//! outlives controller restarts, so its trace id and its spans' ids must come out the same from
//! every process that looks at it. The trace id hashes what identifies a run (promotion, snapshot
//! index, start instant); a span id hashes the trace id with what identifies the span in the run.
//! SHA-256, truncated to the 16 and 8 bytes W3C trace context allows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// A run's trace id: 16 bytes, written as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span id within a run's trace: 8 bytes, written as 16 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// The trace of the run of snapshot `snapshot` of `promotion` that started at `started_at`.
    pub fn of_run(promotion: &str, snapshot: u64, started_at: DateTime<Utc>) -> Self {
        let digest = digest(&[
            b"tollgate.run",
            promotion.as_bytes(),
            &snapshot.to_be_bytes(),
            &instant(started_at),
        ]);
        let mut id = [0; 16];
        id.copy_from_slice(&digest[..16]);
        // All zeros is the invalid trace id: never emitted (one chance in 2^128, but cheap).
        if id == [0; 16] {
            id[15] = 1;
        }
        Self(id)
    }

    /// The run's root span.
    pub fn run_span(&self) -> SpanId {
        self.span(&[b"run"])
    }

    /// The span of stage `stage`, entered (its profile applied) at `applied_at`.
    pub fn stage_span(&self, stage: &str, applied_at: DateTime<Utc>) -> SpanId {
        self.span(&[b"stage", stage.as_bytes(), &instant(applied_at)])
    }

    /// The span of wave `wave` (1-based) of stage `stage` entered at `applied_at`.
    pub fn wave_span(&self, stage: &str, applied_at: DateTime<Utc>, wave: u32) -> SpanId {
        self.span(&[
            b"wave",
            stage.as_bytes(),
            &instant(applied_at),
            &wave.to_be_bytes(),
        ])
    }

    /// The span of a failure rollback's restore of stage `stage` entered at `applied_at`.
    pub fn restore_span(&self, stage: &str, applied_at: DateTime<Utc>) -> SpanId {
        self.span(&[b"restore", stage.as_bytes(), &instant(applied_at)])
    }

    fn span(&self, parts: &[&[u8]]) -> SpanId {
        let mut all: Vec<&[u8]> = vec![&self.0];
        all.extend_from_slice(parts);
        let digest = digest(&all);
        let mut id = [0; 8];
        id.copy_from_slice(&digest[..8]);
        if id == [0; 8] {
            id[7] = 1;
        }
        SpanId(id)
    }
}

/// SHA-256 of length-prefixed parts (so that no two lists of parts hash alike by concatenation).
fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// An instant as nanoseconds since the epoch (its serialized form loses nothing finer).
fn instant(at: DateTime<Utc>) -> [u8; 16] {
    let nanos =
        i128::from(at.timestamp()) * 1_000_000_000 + i128::from(at.timestamp_subsec_nanos());
    nanos.to_be_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.is_ascii() {
        return None;
    }
    let mut out = [0; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl std::fmt::Display for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl std::fmt::Display for SpanId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl Serialize for TraceId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TraceId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        unhex(&text).map(Self).ok_or_else(|| {
            serde::de::Error::custom(format!("a trace id is 32 hex digits, not {text:?}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().expect("valid instant")
    }

    #[test]
    fn a_different_promotion_snapshot_or_start_is_a_different_trace() {
        let base = TraceId::of_run("web", 3, at(100));
        assert_ne!(base, TraceId::of_run("api", 3, at(100)));
        assert_ne!(base, TraceId::of_run("web", 4, at(100)));
        assert_ne!(base, TraceId::of_run("web", 3, at(101)));
        assert_eq!(base, TraceId::of_run("web", 3, at(100)));
    }

    #[test]
    fn spans_differ_by_stage_entry_and_wave() {
        let trace = TraceId::of_run("web", 1, at(0));
        let stage = trace.stage_span("dev", at(5));
        assert_ne!(stage, trace.stage_span("prod", at(5)));
        assert_ne!(stage, trace.stage_span("dev", at(6)));
        assert_ne!(stage, trace.run_span());
        assert_ne!(
            trace.wave_span("dev", at(5), 1),
            trace.wave_span("dev", at(5), 2)
        );
    }

    #[test]
    fn a_trace_id_reads_back_what_it_writes_and_refuses_anything_else() {
        let trace = TraceId::of_run("web", 1, at(0));
        let json = serde_json::to_string(&trace).expect("serializes");
        assert_eq!(json.len(), 34);
        assert_eq!(
            serde_json::from_str::<TraceId>(&json).expect("reads"),
            trace
        );
        assert!(serde_json::from_str::<TraceId>("\"abc\"").is_err());
        assert!(serde_json::from_str::<TraceId>(&format!("\"{}\"", "g".repeat(32))).is_err());
    }
}
