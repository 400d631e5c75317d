//! Crash-safe file replacement shared by the KV store and the server config.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

/// Replaces `path` with `contents` so that a crash at any moment leaves either the old or the
/// new file: write a temp file beside it, fsync, rename over, fsync the directory. The previous
/// content is kept in `<path>.bak` as the Java NameServer does.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir)?;
    if path.exists() {
        let mut bak = path.as_os_str().to_owned();
        bak.push(".bak");
        fs::copy(path, &bak)?;
    }
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = Path::new(&tmp_name);
    let result = (|| {
        let mut file = File::create(tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".tmp")
            })
            .collect();
        assert!(leftovers.is_empty());
    }
}
