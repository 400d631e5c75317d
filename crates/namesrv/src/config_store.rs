//! The live configuration and its file: remote updates are persisted to `configStorePath`
//! before they take effect, as the KV store persists its changes.

use std::path::PathBuf;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::config::Settings;
use crate::persist::write_atomically;

pub struct ConfigStore {
    settings: RwLock<Settings>,
    /// Serialises updates so that the file always reflects the latest settings.
    write: Mutex<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The first key of the update that may never be changed remotely.
    #[error("config key {0} is blacklisted")]
    Blacklisted(String),
    #[error("cannot persist config to {path}: {1}", path = .0.display())]
    Write(PathBuf, std::io::Error),
}

impl ConfigStore {
    pub fn new(settings: Settings) -> Self {
        ConfigStore {
            settings: RwLock::new(settings),
            write: Mutex::new(()),
        }
    }

    /// The current settings. Hold the guard briefly: an update waits for it.
    pub fn settings(&self) -> RwLockReadGuard<'_, Settings> {
        self.settings.read()
    }

    /// Applies a remote update of `key=value` pairs: all of them or, if any key is blacklisted
    /// or the file cannot be written, none. The changed copy is persisted, and only then made
    /// visible, so that memory never holds what the disk does not.
    pub fn update(&self, props: &[(String, String)]) -> Result<(), UpdateError> {
        let _writer = self.write.lock();
        let mut next = self.settings.read().clone();
        if let Some(key) = next.blacklisted(props.iter().map(|(k, _)| k.as_str())) {
            return Err(UpdateError::Blacklisted(key.to_string()));
        }
        next.apply_update(props);
        let path = PathBuf::from(&next.server.config_store_path);
        write_atomically(&path, next.listing().as_bytes())
            .map_err(|e| UpdateError::Write(path, e))?;
        *self.settings.write() = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_in(dir: &std::path::Path, file: &str) -> ConfigStore {
        let mut settings = Settings::defaults(dir, None);
        settings.server.config_store_path = dir.join(file).display().to_string();
        ConfigStore::new(settings)
    }

    fn update(store: &ConfigStore, key: &str, value: &str) -> Result<(), UpdateError> {
        store.update(&[(key.to_string(), value.to_string())])
    }

    #[test]
    fn an_update_is_persisted_then_visible() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path(), "namesrv.properties");
        update(&store, "orderMessageEnable", "true").unwrap();
        assert!(store.settings().server.order_message_enable);
        let file = std::fs::read_to_string(dir.path().join("namesrv.properties")).unwrap();
        assert_eq!(file, store.settings().listing());
        assert!(file.contains("orderMessageEnable=true\n"));
    }

    #[test]
    fn a_blacklisted_key_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path(), "namesrv.properties");
        let before = store.settings().listing();
        let err = store
            .update(&[
                ("orderMessageEnable".into(), "true".into()),
                ("kvConfigPath".into(), "/elsewhere".into()),
            ])
            .unwrap_err();
        assert!(matches!(err, UpdateError::Blacklisted(ref k) if k == "kvConfigPath"));
        assert_eq!(store.settings().listing(), before);
        assert!(!dir.path().join("namesrv.properties").exists());
        let err = update(&store, "tls.server.mode", "disabled").unwrap_err();
        assert!(matches!(err, UpdateError::Blacklisted(_)));
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let store = store_in(dir.path(), "file/namesrv.properties");
        let err = update(&store, "orderMessageEnable", "true").unwrap_err();
        assert!(err.to_string().starts_with("cannot persist config to "));
        assert!(!store.settings().server.order_message_enable);
    }
}
