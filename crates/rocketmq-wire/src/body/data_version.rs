use serde_json::{Map, Value};

use crate::error::BodyError;
use crate::json::{JsonStyle, JsonWriter, ObjectExt};

/// A broker's topic-config version; brokers and the NameServer compare all three fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DataVersion {
    pub counter: i64,
    pub state_version: i64,
    pub timestamp: i64,
}

impl DataVersion {
    /// A missing timestamp defaults to "now", as the Java constructor does.
    pub fn from_object(obj: &Map<String, Value>) -> Result<Self, BodyError> {
        Ok(DataVersion {
            counter: obj.i64_or("counter", 0)?,
            state_version: obj.i64_or("stateVersion", 0)?,
            timestamp: match obj.present("timestamp") {
                Some(_) => obj.i64_or("timestamp", 0)?,
                None => crate::clock::now_ms(),
            },
        })
    }

    /// Brokers send the three numbers; anything else is read leniently if it is small.
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        if let Some(v) = crate::json::parse_strict::<super::register_strict::Version>(body) {
            return Ok(v.into_data_version());
        }
        Self::from_object(&super::parse_peer_object(body, "DataVersion")?)
    }

    pub fn write(&self, w: &mut JsonWriter) {
        w.object(|w| {
            w.key("counter").int(self.counter);
            w.key("stateVersion").int(self.state_version);
            w.key("timestamp").int(self.timestamp);
        });
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        self.write(&mut w);
        w.finish()
    }
}
