//! The journal on disk: JSON lines in segment files `route-journal-<first seq>.jsonl`, appended
//! by one writer thread, bounded by total size and age, and indexed in memory by the hashes of
//! the topics and brokers each segment mentions.
//!
//! A segment is only ever appended by the process that created it: each start opens a new one,
//! so a line torn by a crash is never continued by the next write, and readers skip it. Files
//! are created exclusively (never through a planted link), read without following links, and
//! only names of our own pattern are read or deleted.

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::entry::{Entry, Move, QueuesNote};

const PREFIX: &str = "route-journal-";
const SUFFIX: &str = ".jsonl";

/// Topics written on one line at most: a broker's first registration of 100k topics becomes
/// lines a reader can take one at a time.
pub const LINE_MOVES: usize = 4096;

/// Topics that moved alike on one line: the same group, the same queues before and after. A
/// broker's first registration of 10k topics with the same queues is then its topics' names,
/// not 10k copies of the same queues. Written borrowing the names, read owning them.
#[derive(Serialize, Deserialize)]
struct Moved<'a> {
    broker: Cow<'a, str>,
    was: Option<QueuesNote>,
    now: Option<QueuesNote>,
    topics: Vec<Cow<'a, str>>,
}

/// A line on disk: an entry with its topics grouped by how they moved.
#[derive(Serialize, Deserialize)]
struct Line<'a> {
    #[serde(flatten)]
    head: Entry,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    moved: Vec<Moved<'a>>,
}

fn grouped(moves: &[Move]) -> Vec<Moved<'_>> {
    let mut groups: Vec<Moved<'_>> = Vec::new();
    let mut at: foldhash::HashMap<(&str, Option<QueuesNote>, Option<QueuesNote>), usize> =
        Default::default();
    for m in moves {
        let i = *at.entry((&m.broker, m.was, m.now)).or_insert_with(|| {
            groups.push(Moved {
                broker: m.broker.as_str().into(),
                was: m.was,
                now: m.now,
                topics: Vec::new(),
            });
            groups.len() - 1
        });
        groups[i].topics.push(m.topic.as_str().into());
    }
    groups
}

/// The entry a line holds; `None` for a line that does not read (torn, foreign).
pub fn read_line(line: &[u8]) -> Option<Entry> {
    // A line without its newline is the tail a crash tore.
    if line.last() != Some(&b'\n') {
        return None;
    }
    let Line { mut head, moved } = serde_json::from_slice(line).ok()?;
    for group in moved {
        head.topics
            .extend(group.topics.into_iter().map(|topic| Move {
                topic: topic.into_owned(),
                broker: group.broker.to_string(),
                was: group.was,
                now: group.now,
            }));
    }
    Some(head)
}

/// The hash a segment's index keeps for a topic or a broker name.
pub fn topic_key(topic: &str) -> u64 {
    key_of(b't', topic)
}

pub fn broker_key(name: &str) -> u64 {
    key_of(b'b', name)
}

fn key_of(kind: u8, name: &str) -> u64 {
    // Kept in memory only (rebuilt from the lines at start), so the function may change.
    xxh3_64_with_seed(name.as_bytes(), u64::from(kind))
}

/// One segment file, as the index knows it.
#[derive(Default)]
pub struct Segment {
    pub path: PathBuf,
    pub bytes: u64,
    pub lines: u64,
    pub first_at: Option<i64>,
    pub last_at: Option<i64>,
    /// Hashes of the topics and brokers its lines mention.
    pub keys: foldhash::HashSet<u64>,
}

impl Segment {
    fn new(path: PathBuf) -> Self {
        Segment {
            path,
            ..Default::default()
        }
    }

    fn note(&mut self, entry: &Entry, moves: &[Move], line_bytes: u64) {
        self.bytes += line_bytes;
        self.lines += 1;
        self.first_at.get_or_insert(entry.at);
        self.last_at = Some(self.last_at.map_or(entry.at, |t| t.max(entry.at)));
        if let Some(b) = &entry.broker {
            self.keys.insert(broker_key(b));
        }
        let mut last_broker: Option<&str> = None;
        for m in moves {
            self.keys.insert(topic_key(&m.topic));
            // A change's moves are mostly one group's.
            if last_broker != Some(m.broker.as_str()) {
                self.keys.insert(broker_key(&m.broker));
                last_broker = Some(&m.broker);
            }
        }
    }
}

