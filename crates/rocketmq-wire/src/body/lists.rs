use std::collections::BTreeMap;

use super::parse_object;
use crate::error::BodyError;
use crate::json::{value_as_string, JsonStyle, JsonWriter, ObjectExt};

/// A set of topic names, optionally with the broker to ask for more.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopicList {
    pub topic_list: Vec<String>,
    pub broker_addr: Option<String>,
}

impl TopicList {
    pub fn encode(&self) -> Vec<u8> {
        Self::encode_names(
            self.topic_list.iter().map(String::as_str),
            self.topic_list.len(),
            self.broker_addr.as_deref(),
        )
    }

    /// The body of a list of `count` names, written from borrowed names: a list of a million
    /// topics is not copied into owned strings first.
    pub fn encode_names<'a>(
        names: impl IntoIterator<Item = &'a str>,
        count: usize,
        broker_addr: Option<&str>,
    ) -> Vec<u8> {
        let mut w = JsonWriter::with_capacity(JsonStyle::Fastjson, 32 + count * 24);
        w.object(|w| {
            w.opt_str_field("brokerAddr", broker_addr);
            w.key("topicList").string_array(names);
        });
        w.finish()
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_object(body, "TopicList")?;
        let topic_list = obj
            .opt_array("topicList")?
            .into_iter()
            .flatten()
            .map(|t| value_as_string("topicList", t))
            .collect::<Result<_, _>>()?;
        Ok(TopicList {
            topic_list,
            broker_addr: obj.opt_string("brokerAddr")?,
        })
    }
}

/// One KV namespace.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KvTable {
    pub table: BTreeMap<String, String>,
}

impl KvTable {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            w.key("table").object(|w| {
                for (k, v) in &self.table {
                    w.key(k).string(v);
                }
            });
        });
        w.finish()
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_object(body, "KVTable")?;
        let mut table = BTreeMap::new();
        for (k, v) in obj.opt_object("table")?.into_iter().flatten() {
            if !v.is_null() {
                table.insert(k.clone(), value_as_string(k, v)?);
            }
        }
        Ok(KvTable { table })
    }
}

/// The answer to GET_BROKER_MEMBER_GROUP.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BrokerMemberGroup {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: BTreeMap<i64, String>,
}

impl BrokerMemberGroup {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            w.key("brokerMemberGroup").object(|w| {
                w.key("brokerAddrs").object(|w| {
                    for (id, addr) in &self.broker_addrs {
                        w.num_key(*id).string(addr);
                    }
                });
                w.key("brokerName").string(&self.broker_name);
                w.key("cluster").string(&self.cluster);
            });
        });
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_lists() {
        let list = TopicList {
            topic_list: vec!["TopicTest".into(), "TBW102".into()],
            broker_addr: None,
        };
        assert_eq!(list.encode(), br#"{"topicList":["TopicTest","TBW102"]}"#);
        let with_addr = TopicList {
            topic_list: vec![],
            broker_addr: Some("192.168.0.1:10911".into()),
        };
        assert_eq!(
            with_addr.encode(),
            br#"{"brokerAddr":"192.168.0.1:10911","topicList":[]}"#
        );
        assert_eq!(TopicList::decode(&with_addr.encode()).unwrap(), with_addr);
        let kv = KvTable::decode(br#"{"table":{"TopicTest":"broker-a:4;broker-b:4"}}"#).unwrap();
        assert_eq!(
            kv.encode(),
            br#"{"table":{"TopicTest":"broker-a:4;broker-b:4"}}"#
        );
        let group = BrokerMemberGroup {
            cluster: "c".into(),
            broker_name: "unknown".into(),
            broker_addrs: BTreeMap::new(),
        };
        assert_eq!(
            group.encode(),
            br#"{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"unknown","cluster":"c"}}"#
        );
    }
}
