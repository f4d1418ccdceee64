//! The text exposition as a list of chunks, plain or gzipped, for `/metrics` to stream.
//!
//! At 10,000 promotions a scrape is about 28 MB of text. Encoded into one `String`, the text
//! grew by doubling: its last reallocation held the old half and the new whole at once, and the
//! scale harness measured a scrape as the controller's peak (74 MiB over its steady state).
//! Chunks are allocated at their final size and never copied, and the response sends and frees
//! them one by one; gzipped (what Prometheus asks for), the text is never resident at all, only
//! its compressed form, about a tenth of it. Encoding finishes before the first chunk is sent,
//! so a slow scraper never holds a metric's lock (the controller would wait on it to add a
//! series).

use std::io::Write as _;

use axum::body::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;

/// Bytes per chunk: large enough that a scrape is a few hundred chunks, small against the text.
const CHUNK: usize = 256 * 1024;

/// Bytes written in fixed-size chunks.
#[derive(Debug, Default)]
struct Chunks {
    done: Vec<Bytes>,
    current: Vec<u8>,
}

impl Chunks {
    fn push(&mut self, bytes: &[u8]) {
        if !self.current.is_empty() && self.current.len() + bytes.len() > CHUNK {
            let full = std::mem::replace(&mut self.current, Vec::with_capacity(CHUNK));
            self.done.push(Bytes::from(full));
        } else if self.current.capacity() == 0 {
            self.current.reserve(CHUNK.max(bytes.len()));
        }
        self.current.extend_from_slice(bytes);
    }

    fn finish(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.done
                .push(Bytes::from(std::mem::take(&mut self.current)));
        }
        self.done
    }
}

impl std::io::Write for Chunks {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.push(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An exposition being written: the text's chunks, or its gzip stream's.
#[derive(Debug)]
pub struct Exposition(Sink);

#[derive(Debug)]
enum Sink {
    Plain(Chunks),
    // Boxed: one per scrape, and the encoder's state is several times the plain variant.
    Gzip(Box<GzEncoder<Chunks>>),
}

impl Exposition {
    pub fn plain() -> Exposition {
        Exposition(Sink::Plain(Chunks::default()))
    }

    /// Compressed as it is written, at gzip's fastest level: about 0.2 s of CPU per scrape at
    /// 10,000 promotions, where every other level costs more for little less.
    pub fn gzip() -> Exposition {
        Exposition(Sink::Gzip(Box::new(GzEncoder::new(
            Chunks::default(),
            Compression::fast(),
        ))))
    }

    /// The chunks, in order (the body is their concatenation).
    pub fn into_chunks(self) -> Vec<Bytes> {
        match self.0 {
            Sink::Plain(chunks) => chunks.finish(),
            // Writing into memory cannot fail.
            Sink::Gzip(encoder) => encoder.finish().map(Chunks::finish).unwrap_or_default(),
        }
    }

    /// The whole text in one `String` (tests and tools; `/metrics` streams the chunks).
    pub fn into_string(self) -> String {
        let chunks = self.into_chunks();
        String::from_utf8(chunks.concat()).unwrap_or_default()
    }
}

impl std::fmt::Write for Exposition {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        match &mut self.0 {
            Sink::Plain(chunks) => chunks.push(text.as_bytes()),
            Sink::Gzip(encoder) => encoder
                .write_all(text.as_bytes())
                .map_err(|_| std::fmt::Error)?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;
    use std::io::Read;

    const LINE: &str = "tollgate_promotion_phase{promotion=\"p1\",phase=\"Progressing\"} 0\n";

    fn written(mut exposition: Exposition, lines: usize) -> Vec<Bytes> {
        for _ in 0..lines {
            exposition.write_str(LINE).unwrap();
        }
        exposition.into_chunks()
    }

    #[test]
    fn the_chunks_concatenate_to_the_text_and_none_outgrows_its_allocation() {
        let chunks = written(Exposition::plain(), 20_000);
        assert!(chunks.len() > 1, "one chunk");
        assert!(
            chunks.iter().all(|c| c.len() <= CHUNK),
            "a chunk over {CHUNK}"
        );
        assert_eq!(chunks.concat(), LINE.repeat(20_000).as_bytes());
    }

    #[test]
    fn the_gzipped_chunks_decompress_to_the_same_text_in_a_tenth_of_its_size() {
        let chunks = written(Exposition::gzip(), 20_000);
        let compressed = chunks.concat();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, LINE.repeat(20_000));
        assert!(
            compressed.len() * 10 < text.len(),
            "{} bytes",
            compressed.len()
        );
    }

    #[test]
    fn a_write_larger_than_a_chunk_is_kept_whole() {
        let mut exposition = Exposition::plain();
        let big = "x".repeat(CHUNK + 10);
        exposition.write_str("a").unwrap();
        exposition.write_str(&big).unwrap();
        exposition.write_str("b").unwrap();
        assert_eq!(exposition.into_string(), format!("a{big}b"));
    }
}