/// The segments, oldest first; the last is the one being written.
#[derive(Default)]
pub struct Shelf {
    pub segments: Vec<Segment>,
    /// Lines found unreadable (a torn tail, a foreign line) when the segments were opened.
    pub skipped: u64,
    /// The highest sequence number found on disk.
    pub last_seq: u64,
}

impl Shelf {
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    pub fn lines(&self) -> u64 {
        self.segments.iter().map(|s| s.lines).sum()
    }

    pub fn since(&self) -> Option<i64> {
        self.segments.iter().find_map(|s| s.first_at)
    }
}

/// The sequence number in a segment's file name, if it is one of ours.
fn seq_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn name_for(seq: u64) -> String {
    format!("{PREFIX}{seq:020}{SUFFIX}")
}

/// Reads a file without following a link planted under its name, up to `cap` bytes.
pub fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path)?;
    let mut out = Vec::new();
    file.take(cap).read_to_end(&mut out)?;
    Ok(out)
}

/// The entries of a segment's bytes, with the number of lines that could not be read.
pub fn parse_lines(bytes: &[u8]) -> impl Iterator<Item = Result<(Entry, u64), ()>> + '_ {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(|line| read_line(line).map(|e| (e, line.len() as u64)).ok_or(()))
}

/// Opens the segments in `dir` (created if missing), indexing each.
pub fn open_shelf(dir: &Path, cap: u64) -> std::io::Result<Shelf> {
    fs::create_dir_all(dir)?;
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for item in fs::read_dir(dir)? {
        let item = item?;
        let Some(seq) = item.file_name().to_str().and_then(seq_of) else {
            continue;
        };
        // A link or a directory under our name is not ours to read.
        if !item.file_type()?.is_file() {
            continue;
        }
        found.push((seq, item.path()));
    }
    found.sort();
    let mut shelf = Shelf::default();
    for (seq, path) in found {
        let mut segment = Segment::new(path);
        match read_capped(&segment.path, cap) {
            Ok(bytes) => {
                for line in parse_lines(&bytes) {
                    match line {
                        Ok((entry, len)) => {
                            shelf.last_seq = shelf.last_seq.max(entry.seq);
                            segment.note(&entry, &entry.topics, len);
                        }
                        Err(()) => shelf.skipped += 1,
                    }
                }
                // Bytes that are not lines still take room on disk.
                segment.bytes = bytes.len() as u64;
            }
            Err(e) => {
                tracing::warn!(path = %segment.path.display(), "route journal segment unreadable: {e}");
                continue;
            }
        }
        shelf.last_seq = shelf.last_seq.max(seq);
        shelf.segments.push(segment);
    }
    Ok(shelf)
}

/// The file a new segment is written to, created exclusively.
pub fn create_segment(dir: &Path, first_seq: u64) -> std::io::Result<(PathBuf, File)> {
    let path = dir.join(name_for(first_seq));
    let mut options = OpenOptions::new();
    options.append(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o640);
    }
    let file = options.open(&path)?;
    Ok((path, file))
}

/// Bytes of lines gathered before they are handed to the file. Without a bound, the ten first
/// registrations of a restarted cluster, written in one go, left megabytes of buffer behind.
const WRITE_BUFFER: usize = 64 * 1024;

/// The current segment and what it was given since the last flush.
#[derive(Default)]
pub struct Writer {
    dir: PathBuf,
    file: Option<File>,
    buf: Vec<u8>,
    segment_bytes: u64,
    pub dirty: bool,
}

impl Writer {
    pub fn new(dir: PathBuf, segment_bytes: u64) -> Self {
        Writer {
            dir,
            segment_bytes,
            ..Default::default()
        }
    }

