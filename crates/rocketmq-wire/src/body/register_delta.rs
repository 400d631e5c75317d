//! A JSON register body read as the difference from the same broker's previous one.
//!
//! A broker re-sends its whole topic table whenever any of it changes: for a few thousand
//! topics that is a megabyte of JSON, and decoding all of it for one changed queue count costs
//! milliseconds of a core while routes are being served. A table read here leaves behind a
//! [`TableIndex`]: its entries grouped in runs (blocks), each kept as a length and a hash of its
//! bytes. The next body is walked entry by entry; where the bytes at the current place hash
//! like the next expected run, the run is stepped over undecoded, and only entries found nowhere
//! in the previous body are decoded. The caller applies the decoded entries only: those stepped
//! over are byte-identical to entries it applied last time.
//!
//! Everything outside the table (filter servers, data version, mapping infos) is small and
//! read in full by the typed reader, as are bodies in any shape this does not expect, which
//! the caller then reads the ordinary way.

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use serde::de::IgnoredAny;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::register_strict::{self, Config};
use super::{RegisterBrokerBody, TopicConfig};
use crate::error::BodyError;

/// Entries per block of a table read in full; fewer entries are decoded again around a change
/// with smaller blocks, at more index memory per entry.
const BLOCK: usize = 16;
/// Blocks tried at each entry while the body differs from the previous one: a changed, added
/// or removed entry shifts the rest of the body, found again within these.
const LOOKAHEAD: usize = 4;
/// Bytes at the head of a block checked first, so that a block tried at the wrong place costs
/// a few nanoseconds rather than a hash of the whole block.
const HEAD: usize = 32;

/// Hashes are seeded per process, so that a peer cannot choose bytes that collide with another
/// broker's entries.
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| RandomState::new().hash_one(0u64))
}

fn hash(bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, seed())
}

fn name_hash(name: &str) -> u32 {
    hash(name.as_bytes()) as u32
}

#[derive(Clone, Copy, Debug)]
struct Block {
    len: u32,
    /// Listed topic configs in the block (entries whose value is not `null`).
    listed: u32,
    /// Of those, the ones with a topic name, whose name hashes are in [`TableIndex::names`].
    named: u32,
    head: u32,
    hash: u64,
}

/// What one broker's last topic table looked like: enough to recognise its unchanged runs of
/// entries in the next body, at about two bytes per topic.
#[derive(Debug, Default)]
pub struct TableIndex {
    blocks: Vec<Block>,
    /// The name hash of every named entry, in body order.
    names: Vec<u32>,
}

impl TableIndex {
    /// Topic configs the table listed.
    pub fn listed(&self) -> usize {
        self.blocks.iter().map(|b| b.listed as usize).sum()
    }
}

/// A register body read against the broker's previous table.
#[derive(Debug)]
pub struct TableRead {
    /// Everything the body says, except that its topic configs are only those that differ from
    /// the previous table when `partial`.
    pub body: RegisterBrokerBody,
    /// Topic configs the table lists, decoded or not.
    pub listed: usize,
    /// Whether entries equal to the previous table's were left out of `body`.
    pub partial: bool,
    /// The table's index, to read the broker's next body against. `None` when a topic is
    /// listed twice: which of the two applies depends on both, so such a table is always read
    /// whole.
    pub index: Option<TableIndex>,
}

/// One decoded entry's place in the body.
struct Entry {
    start: usize,
    end: usize,
    listed: bool,
    name: Option<u32>,
}

impl TableRead {
    /// Reads the JSON register body `bytes` (protocol 3.0.11 or later, uncompressed) against
    /// the index of the same broker's previous table, or in full without one. `None` when the
    /// body is not in the shape Java brokers write: the caller reads it the ordinary way.
    pub fn read(bytes: &[u8], previous: Option<&TableIndex>) -> Option<Result<Self, BodyError>> {
        // Not validated as UTF-8 as a whole: the entries decoded are, as the rest is; the runs
        // stepped over are byte for byte ones that were.
        let open = find_table(bytes)?;
        let mut walk = Walk {
            bytes,
            previous: previous.map_or(&[][..], |p| &p.blocks[..]),
            previous_names: previous.map_or(&[][..], |p| &p.names[..]),
            ..Default::default()
        };
        let close = walk.entries(open + 1)?;

        // The rest of the body, with an empty table in its place, read by the typed reader.
        let mut rest = Vec::with_capacity(open + 2 + bytes.len() - close);
        rest.extend_from_slice(&bytes[..open]);
        rest.extend_from_slice(b"{}");
        rest.extend_from_slice(&bytes[close..]);
        let mut outside = match register_strict::register_body(&rest)? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        if !outside.wrapper.topic_configs.is_empty() {
            // A second table under an escaped key: only the ordinary reader sees both.
            return None;
        }
        let partial = previous.is_some();
        let listed = walk.listed;
        let index = match walk.finish(partial) {
            Listing::Unique(index) => Some(index),
            Listing::Twice if partial => return None,
            Listing::Twice | Listing::Unindexed => None,
        };
        outside.wrapper.topic_configs = walk.decoded;
        Some(Ok(TableRead {
            body: outside,
            listed,
            partial,
            index,
        }))
    }
}

