//! The indexer's documents and what the converter must make of them.
//!
//! Each document is a few KiB shaped like an old word-processor file: a
//! binary header, paragraphs of text with capitals and punctuation, binary
//! runs between paragraphs, and a binary trailer. Documents are generated
//! from their index alone (a fixed pseudo-random sequence), so a corpus is
//! the same on every machine and every run.
//!
//! [`extract_text`] is the benchmark's own statement of the converter's rules
//! (`csrc/converter.c` states them in C); the checksum of its result is what
//! every converter run is checked against.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Longest output line of the converter, in bytes (a longer word stands alone
/// on its line).
pub const LINE_LIMIT: usize = 72;

/// The converter's rules, computed independently of the converter: words are
/// maximal runs of ASCII letters and digits; words shorter than two bytes are
/// dropped, the others lowercased and joined by single spaces into lines of
/// at most [`LINE_LIMIT`] bytes, each ending with `'\n'`.
pub fn extract_text(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() + 1);
    let mut line = 0usize;
    for word in input
        .split(|byte| !byte.is_ascii_alphanumeric())
        .filter(|word| word.len() >= 2)
    {
        if line > 0 && line + 1 + word.len() > LINE_LIMIT {
            out.push(b'\n');
            line = 0;
        }
        if line > 0 {
            out.push(b' ');
            line += 1;
        }
        out.extend(word.iter().map(u8::to_ascii_lowercase));
        line += word.len();
    }
    if line > 0 {
        out.push(b'\n');
    }
    out
}

/// The 64-bit FNV-1a hash of `bytes`: the checksum of a converter's output.
/// Not cryptographic; it only has to make a wrong, missing or truncated
/// output differ from the expected one.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A small deterministic pseudo-random sequence (SplitMix64).
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    fn between(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }

    fn bytes(&mut self, count: usize, into: &mut Vec<u8>) {
        for _ in 0..count {
            into.push(self.next() as u8);
        }
    }
}

/// Words the generated paragraphs are made of.
const VOCABULARY: [&str; 48] = [
    "process", "memory", "table", "page", "index", "document", "thread", "child", "parent",
    "kernel", "signal", "pipe", "stream", "file", "system", "call", "copy", "write", "read", "map",
    "space", "address", "time", "cost", "fast", "slow", "small", "large", "worker", "queue",
    "text", "word", "line", "byte", "number", "report", "result", "method", "program", "server",
    "a", "an", "of", "to", "in", "is", "and", "the",
];

/// The bytes of document `index`: 2 to 8 KiB, deterministic.
pub fn generate_document(index: u64) -> Vec<u8> {
    let mut sequence = Sequence(index.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x6a09_e667_f3bc_c908);
    let body = sequence.between(1536, 7680);
    let mut doc = Vec::with_capacity(body + 1024);
    // A compound-file signature and a binary header, as .doc files have.
    doc.extend_from_slice(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1");
    sequence.bytes(248, &mut doc);
    let mut paragraph = 0u64;
    while doc.len() < body {
        paragraph += 1;
        let words = sequence.between(12, 90);
        let mut capital = true;
        for w in 0..words {
            let word = if sequence.next().is_multiple_of(16) {
                (sequence.next() % 100_000).to_string()
            } else {
                VOCABULARY[sequence.between(0, VOCABULARY.len() - 1)].to_owned()
            };
            if w > 0 {
                doc.push(b' ');
            }
            let mut bytes = word.into_bytes();
            if capital || sequence.next().is_multiple_of(11) {
                bytes[0] = bytes[0].to_ascii_uppercase();
            }
            doc.extend_from_slice(&bytes);
            capital = false;
            match sequence.next() % 12 {
                0 => {
                    doc.push(b'.');
                    capital = true;
                }
                1 => doc.push(b','),
                2 => doc.extend_from_slice(b";"),
                _ => {}
            }
        }
        doc.extend_from_slice(b".\r\n");
        // Formatting records between paragraphs: binary bytes, some of which
        // happen to be letters, as in real files.
        if paragraph.is_multiple_of(2) {
            let junk = sequence.between(8, 48);
            sequence.bytes(junk, &mut doc);
        }
    }
    sequence.bytes(64, &mut doc);
    doc
}

/// One document of a corpus, with what its conversion must produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Where it is.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Size of its extracted text in bytes.
    pub text_bytes: u64,
    /// [`checksum`] of its extracted text.
    pub text_checksum: u64,
}