    /// Writes `entry` as lines, rolling to a new segment when the current one is full.
    pub fn write(&mut self, shelf: &mut Shelf, mut entry: Entry) -> std::io::Result<()> {
        // Taken out once: the lines' heads are copies of what is left, which carries no topics.
        let topics = std::mem::take(&mut entry.topics);
        let total = topics.len() + entry.more_topics;
        let chunks: Vec<&[Move]> = if topics.is_empty() {
            vec![&[]]
        } else {
            topics.chunks(LINE_MOVES).collect()
        };
        for chunk in chunks {
            if self.file.is_none()
                || shelf
                    .segments
                    .last()
                    .is_none_or(|s| s.bytes >= self.segment_bytes)
            {
                self.roll(shelf, entry.seq)?;
            }
            let line = Line {
                head: Entry {
                    more_topics: total - chunk.len(),
                    ..entry.clone()
                },
                moved: grouped(chunk),
            };
            let start = self.buf.len();
            serde_json::to_writer(&mut self.buf, &line).map_err(std::io::Error::other)?;
            self.buf.push(b'\n');
            let len = (self.buf.len() - start) as u64;
            if let Some(segment) = shelf.segments.last_mut() {
                segment.note(&line.head, chunk, len);
            }
            if self.buf.len() >= WRITE_BUFFER {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Starts a new segment whose first entry is `seq`.
    fn roll(&mut self, shelf: &mut Shelf, seq: u64) -> std::io::Result<()> {
        self.flush()?;
        // The directory may have been removed under a running server.
        fs::create_dir_all(&self.dir)?;
        let (path, file) = match create_segment(&self.dir, seq) {
            Ok(made) => made,
            // A file of that name already (a segment of an earlier run that ended before its
            // first write reached the disk, or a planted one): a later name.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                create_segment(&self.dir, seq.max(shelf.last_seq) + 1_000_000)?
            }
            Err(e) => return Err(e),
        };
        if let Some(old) = self.file.take() {
            let _ = old.sync_data();
        }
        self.file = Some(file);
        shelf.segments.push(Segment::new(path));
        Ok(())
    }

    /// Hands what was written to the system: it survives the process being killed.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let Some(file) = self.file.as_mut() else {
            self.buf.clear();
            return Ok(());
        };
        let result = file.write_all(&self.buf);
        self.buf.clear();
        // One line of thousands of long names may have made it large.
        self.buf.shrink_to(WRITE_BUFFER);
        self.dirty = true;
        result
    }

    /// Makes what was written survive the machine stopping.
    pub fn sync(&mut self) {
        if self.dirty {
            if let Some(file) = &self.file {
                let _ = file.sync_data();
            }
            self.dirty = false;
        }
    }
}