enum Listing {
    Unique(TableIndex),
    /// Some topic name is listed twice (or, for a partial read, may be).
    Twice,
    Unindexed,
}

#[derive(Default)]
struct Walk<'a> {
    bytes: &'a [u8],
    previous: &'a [Block],
    previous_names: &'a [u32],
    /// The previous table's next block expected, and where its names start.
    next: usize,
    next_name: usize,
    blocks: Vec<Block>,
    names: Vec<u32>,
    /// Names that came from the previous table's blocks.
    carried_names: usize,
    decoded: Vec<TopicConfig>,
    /// The name and its hash of every decoded entry, for the check that no topic is listed twice.
    decoded_names: Vec<u32>,
    /// Entries decoded since the last block stepped over, to become blocks of their own.
    run: Vec<Entry>,
    /// Topic configs listed so far, decoded or stepped over.
    listed: usize,
    /// A block too large to record was met: the table gets no index.
    unindexable: bool,
}

impl Walk<'_> {
    /// Walks the table's entries from `at` (just inside its `{`); returns the position after
    /// its `}`.
    fn entries(&mut self, at: usize) -> Option<usize> {
        let bytes = self.bytes;
        let mut p = skip_ws(bytes, at);
        if bytes.get(p) == Some(&b'}') {
            return Some(p + 1);
        }
        loop {
            if *bytes.get(p)? != b'"' {
                return None;
            }
            match self.known_block(p) {
                Some(j) => p = self.step_over(p, j)?,
                None => p = self.decode_entry(p)?,
            }
            p = skip_ws(bytes, p);
            match bytes.get(p)? {
                b',' => p = skip_ws(bytes, p + 1),
                b'}' => {
                    self.close_run();
                    return Some(p + 1);
                }
                _ => return None,
            }
        }
    }

    /// The previous table's block, among the next few expected, whose bytes are at `p`.
    fn known_block(&self, p: usize) -> Option<usize> {
        let rest = &self.bytes[p..];
        let last = (self.next + LOOKAHEAD).min(self.previous.len());
        (self.next..last).find(|&j| {
            let b = &self.previous[j];
            let len = b.len as usize;
            len <= rest.len()
                && hash(&rest[..len.min(HEAD)]) as u32 == b.head
                && hash(&rest[..len]) == b.hash
        })
    }

    /// Steps over the previous table's block `j` found at `p`, dropping the blocks before it
    /// (entries no longer listed), and returns the position after it.
    fn step_over(&mut self, p: usize, j: usize) -> Option<usize> {
        self.close_run();
        for skipped in &self.previous[self.next..j] {
            self.next_name += skipped.named as usize;
        }
        let block = self.previous[j];
        let names = self
            .previous_names
            .get(self.next_name..self.next_name + block.named as usize)?;
        self.names.extend_from_slice(names);
        self.carried_names += names.len();
        self.listed += block.listed as usize;
        self.blocks.push(block);
        self.next = j + 1;
        self.next_name += block.named as usize;
        Some(p + block.len as usize)
    }

    /// Decodes the entry at `p` as the typed reader does; returns the position after it.
    fn decode_entry(&mut self, p: usize) -> Option<usize> {
        let bytes = self.bytes;
        let mut keys = serde_json::Deserializer::from_slice(&bytes[p..]).into_iter::<IgnoredAny>();
        keys.next()?.ok()?;
        let colon = skip_ws(bytes, p + keys.byte_offset());
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let at = colon + 1;
        let mut values =
            serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<Option<Config>>();
        let config = values.next()?.ok()?.map(Config::into_topic_config);
        let end = at + values.byte_offset();
        let name = config
            .as_ref()
            .and_then(|c| c.topic_name.as_deref())
            .map(name_hash);
        self.run.push(Entry {
            start: p,
            end,
            listed: config.is_some(),
            name,
        });
        if let Some(config) = config {
            self.listed += 1;
            if let Some(h) = name {
                self.decoded_names.push(h);
            }
            self.decoded.push(config);
        }
        Some(end)
    }

    /// Turns the entries decoded since the last known block into blocks of the new index.
    fn close_run(&mut self) {
        let bytes = self.bytes;
        for chunk in self.run.chunks(BLOCK) {
            let (start, end) = (chunk[0].start, chunk[chunk.len() - 1].end);
            let Ok(len) = u32::try_from(end - start) else {
                self.unindexable = true;
                continue;
            };
            let run = &bytes[start..end];
            self.blocks.push(Block {
                len,
                listed: chunk.iter().filter(|e| e.listed).count() as u32,
                named: chunk.iter().filter(|e| e.name.is_some()).count() as u32,
                head: hash(&run[..run.len().min(HEAD)]) as u32,
                hash: hash(run),
            });
            self.names.extend(chunk.iter().filter_map(|e| e.name));
        }
        self.run.clear();
    }

    /// The new index, unless a topic is listed twice. Decoded names are compared exactly;
    /// against names stepped over only their hashes are known, so a match there (rarely a
    /// mere collision) sends a partial read back to be read whole.
    fn finish(&mut self, partial: bool) -> Listing {
        if self.unindexable {
            // Nothing to compare the next body with; this one was decoded whole.
            return Listing::Unindexed;
        }
        let mut seen: HashSet<&str> = HashSet::with_capacity(self.decoded.len());
        let unique = self
            .decoded
            .iter()
            .filter_map(|c| c.topic_name.as_deref())
            .all(|name| seen.insert(name));
        if !unique {
            return Listing::Twice;
        }
        if partial && self.carried_names > 0 && !self.decoded_names.is_empty() {
            let decoded: HashSet<u32> = self.decoded_names.iter().copied().collect();
            let carried = self.names.iter().filter(|h| decoded.contains(h)).count();
            // Every decoded name is in `names` once; any more is a name also stepped over.
            if carried > self.decoded_names.len() {
                return Listing::Twice;
            }
        }
        Listing::Unique(TableIndex {
            blocks: std::mem::take(&mut self.blocks),
            names: std::mem::take(&mut self.names),
        })
    }
}

