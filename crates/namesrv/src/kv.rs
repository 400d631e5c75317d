//! The namespaced KV store, persisted in the Java NameServer's file format
//! (`{"configTable":{namespace:{key:value}}}`) after every change, before the change is
//! acknowledged.

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::{Mutex, RwLock};
use rocketmq_wire::json::{parse_value, JsonStyle, JsonWriter, ObjectExt};

use crate::persist::{remove_stale_temps, write_atomically};

/// Namespace → key → value.
pub type Table = BTreeMap<String, BTreeMap<String, String>>;

/// The namespace whose entries make topics ordered.
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

pub struct KvStore {
    path: PathBuf,
    table: RwLock<Table>,
    /// Serialises writers so that the file always reflects the latest table.
    write: Mutex<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("cannot read KV file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("KV file {0} is not valid: {1}")]
    Parse(PathBuf, String),
    #[error("cannot write KV file {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

fn encode(table: &Table) -> Vec<u8> {
    let mut w = JsonWriter::new(JsonStyle::Fastjson);
    w.object(|w| {
        w.key("configTable").object(|w| {
            for (ns, entries) in table {
                w.key(ns).object(|w| {
                    for (k, v) in entries {
                        w.key(k).string(v);
                    }
                });
            }
        });
    });
    w.finish()
}

fn decode(bytes: &[u8]) -> Result<Table, String> {
    let mut table = Table::new();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(table);
    }
    let value = parse_value(bytes).map_err(|e| e.to_string())?;
    let obj = value.as_object().ok_or("not a JSON object")?;
    for (ns, entries) in obj
        .opt_object("configTable")
        .map_err(|e| e.to_string())?
        .into_iter()
        .flatten()
    {
        let entries = entries.as_object().ok_or("namespace is not an object")?;
        let ns_table = table.entry(ns.clone()).or_default();
        for (k, v) in entries {
            let value = match v {
                serde_json::Value::Null => continue,
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            ns_table.insert(k.clone(), value);
        }
    }
    Ok(table)
}

impl KvStore {
    /// Loads the file; a missing or empty file is an empty store, a corrupt one an error.
    pub fn open(path: PathBuf) -> Result<Self, KvError> {
        remove_stale_temps(&path);
        let table = if path.exists() {
            let bytes = std::fs::read(&path).map_err(|e| KvError::Read(path.clone(), e))?;
            decode(&bytes).map_err(|e| KvError::Parse(path.clone(), e))?
        } else {
            Table::new()
        };
        Ok(KvStore {
            path,
            table: RwLock::new(table),
            write: Mutex::new(()),
        })
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.table.read().get(namespace)?.get(key).cloned()
    }

    /// A namespace's entries; `None` if the namespace was never created (an emptied one stays).
    pub fn namespace(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.table.read().get(namespace).cloned()
    }

    /// Up to `limit` entries as `(namespace, key, value)`, in order, and how many there are in
    /// all: a view of a large store that costs what it shows, not what the store holds.
    pub fn first_entries(&self, limit: usize) -> (Vec<(String, String, String)>, usize) {
        let table = self.table.read();
        let total = table.values().map(BTreeMap::len).sum();
        let entries = table
            .iter()
            .flat_map(|(ns, entries)| entries.iter().map(move |(k, v)| (ns, k, v)))
            .take(limit)
            .map(|(ns, k, v)| (ns.clone(), k.clone(), v.clone()))
            .collect();
        (entries, total)
    }

    /// The whole table.
    pub fn table(&self) -> Table {
        self.table.read().clone()
    }

    /// Makes the table `table`, writing the file first, unless it already is: the replicated
    /// KV group's state, as this node applied it.
    pub fn replace(&self, table: Table) -> Result<(), KvError> {
        if *self.table.read() == table {
            return Ok(());
        }
        self.change(|t| *t = table)
    }

    /// Stores `value` (or removes the key for `None`, as a Java null value vanishes).
    pub fn put(&self, namespace: &str, key: &str, value: Option<&str>) -> Result<(), KvError> {
        self.change(|t| {
            let ns = t.entry(namespace.to_string()).or_default();
            match value {
                Some(v) => ns.insert(key.to_string(), v.to_string()),
                None => ns.remove(key),
            };
        })
    }

    /// Removes a key; the namespace stays even when emptied. The file is rewritten regardless.
    pub fn delete(&self, namespace: &str, key: &str) -> Result<(), KvError> {
        self.change(|t| {
            if let Some(ns) = t.get_mut(namespace) {
                ns.remove(key);
            }
        })
    }

    /// Applies `edit` to a copy, persists the copy, and only then makes it visible, so that
    /// memory never holds what the disk does not.
    fn change(&self, edit: impl FnOnce(&mut Table)) -> Result<(), KvError> {
        let _writer = self.write.lock();
        let mut next = self.table.read().clone();
        edit(&mut next);
        write_atomically(&self.path, &encode(&next))
            .map_err(|e| KvError::Write(self.path.clone(), e))?;
        *self.table.write() = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_format_matches_java() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let kv = KvStore::open(path.clone()).unwrap();
        kv.put(ORDER_TOPIC_CONFIG, "TopicTest", Some("broker-a:4"))
            .unwrap();
        kv.put("ns", "k", Some("v")).unwrap();
        kv.delete("ns", "k").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicTest":"broker-a:4"},"ns":{}}}"#
        );
        let reopened = KvStore::open(path).unwrap();
        assert_eq!(
            reopened.get(ORDER_TOPIC_CONFIG, "TopicTest").as_deref(),
            Some("broker-a:4")
        );
        assert_eq!(reopened.namespace("ns"), Some(BTreeMap::new()));
        assert_eq!(reopened.namespace("none"), None);
    }

    #[test]
    fn corrupt_file_refuses_to_load_and_empty_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.json");
        std::fs::write(&path, "{not json").unwrap();
        assert!(KvStore::open(path.clone()).is_err());
        std::fs::write(&path, "").unwrap();
        assert!(KvStore::open(path).unwrap().table().is_empty());
    }

    #[test]
    fn failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let kv = KvStore::open(blocker.join("kv.json")).unwrap();
        assert!(kv.put("ns", "k", Some("v")).is_err());
        assert_eq!(kv.get("ns", "k"), None);
    }
}
