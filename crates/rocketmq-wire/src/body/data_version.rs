use serde_json::{Map, Value};

use crate::error::BodyError;
use crate::json::{parse_value_bounded, JsonStyle, JsonWriter, ObjectExt};

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
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Numbers {
            counter: Option<i64>,
            state_version: Option<i64>,
            timestamp: Option<i64>,
        }
        if let Some(n) = crate::json::parse_strict::<Numbers>(body) {
            return Ok(DataVersion {
                counter: n.counter.unwrap_or(0),
                state_version: n.state_version.unwrap_or(0),
                timestamp: n.timestamp.unwrap_or_else(crate::clock::now_ms),
            });
        }
        match parse_value_bounded(body, "DataVersion")? {
            Value::Object(obj) => Self::from_object(&obj),
            _ => Err(BodyError::Format("DataVersion is not an object".into())),
        }
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