impl Document {
    /// The file name, for messages.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    /// Checks a converter's output against the expected text.
    ///
    /// Fails with a message naming the document when the size or the
    /// checksum differs.
    pub fn check(&self, output: &[u8]) -> Result<(), String> {
        let sum = checksum(output);
        if output.len() as u64 == self.text_bytes && sum == self.text_checksum {
            return Ok(());
        }
        Err(format!(
            "{}: the converter wrote {} bytes with checksum {sum:016x}, expected {} bytes with \
             checksum {:016x}",
            self.name(),
            output.len(),
            self.text_bytes,
            self.text_checksum
        ))
    }
}

/// Generated documents on disk, with their expected texts' checksums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corpus {
    /// The documents, in generation order.
    pub documents: Vec<Document>,
}

impl Corpus {
    /// Writes `count` documents (`doc-00000.doc`, ...) into `dir`, which is
    /// created if missing, and computes each one's expected text.
    ///
    /// Fails when the directory or a file cannot be written.
    pub fn generate(dir: &Path, count: usize) -> io::Result<Corpus> {
        fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        let width = count.saturating_sub(1).to_string().len().max(5);
        let mut documents = Vec::with_capacity(count);
        for index in 0..count {
            let bytes = generate_document(index as u64);
            let text = extract_text(&bytes);
            let path = dir.join(format!("doc-{index:0width$}.doc"));
            let mut file = fs::File::create(&path).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
            })?;
            file.write_all(&bytes).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
            })?;
            documents.push(Document {
                path,
                bytes: bytes.len() as u64,
                text_bytes: text.len() as u64,
                text_checksum: checksum(&text),
            });
        }
        Ok(Corpus { documents })
    }

    /// Total size of the documents in bytes.
    pub fn bytes(&self) -> u64 {
        self.documents.iter().map(|d| d.bytes).sum()
    }

    /// Total size of their expected texts in bytes.
    pub fn text_bytes(&self) -> u64 {
        self.documents.iter().map(|d| d.text_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_follows_the_rules() {
        assert_eq!(extract_text(b""), b"");
        assert_eq!(extract_text(b"a b c"), b"");
        assert_eq!(extract_text(b"Hello, World!"), b"hello world\n");
        assert_eq!(extract_text(b"\x00ab\xffCD\n9z"), b"ab cd 9z\n");
        let long = "w".repeat(100);
        let text = format!("xy {long} zz");
        assert_eq!(
            extract_text(text.as_bytes()),
            format!("xy\n{long}\nzz\n").into_bytes()
        );
        // 24 words of 2 letters: 23 fit in 72 bytes (23 * 3 - 1 = 68 < 72,
        // 24 * 3 - 1 = 71 <= 72), so all 24 share one line; a 25th wraps.
        let words = vec!["ab"; 25].join(" ");
        let out = extract_text(words.as_bytes());
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        assert_eq!(lines[0].len(), 71);
        assert_eq!(lines[1], b"ab");
    }

    #[test]
    fn documents_are_deterministic_and_sized() {
        assert_eq!(generate_document(7), generate_document(7));
        assert_ne!(generate_document(7), generate_document(8));
        for index in 0..200 {
            let doc = generate_document(index);
            assert!((1536..=9 * 1024).contains(&doc.len()), "{}", doc.len());
            assert!(!extract_text(&doc).is_empty());
        }
    }

    #[test]
    fn checksums_differ_for_different_texts() {
        assert_ne!(checksum(b"ab\n"), checksum(b"ab"));
        assert_ne!(checksum(b""), checksum(b"\0"));
        assert_eq!(checksum(b""), 0xcbf2_9ce4_8422_2325);
    }
}