fn skip_ws(bytes: &[u8], mut p: usize) -> usize {
    while matches!(bytes.get(p), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        p += 1;
    }
    p
}

/// The position of the `{` that opens `topicConfigSerializeWrapper.topicConfigTable`.
fn find_table(bytes: &[u8]) -> Option<usize> {
    let wrapper = find_member(bytes, skip_ws(bytes, 0), b"topicConfigSerializeWrapper")?;
    find_member(bytes, wrapper, b"topicConfigTable")
}

/// In the object opening at `at`, the position of the object value of the member `key` (read
/// unescaped: an escaped key is not found, and the caller's check of the rest catches it).
fn find_member(bytes: &[u8], at: usize, key: &[u8]) -> Option<usize> {
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut p = skip_ws(bytes, at + 1);
    loop {
        let key_end = string_end(bytes, p)?;
        let name = &bytes[p + 1..key_end - 1];
        p = skip_ws(bytes, key_end);
        if bytes.get(p) != Some(&b':') {
            return None;
        }
        p = skip_ws(bytes, p + 1);
        if name == key {
            return (bytes.get(p) == Some(&b'{')).then_some(p);
        }
        p = skip_ws(bytes, value_end(bytes, p)?);
        match bytes.get(p)? {
            b',' => p = skip_ws(bytes, p + 1),
            _ => return None,
        }
    }
}

/// The position after the string starting at `p`.
fn string_end(bytes: &[u8], p: usize) -> Option<usize> {
    if bytes.get(p) != Some(&b'"') {
        return None;
    }
    let mut i = p + 1;
    loop {
        match bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The position after the value starting at `p`, found by its brackets and strings only: the
/// typed reader checks the value itself.
fn value_end(bytes: &[u8], p: usize) -> Option<usize> {
    match bytes.get(p)? {
        b'"' => string_end(bytes, p),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = p;
            loop {
                match bytes.get(i)? {
                    b'"' => i = string_end(bytes, i)?,
                    b'{' | b'[' => {
                        depth += 1;
                        i += 1;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        i += 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => i += 1,
                }
            }
        }
        _ => {
            let len = bytes[p..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))?;
            Some(p + len)
        }
    }
}

#[cfg(test)]
#[path = "register_delta_tests.rs"]
mod tests;
