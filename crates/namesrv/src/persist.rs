//! Crash-safe file replacement shared by the KV store, the server config and the route
//! snapshot.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Temp files are named `<file>.tmp<pid>-<16 hex digits>`.
const TEMP_INFIX: &str = ".tmp";
/// A planted file can at most make one name fail; a fresh random suffix is tried this often.
const TEMP_ATTEMPTS: usize = 16;

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A suffix another local user cannot guess ahead of time (a guessed name would only make our
/// exclusive create fail, but enough of those would stop every write).
fn random_suffix() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// Creates a temp file beside `path` that did not exist before. `create_new` (O_EXCL) never
/// follows a symlink, so a link planted under the temp name cannot redirect the write.
fn create_temp(path: &Path) -> std::io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..TEMP_ATTEMPTS {
        let tmp = with_suffix(
            path,
            &format!(
                "{TEMP_INFIX}{}-{:016x}",
                std::process::id(),
                random_suffix()
            ),
        );
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| ErrorKind::AlreadyExists.into()))
}

/// Makes `<path>.bak` name the current content without writing through whatever sits at that
/// name: the old entry is unlinked (a symlink itself, never its target) and the current file
/// hard-linked there. The rename that follows leaves that inode alone, so it is the backup.
fn back_up(path: &Path) -> std::io::Result<()> {
    let bak = with_suffix(path, ".bak");
    match fs::remove_file(&bak) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    match fs::hard_link(path, &bak) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(e),
        // Filesystems without hard links: copy, still into a file created exclusively.
        Err(_) => {
            let mut out = OpenOptions::new().write(true).create_new(true).open(&bak)?;
            out.write_all(&fs::read(path)?)?;
            out.sync_all()
        }
    }
}

/// Replaces `path` with `contents` so that a crash at any moment leaves either the old or the
/// new file: write a temp file beside it, fsync, rename over, fsync the directory. The previous
/// content is kept in `<path>.bak` as the Java NameServer does. The replacement keeps the
/// permission bits of the file it replaces, so a config an operator locked down to 0600 stays
/// so; a file created for the first time gets the process umask's default, as any other file
/// the server writes.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = dir_of(path);
    fs::create_dir_all(dir)?;
    let previous = match fs::metadata(path) {
        Ok(m) => Some(m.permissions()),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if previous.is_some() {
        back_up(path)?;
    }
    let (tmp, mut file) = create_temp(path)?;
    let result = (|| {
        if let Some(permissions) = previous {
            file.set_permissions(permissions)?;
        }
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Whether `name` is one of our temp names for a file named `base`: `<base>.tmp<pid>` (older
/// releases) or `<base>.tmp<pid>-<hex>`.
fn is_temp_name(name: &str, base: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(base)
        .and_then(|r| r.strip_prefix(TEMP_INFIX))
    else {
        return false;
    };
    let (pid, random) = match rest.split_once('-') {
        Some((pid, random)) => (pid, Some(random)),
        None => (rest, None),
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && random.is_none_or(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Removes temp files that a killed process left beside `path`; called at start, before the
/// file is first written. Only our own naming pattern is touched, and a symlink is removed as
/// a link, never followed. Returns how many were removed.
pub fn remove_stale_temps(path: &Path) -> usize {
    let Some(base) = path.file_name().and_then(|n| n.to_str()) else {
        return 0;
    };
    let Ok(entries) = fs::read_dir(dir_of(path)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_temp_name(name, base) || entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => {
                removed += 1;
                tracing::info!(file = %entry.path().display(), "removed a stale temp file");
            }
            Err(e) => {
                tracing::warn!(file = %entry.path().display(), "cannot remove a stale temp file: {e}")
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn temps_in(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp"))
            .collect()
    }

    #[test]
    fn replaces_and_keeps_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/kv.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(
            fs::read(dir.path().join("sub/kv.json.bak")).unwrap(),
            b"one"
        );
        write_atomically(&path, b"three").unwrap();
        assert_eq!(
            fs::read(dir.path().join("sub/kv.json.bak")).unwrap(),
            b"two"
        );
        assert!(temps_in(&dir.path().join("sub")).is_empty());
    }

    #[test]
    fn a_symlink_planted_at_the_backup_name_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("kv.json");
        fs::write(&path, b"old").unwrap();
        symlink(&victim, dir.path().join("kv.json.bak")).unwrap();
        write_atomically(&path, b"new").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(&path).unwrap(), b"new");
        let bak = dir.path().join("kv.json.bak");
        assert!(!fs::symlink_metadata(&bak).unwrap().is_symlink());
        assert_eq!(fs::read(&bak).unwrap(), b"old");
    }

    #[test]
    fn a_symlink_planted_at_a_predictable_temp_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("kv.json");
        // The name earlier releases used, and one with this process's pid and a suffix.
        let planted = [
            format!("kv.json.tmp{}", std::process::id()),
            format!("kv.json.tmp{}-0000000000000000", std::process::id()),
        ];
        for name in &planted {
            symlink(&victim, dir.path().join(name)).unwrap();
        }
        write_atomically(&path, b"new").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert!(!fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn temp_names_do_not_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let (a, _) = create_temp(&path).unwrap();
        let (b, _) = create_temp(&path).unwrap();
        assert_ne!(a, b);
        let base = "f";
        for t in [&a, &b] {
            assert!(is_temp_name(t.file_name().unwrap().to_str().unwrap(), base));
        }
    }

    #[test]
    fn permission_bits_of_the_replaced_file_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv.properties");
        fs::write(&path, b"a=1\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomically(&path, b"a=2\n").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&path, b"a=3\n").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    #[test]
    fn stale_temps_of_our_pattern_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        for stale in [
            "kvConfig.json.tmp4242",
            "kvConfig.json.tmp17-00ff00ff00ff00ff",
        ] {
            fs::write(dir.path().join(stale), b"half written").unwrap();
        }
        symlink(&victim, dir.path().join("kvConfig.json.tmp99")).unwrap();
        let kept = [
            "kvConfig.json",
            "kvConfig.json.bak",
            "kvConfig.json.tmpx",
            "kvConfig.json.tmp12-notes",
            "other.json.tmp4242",
            "victim",
        ];
        for name in &kept[..kept.len() - 1] {
            fs::write(dir.path().join(name), b"keep").unwrap();
        }
        assert_eq!(remove_stale_temps(&path), 3);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = kept.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(left, want);
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(remove_stale_temps(&dir.path().join("missing/x")), 0);
    }
}