/// Deletes the oldest segments while the journal is over `max_bytes` or a segment's newest
/// line is older than `max_age_ms`; never the last, the one being written.
pub fn trim(shelf: &mut Shelf, max_bytes: u64, max_age_ms: i64, now_ms: i64) {
    while shelf.segments.len() > 1 {
        let oldest = &shelf.segments[0];
        let too_big = shelf.bytes() > max_bytes;
        let too_old = oldest.last_at.is_none_or(|t| now_ms - t > max_age_ms);
        if !(too_big || too_old) {
            break;
        }
        if let Err(e) = fs::remove_file(&oldest.path) {
            if e.kind() != ErrorKind::NotFound {
                tracing::warn!(path = %oldest.path.display(), "cannot delete an old route journal segment: {e}");
            }
        }
        shelf.segments.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::entry::{Cause, Move};

    fn entry(seq: u64, topics: usize) -> Entry {
        let mut e = Entry::new(Cause::Registered).group("b");
        e.seq = seq;
        e.topics = (0..topics)
            .map(|i| Move {
                topic: format!("T{i}"),
                broker: "b".into(),
                was: None,
                now: Some([8, 8, 6]),
            })
            .collect();
        e
    }

    #[test]
    fn many_large_changes_written_in_one_go_reach_the_file_without_a_buffer_of_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut shelf = Shelf::default();
        let mut w = Writer::new(dir.path().into(), 1 << 30);
        for seq in 1..=10 {
            w.write(&mut shelf, entry(seq, LINE_MOVES)).unwrap();
        }
        assert!(w.buf.capacity() <= 2 * WRITE_BUFFER, "{}", w.buf.capacity());
        w.flush().unwrap();
        assert!(w.buf.capacity() <= WRITE_BUFFER);
        let bytes = fs::read(&shelf.segments[0].path).unwrap();
        assert_eq!(parse_lines(&bytes).count(), 10);
        assert_eq!(shelf.segments[0].bytes, bytes.len() as u64);
    }

    #[test]
    fn a_large_change_is_split_into_lines_that_each_know_the_whole_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut shelf = Shelf::default();
        let mut w = Writer::new(dir.path().into(), 1 << 30);
        w.write(&mut shelf, entry(1, LINE_MOVES * 2 + 5)).unwrap();
        w.flush().unwrap();
        let bytes = fs::read(&shelf.segments[0].path).unwrap();
        let lines: Vec<Entry> = parse_lines(&bytes).map(|l| l.unwrap().0).collect();
        assert_eq!(lines.len(), 3);
        assert!(lines
            .iter()
            .all(|l| l.topics.len() + l.more_topics == LINE_MOVES * 2 + 5));
        let last = LINE_MOVES * 2 + 4;
        assert!(shelf.segments[0]
            .keys
            .contains(&topic_key(&format!("T{last}"))));
        assert!(!shelf.segments[0]
            .keys
            .contains(&topic_key(&format!("T{}", last + 1))));
        // Topics that moved alike are one group on disk: their queues are written once a line.
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.matches("[8,8,6]").count(), 3, "one group per line");
    }

    #[test]
    fn a_torn_tail_and_foreign_files_are_skipped_when_the_shelf_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let mut shelf = Shelf::default();
        let mut w = Writer::new(dir.path().into(), 1 << 30);
        w.write(&mut shelf, entry(7, 1)).unwrap();
        w.flush().unwrap();
        let path = shelf.segments[0].path.clone();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"seq\":8,\"at\":1,\"cau").unwrap();
        fs::write(dir.path().join("notes.txt"), "not ours").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join(name_for(99))).unwrap();
        let opened = open_shelf(dir.path(), 1 << 30).unwrap();
        assert_eq!(opened.segments.len(), 1);
        assert_eq!(opened.segments[0].lines, 1);
        assert_eq!(opened.skipped, 1);
        assert_eq!(opened.last_seq, 7);
    }

    proptest::proptest! {
        /// A crash may cut the last segment anywhere: what is read back is exactly the whole
        /// lines before the cut, and at most the one torn line is skipped.
        #[test]
        fn a_segment_cut_anywhere_reads_back_as_its_whole_lines(
            sizes in proptest::collection::vec(0usize..40, 1..30),
            cut_at in 0.0f64..1.0,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut shelf = Shelf::default();
            let mut w = Writer::new(dir.path().into(), 1 << 30);
            for (seq, topics) in sizes.iter().enumerate() {
                w.write(&mut shelf, entry(seq as u64 + 1, *topics)).unwrap();
            }
            w.flush().unwrap();
            let path = shelf.segments[0].path.clone();
            let bytes = fs::read(&path).unwrap();
            let cut = (bytes.len() as f64 * cut_at) as usize;
            fs::write(&path, &bytes[..cut]).unwrap();
            let whole = bytes[..cut].iter().filter(|b| **b == b'\n').count() as u64;
            let torn = u64::from(cut > 0 && bytes[cut - 1] != b'\n');
            let opened = open_shelf(dir.path(), 1 << 30).unwrap();
            proptest::prop_assert_eq!(opened.segments[0].lines, whole);
            proptest::prop_assert_eq!(opened.skipped, torn);
            proptest::prop_assert_eq!(opened.segments[0].bytes, cut as u64);
        }
    }

    #[test]
    fn old_and_excess_segments_are_deleted_but_never_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut shelf = Shelf::default();
        let mut w = Writer::new(dir.path().into(), 2_000);
        for seq in 1..=200 {
            w.write(&mut shelf, entry(seq, 3)).unwrap();
            w.flush().unwrap();
            trim(&mut shelf, 10_000, i64::MAX, 0);
        }
        assert!(shelf.bytes() <= 10_000 + 2_000, "{}", shelf.bytes());
        let on_disk = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(on_disk, shelf.segments.len());
        let now = shelf.segments.last().unwrap().last_at.unwrap() + 10;
        trim(&mut shelf, u64::MAX, 5, now);
        assert_eq!(shelf.segments.len(), 1, "only the current one is left");
    }
}
