//! The text exposition as a list of fixed-size chunks, for `/metrics` to stream.
//!
//! At 10,000 promotions a scrape is about 28 MB of text. Encoded into one `String`, the text
//! grows by doubling: its last reallocation holds the old half and the new whole at once (about
//! 1.5 times the text), and the freed halves stay resident a while; the scale harness measured a
//! scrape as the controller's peak (74 MiB over its steady state). Chunks are allocated at
//! their final size and never copied, and the response sends and frees them one by one.
//! Encoding finishes before the first chunk is sent, so a slow scraper never holds a metric's
//! lock (the controller would wait on it to add a series).

use axum::body::Bytes;

/// Bytes per chunk: large enough that a scrape is a few hundred chunks, small against the text.
const CHUNK: usize = 256 * 1024;

/// A finished exposition.
#[derive(Debug, Default)]
pub struct Exposition {
    chunks: Vec<Bytes>,
    current: String,
}

impl Exposition {
    /// The chunks, in order (the text is their concatenation).
    pub fn into_chunks(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.chunks
                .push(Bytes::from(std::mem::take(&mut self.current)));
        }
        self.chunks
    }

    /// The whole text in one `String` (tests and tools; `/metrics` streams the chunks).
    pub fn into_string(self) -> String {
        let chunks = self.into_chunks();
        let mut text = String::with_capacity(chunks.iter().map(Bytes::len).sum());
        for chunk in &chunks {
            // Every chunk is a run of whole `&str` writes.
            text.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        }
        text
    }
}

impl std::fmt::Write for Exposition {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        if !self.current.is_empty() && self.current.len() + text.len() > CHUNK {
            let full = std::mem::replace(&mut self.current, String::with_capacity(CHUNK));
            self.chunks.push(Bytes::from(full));
        } else if self.current.capacity() == 0 {
            self.current.reserve(CHUNK.max(text.len()));
        }
        self.current.push_str(text);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    #[test]
    fn the_chunks_concatenate_to_the_text_and_none_outgrows_its_allocation() {
        let mut exposition = Exposition::default();
        let line = "tollgate_promotion_phase{promotion=\"p1\",phase=\"Progressing\"} 0\n";
        let mut expected = String::new();
        for _ in 0..20_000 {
            exposition.write_str(line).unwrap();
            expected.push_str(line);
        }
        let chunks = exposition.into_chunks();
        assert!(chunks.len() > 1, "{} bytes in one chunk", expected.len());
        assert!(
            chunks.iter().all(|c| c.len() <= CHUNK),
            "a chunk over {CHUNK}"
        );
        assert_eq!(chunks.concat(), expected.as_bytes());
    }

    #[test]
    fn a_write_larger_than_a_chunk_is_kept_whole() {
        let mut exposition = Exposition::default();
        let big = "x".repeat(CHUNK + 10);
        exposition.write_str("a").unwrap();
        exposition.write_str(&big).unwrap();
        exposition.write_str("b").unwrap();
        assert_eq!(exposition.into_string(), format!("a{big}b"));
    }
}
